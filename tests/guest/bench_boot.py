"""`make bench-boot`: a GCE first boot, booted as the boot test boots it (tests/guest/test_guest_boot.py: Debian 13
under systemd-nspawn, the plan's own metadata, vLLM's CPU build standing in), with stand-ins of stated durations:

    BENCH_DKMS_S (300)          the driver's DKMS build, seconds of work (fake_nvidia.BUILD_SECONDS_FILE)
    BENCH_MIRROR_MB_S (20)      the one link the wheels (the stand-in lock's, 3.0 GB) and the checkpoint come over
    BENCH_CHECKPOINT_MB (1200)  the model's checkpoint on the Hub stand-in (hub_repo_standin.py), which the guest
                                reaches through HF_ENDPOINT: a tiny Llama whose padded vocabulary makes its size
    BENCH_GUEST_REF (none)      the guest's scripts and units as this git ref has them (the old guest: main)

It prints each part's start and end, their sum, the longest chain through them (timeline.py: the work's own
dependencies) and the first boot, and passes when the first boot is at most 1.15 x the longest chain.
Not part of `make test`: the file is no test_*.py, so only `make bench-boot` (which names it) collects it. Root, one
boot test or benchmark at a time (the boot test's lock), 12 GiB free under GEMMA4_T4_BOOT_WORK.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import test_guest_boot as boot
from conftest import REPO
from guest import fake_nvidia, harness, timeline

pytestmark = pytest.mark.boot

DKMS_S = int(os.environ.get("BENCH_DKMS_S", "300"))
MIRROR_MB_S = float(os.environ.get("BENCH_MIRROR_MB_S", "20"))
CHECKPOINT_MB = int(os.environ.get("BENCH_CHECKPOINT_MB", "1200"))
GUEST_REF = os.environ.get("BENCH_GUEST_REF") or None
REPO_ID = "gemma4-t4-bench/tiny-llama"
HUB_URL = "http://127.0.0.5"  # net.py's Hub
# The boot test's serving values, with the model a Hub id (not sized by the plan: the stand-in is no catalog model).
OVERRIDES = [f"model={REPO_ID}", *(o for o in boot.OVERRIDES if not o.startswith("model="))]
MAKE_MODEL = REPO / "tests" / "fixtures" / "make_tiny_model.py"
# One VM, one venv, the checkpoint, 1 GB of swap: its folder held at most 8.8 GB (du every 20 s, 2026-12-06, a 1.2 GB
# checkpoint), less than the boot test's four VMs; the checkpoint's first making holds a root filesystem with a venv
# (~6 GB) a while before.
NEEDS_GIB = 12


def megabytes(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")) / 1e6


def bench_checkpoint(tarball: Path, wheelhouse: Path, megabytes: int) -> Path:
    """The tiny Llama (make_tiny_model.py) padded to MEGABYTES (512 bytes a vocabulary row), made once per size with
    the stand-in lock's own torch and transformers: in a container of the boot test's root filesystem, a venv from the
    wheelhouse by uv (this checkout's). Kept under the boot test's cache."""
    vocab = megabytes * 1_000_000 // 512
    key = hashlib.sha256(MAKE_MODEL.read_bytes() + boot.STANDIN_LOCK.read_bytes() + str(vocab).encode()).hexdigest()
    out = boot.CACHE / f"bench-model-{key[:12]}"
    if (out / "config.json").exists():
        return out
    root = Path(tempfile.mkdtemp(prefix="model-", dir=boot.BOOT_WORK))
    partial = out.with_suffix(".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        with tarfile.open(tarball) as tar:
            tar.extractall(root, filter="fully_trusted")
        shutil.copy(REPO / ".venv" / "bin" / "uv", root / "usr/local/bin/uv")
        shutil.copy(MAKE_MODEL, root / "make_tiny_model.py")
        shutil.copy(boot.STANDIN_LOCK, root / "lock.txt")
        make = ("uv venv --quiet /v --python /usr/bin/python3 && uv pip install --quiet --python /v/bin/python "
                "--no-index --find-links /wheels --no-deps --require-hashes -r /lock.txt && "
                f"/v/bin/python /make_tiny_model.py /out {vocab}")
        made = subprocess.run(["systemd-nspawn", "--quiet", "--register=no", "--keep-unit", "--directory", str(root),
                               f"--bind-ro={wheelhouse}:/wheels", f"--bind={partial}:/out",
                               "--setenv=UV_CACHE_DIR=/var/tmp/uv", "/bin/sh", "-c", make],
                              capture_output=True, text=True)
        assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
        partial.rename(out)
    finally:
        if not boot.mounts_under(root):
            shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(partial, ignore_errors=True)
    return out


@pytest.fixture(scope="module")
def bench(pytestconfig, request) -> Iterator[dict]:
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
    if capture is not None:
        boot._capture.append(capture)
    if os.geteuid() != 0:
        pytest.fail("the boot benchmark needs root, as the boot test does")
    try:
        with harness.only_boot_test(boot.BOOT_LOCK):
            harness.require_free_space(boot.BOOT_WORK, NEEDS_GIB, "GEMMA4_T4_BOOT_WORK")
            started = time.monotonic()
            checkpoint = bench_checkpoint(harness.rootfs_tarball(boot.CACHE / "rootfs"), boot.CACHE / "wheels",
                                          CHECKPOINT_MB)
            boot.report("the bench checkpoint (made, or its cache)", time.monotonic() - started)
            for world in boot._world(request, OVERRIDES, {REPO_ID: str(checkpoint)}, MIRROR_MB_S * 1e6, GUEST_REF):
                yield {**world, "checkpoint": checkpoint}
    except (harness.BootTestBusy, harness.NotEnoughSpace) as refused:
        pytest.fail(str(refused), pytrace=False)


def test_the_first_boot_takes_its_longest_chain(bench):
    vm = boot.new_vm(bench, "bench", allow_cpu_standin=True)
    (vm.root / fake_nvidia.BUILD_SECONDS_FILE.lstrip("/")).write_text(f"{DKMS_S}\n")
    # An older guest (GUEST_REF) still reads the keyring package's version, which this checkout's guest.env lacks.
    old_guest = {"CUDA_KEYRING_VERSION": "1.1-1"} if GUEST_REF else {}
    boot.write_test_env(vm, True, HF_HUB_OFFLINE=None, HF_ENDPOINT=HUB_URL, **old_guest)
    booted = time.time()
    vm.start()
    boot.wait_for("vLLM healthy", lambda: boot.healthy(bench), 5400, vm, interval=2)
    healthy = time.time()
    parts = timeline.first_boot(vm, bench["network"], booted, healthy)
    settings = (f"guest: {GUEST_REF or 'this checkout'}; DKMS build {DKMS_S} s; mirror {MIRROR_MB_S:g} MB/s; "
                f"checkpoint {megabytes(bench['checkpoint']):.0f} MB; wheels {megabytes(boot.CACHE / 'wheels'):.0f} MB")
    text = timeline.report(parts, booted, healthy)
    with boot._capture[0].global_and_fixture_disabled() if boot._capture else contextlib.nullcontext():
        print(f"\n[boot bench] {settings}\n{text}", flush=True)
    (boot.CACHE / f"bench-boot-{GUEST_REF or 'checkout'}.txt").write_text(f"{settings}\n{text}\n")
    chain_s, _ = timeline.longest_chain(parts)
    if GUEST_REF is None:  # provisioning fetched the model whole: vLLM's start asks the Hub nothing
        assert "is whole on the data disk: serving it without asking the Hub" in vm.journal("gemma4-vllm")
    vm.shutdown()
    assert healthy - booted <= 1.15 * chain_s, f"the first boot is more than 1.15 x its longest chain:\n{text}"
