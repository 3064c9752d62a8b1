"""A first boot that overlaps its work: provisioning's background jobs (provision.sh's job and join, each a step whose
failure is said as its own), and the model fetched ahead of vLLM's start (prefetch.sh, prefetch_model.py) from the Hub
stand-in the boot benchmark serves (hub_repo_standin.py), read by the real huggingface_hub."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from guest import hub_repo_standin

SCRIPTS = REPO / "cloudinit" / "scripts"
TERMINAL = 3  # provision.sh's word for a failure no retry heals


def provision(tmp_path: Path, body: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess, list[str]]:
    """BODY run in a bash that sourced provision.sh (its functions only), with its phases recorded in a file: the
    result and the phases, "PHASE DETAIL" each."""
    lib = tmp_path / "lib"
    lib.mkdir(exist_ok=True)
    phases = tmp_path / "phases"
    (lib / "guest_attributes.py").write_text(
        "import sys\nwith open(sys.argv[0].rsplit('/', 2)[0] + '/phases', 'a') as f:\n"
        "    f.write(' '.join(sys.argv[2:]) + '\\n')\n")
    script = f"set -euo pipefail\nsource {SCRIPTS / 'provision.sh'}\n{body}\n"
    env = {**os.environ, "GEMMA4_T4_LIB": str(lib), "GEMMA4_T4_STAGES": str(tmp_path / "stages")}
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=timeout)
    return result, phases.read_text().splitlines() if phases.exists() else []


def test_a_job_runs_beside_the_step_after_it_and_shows_its_stage_while_waited_for(tmp_path):
    """The network's job starts with the driver's step and works while it does; once provisioning waits for it, its
    stage is the phase (vllm-install, then model-download), and its success lets provisioning go on."""
    marks = tmp_path / "marks"
    result, phases = provision(tmp_path, f"""
network() {{ echo "job started $(date +%s.%N)" >>{marks}; stage vllm vllm-install "the wheels"; sleep 5
  stage vllm model-download "the model"; sleep 5; echo "job ended $(date +%s.%N)" >>{marks}; }}
job vllm network
step "nvidia driver" "fix it" sleep 1
echo "step ended $(date +%s.%N)" >>{marks}
join vllm "reach PyPI"
echo "provisioning goes on"
""")
    assert result.returncode == 0, result.stderr
    times = {" ".join(line.split()[:2]): float(line.split()[2]) for line in marks.read_text().splitlines()}
    assert times["job started"] < times["step ended"] < times["job ended"], times
    assert "provisioning goes on" in result.stdout and "step 'vllm' (in the background)" in result.stdout
    assert [p.split()[0] for p in phases] == ["vllm-install", "model-download"], phases


@pytest.mark.parametrize(("rc", "phase", "said"), [
    (1, "retrying", "FAILED at step 'vllm' (exit 1)"),
    (TERMINAL, "failed", "FAILED at step 'vllm', not retried"),
])
def test_a_failed_job_is_said_as_its_own_step_retried_or_not(tmp_path, rc, phase, said):
    result, phases = provision(tmp_path, f"""
job vllm bash -c 'exit {rc}'
step "nvidia driver" "fix it" true
join vllm "reach PyPI"
echo "never here"
""")
    assert result.returncode == rc and said in result.stderr and "never here" not in result.stdout
    assert phases[-1].startswith(f"{phase} step 'vllm'"), phases


def test_a_failed_step_waits_for_the_jobs_beside_it_before_it_ends_the_run(tmp_path):
    """A download is not thrown away half-way: the driver's step failed, and the run (retried by systemd) ends only
    once the job beside it has ended, which the log says."""
    done = tmp_path / "job-done"
    result, phases = provision(tmp_path, f"""
job vllm bash -c 'sleep 2; touch {done}'
step "nvidia driver" "fix it" false
""")
    assert result.returncode == 1 and done.exists(), result.stderr
    assert "FAILED at step 'nvidia driver' (exit 1)" in result.stderr
    assert "step 'vllm' (in the background) ended with exit 0" in result.stdout
    assert phases[-1].startswith("retrying step 'nvidia driver'"), phases


def test_the_driver_and_the_network_overlap_and_the_reboot_waits_for_both():
    """The order provisioning runs its steps in: the vLLM job starts before the driver's step and is joined after it,
    before the reboot."""
    text = (SCRIPTS / "provision.sh").read_text()
    main = text[text.index("main() {"):]
    assert main.index('job "vllm" vllm_job') < main.index('step "nvidia driver"') < main.index('join "vllm"') \
        < main.index("reboot_for_driver")


# --- the model fetched ahead ------------------------------------------------------------------------------------

def make_repo(folder: Path) -> hub_repo_standin.Repo:
    """A model repo as the Hub holds one: config, tokenizer, two indexed shards, a stray shard, another format's
    weights, an original/ folder, a picture."""
    files = {"config.json": b'{"model_type": "llama"}', "tokenizer.json": b"{}", "README.md": b"# tiny",
             "model.safetensors.index.json": b'{"weight_map": {"a": "model-00001-of-00002.safetensors", '
                                              b'"b": "model-00002-of-00002.safetensors"}}',
             "model-00001-of-00002.safetensors": os.urandom(300_000), "model-00002-of-00002.safetensors": b"\0" * 9,
             "consolidated.safetensors": b"\1" * 99, "pytorch_model.bin": b"\2" * 99, "original/params.json": b"{}",
             "original/sub/consolidated.safetensors": b"\3" * 9, "assets/logo.png": b"\4" * 9}
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return hub_repo_standin.Repo("org/tiny", folder)


@pytest.fixture
def guest_lib(tmp_path):
    """The guest's prefetch scripts beside serve.sh, with a Secret Manager stand-in (hf_token.py) that prints a
    token, and a vllm.env whose model is a Hub id; the venv is this checkout's (its huggingface_hub is the lock's)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in ("prefetch.sh", "prefetch_model.py", "serve.sh"):
        shutil.copy(SCRIPTS / name, lib / name)
    (lib / "hf_token.py").write_text("print('hf_secret_token')\n")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    # A wrapper, not a link: Python finds its venv from the path it was started by.
    (venv / "bin" / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (venv / "bin" / "python").chmod(0o755)
    for folder in ("home", "hf", "cache", "tmp"):
        (tmp_path / folder).mkdir()
    return lib, venv


def prefetch(tmp_path: Path, lib: Path, venv: Path, hub: str, args: str, secret: str = "") -> subprocess.CompletedProcess:
    env_file = tmp_path / "vllm.env"
    env_file.write_text(f"VLLM_ARGS={args}\nHOME={tmp_path}/home\nHF_HOME={tmp_path}/hf\n"
                        f"VLLM_CACHE_ROOT={tmp_path}/cache\nTMPDIR={tmp_path}/tmp\nHF_TOKEN_SECRET={secret}\n")
    env = {"PATH": os.environ["PATH"], "VENV": str(venv), "SERVICE_USER": "root", "HF_ENDPOINT": hub,
           "GEMMA4_T4_VLLM_ENV": str(env_file)}
    return subprocess.run(["bash", str(lib / "prefetch.sh"), "model"], capture_output=True, text=True, env=env,
                          timeout=120)


def whole(hf_home: Path, model: str, revision: str = "") -> bool:
    check = f"source {SCRIPTS / 'serve.sh'}; snapshot_whole {hf_home}/hub {model} {revision}"
    return subprocess.run(["bash", "-c", check]).returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="setpriv changes user: root only")
def test_the_model_is_fetched_as_vllm_reads_it_with_the_token_kept_out_of_sight(tmp_path, guest_lib):
    """What vLLM would download at its first start, fetched ahead from the Hub into the service's cache: the config
    and tokenizer files, every safetensors shard vLLM's offline start checks for (its pattern "original/**/*" leaves
    out original/sub/, not original/ itself); not another format's weights nor large assets. The snapshot is then whole (serve.sh serves it without the Hub); the Hub token came from the
    secret and went to the Hub, never into a log. A second run asks the Hub nothing."""
    lib, venv = guest_lib
    with hub_repo_standin.HubServer({"org/tiny": make_repo(tmp_path / "repo")}) as hub:
        assert not whole(tmp_path / "hf", "org/tiny")
        result = prefetch(tmp_path, lib, venv, hub.url, "--model org/tiny --max-model-len 256", "projects/p/secrets/s")
        assert result.returncode == 0, result.stdout + result.stderr
        assert whole(tmp_path / "hf", "org/tiny") and "is whole on the data disk" in result.stdout
        assert "Bearer hf_secret_token" in hub.authorizations and "hf_secret_token" not in result.stdout + result.stderr
        asked = len(hub.requests)
        again = prefetch(tmp_path, lib, venv, hub.url, "--model org/tiny --max-model-len 256")
        assert again.returncode == 0 and "org/tiny is whole on the data disk" in again.stdout
        assert len(hub.requests) == asked, hub.requests[asked:]
    snapshot = next((tmp_path / "hf" / "hub" / "models--org--tiny" / "snapshots").iterdir())
    got = sorted(p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if not p.is_dir())
    assert got == ["README.md", "config.json", "consolidated.safetensors", "model-00001-of-00002.safetensors",
                   "model-00002-of-00002.safetensors", "model.safetensors.index.json", "original/params.json",
                   "tokenizer.json"], got


@pytest.mark.skipif(os.geteuid() != 0, reason="setpriv changes user: root only")
def test_a_local_model_a_pinned_revision_and_no_hub_at_all(tmp_path, guest_lib):
    lib, venv = guest_lib
    repo = make_repo(tmp_path / "repo")
    with hub_repo_standin.HubServer({"org/tiny": repo}) as hub:
        local = prefetch(tmp_path, lib, venv, hub.url, "--model /opt1/cache/models/tiny")
        assert local.returncode == 0 and "a path on the VM" in local.stdout and hub.requests == []
        pinned = prefetch(tmp_path, lib, venv, hub.url, f"--model org/tiny --revision {repo.commit}")
        assert pinned.returncode == 0, pinned.stderr
        assert whole(tmp_path / "hf", "org/tiny", repo.commit) and not whole(tmp_path / "hf", "org/tiny")
    # The Hub out of reach: best effort, a failure provisioning only logs (vLLM downloads at its start as before).
    gone = prefetch(tmp_path, lib, venv, hub.url, "--model org/tiny")
    assert gone.returncode != 0 and not whole(tmp_path / "hf", "org/tiny")


def test_the_hub_stand_in_answers_what_vllm_asks_at_an_online_start(tmp_path):
    """vLLM's own download (the old first boot, the benchmark's baseline) asks through HfFileSystem and file_exists
    too: the listing, a file's info, and a file the repo does not have (EntryNotFound, cached under .no_exist)."""
    code = """
from huggingface_hub import HfFileSystem, file_exists, hf_hub_download
from huggingface_hub.errors import RemoteEntryNotFoundError
fs = HfFileSystem()
print(sorted(fs.ls("org/tiny", detail=False)))
print(fs.info("org/tiny/config.json")["size"], file_exists("org/tiny", "config.json"), file_exists("org/tiny", "x"))
try:
    hf_hub_download("org/tiny", "generation_config.json")
except RemoteEntryNotFoundError:
    print("EntryNotFound")
"""
    with hub_repo_standin.HubServer({"org/tiny": make_repo(tmp_path / "repo")}) as hub:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                                env={**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf")})
    assert result.returncode == 0, result.stderr
    listing, info, missing = result.stdout.splitlines()
    assert "'org/tiny/config.json'" in listing and "'org/tiny/original'" in listing
    assert info == "23 True False" and missing == "EntryNotFound"
    assert list((tmp_path / "hf" / "hub" / "models--org--tiny" / ".no_exist").rglob("generation_config.json"))


def test_the_mirror_serves_at_its_stated_rate(tmp_path):
    """The benchmark's link: 600 kB at 1 MB/s take 0.6 s, however many connections share it."""
    import httpx

    (tmp_path / "repo").mkdir()
    for name in ("a.bin", "b.bin"):
        (tmp_path / "repo" / name).write_bytes(b"\0" * 300_000)
    repo = hub_repo_standin.Repo("org/x", tmp_path / "repo")
    with hub_repo_standin.HubServer({"org/x": repo}, rate=1e6) as hub:
        started = time.monotonic()
        with httpx.Client() as client:
            for name in ("a.bin", "b.bin"):
                assert len(client.get(f"{hub.url}/org/x/resolve/main/{name}").content) == 300_000
        took = time.monotonic() - started
        resumed = httpx.get(f"{hub.url}/org/x/resolve/main/a.bin", headers={"Range": "bytes=299000-"})
        header = httpx.get(f"{hub.url}/org/x/resolve/main/a.bin", headers={"Range": "bytes=0-99"})
    assert 0.55 <= took < 2.0, took
    assert resumed.status_code == 206 and resumed.headers["Content-Range"] == "bytes 299000-299999/300000"
    assert len(resumed.content) == 1000
    assert header.status_code == 206 and header.headers["Content-Range"] == "bytes 0-99/300000"
    assert len(header.content) == 100
