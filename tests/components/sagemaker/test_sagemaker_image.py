"""The clamped image's Dockerfile, built for real with buildah on the stand-in base, with its gates
running inside the build; and the sm_75 gate's verdicts.

The stand-in base (tests/fixtures/sagemaker-standin-base.sh: Debian 12's externally managed
Python, vLLM 0.30.0 without GPU dependencies, CPU torch, Triton 3.7.1, an entrypoint) is built
once and kept in buildah's storage. Budget (2 cores): base 3.5 min the first time, the Dockerfile
2.5 min, the checks inside the image ~20 s. Marked `image`: `make test` runs it, `make test-fast`
does not."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, require_tool

from gemma4_t4 import catalog
from gemma4_t4.components.sagemaker.build_context import build_context_files

pytestmark = pytest.mark.image

VLLM, TORCH = catalog.PINS["vllm.sagemaker"], catalog.PINS["torch.cpu"]
TRITON = catalog.PINS[f"triton.for_vllm.{VLLM}"]
# -v2: the entrypoint at the real base's path, and botocore (tests/fixtures/sagemaker-standin-base.sh).
BASE = f"localhost/gemma4-t4/standin-base:vllm-{VLLM}-triton-{TRITON}-torch-{TORCH}-v2"
BUILDAH_ENV = {**os.environ, "BUILDAH_ISOLATION": "chroot", "STORAGE_DRIVER": "vfs"}


def _ulimit(name: str, which: int, most: int) -> str:
    """``--ulimit`` at this process's limit, at most ``most``: a container may lower a limit, but
    raising one needs CAP_SYS_RESOURCE, which root in a sandbox or CI container may lack."""
    soft, hard = (most if v == resource.RLIM_INFINITY else min(v, most) for v in resource.getrlimit(which))
    return f"--ulimit={name}={soft}:{hard}"


# Debian 13's buildah (1.39) raises open files and processes to 1048576 ("setting RLIMIT_NOFILE
# ... operation not permitted"); Debian 12's (1.28) first sets its own process limit to 32768.
ULIMITS = [_ulimit("nofile", resource.RLIMIT_NOFILE, 1048576), _ulimit("nproc", resource.RLIMIT_NPROC, 32768)]


def buildah(*args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess:
    result = subprocess.run([require_tool("buildah"), *args], env=BUILDAH_ENV, capture_output=True, text=True,
                            timeout=timeout)
    if check and result.returncode != 0:
        pytest.fail(f"buildah {' '.join(args)} failed ({result.returncode}):\n{result.stdout[-3000:]}\n"
                    f"{result.stderr[-3000:]}")
    return result


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(build log, image, the base's config): the Dockerfile built from exactly the files the
    CodeBuild archive holds."""
    require_tool("mmdebstrap")
    subprocess.run([str(REPO / "tests" / "fixtures" / "sagemaker-standin-base.sh"), VLLM, TRITON, TORCH, BASE],
                   env={**BUILDAH_ENV, "PIP_PYTHON": sys.executable}, check=True, timeout=1800)
    context = tmp_path_factory.mktemp("context")
    for name, path in build_context_files().items():
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, context / name)
    image = "localhost/gemma4-t4/clamped:test"
    log = buildah("bud", "--layers=false", *ULIMITS, "--build-arg", f"BASE_IMAGE={BASE}",
                  "--build-arg", "SM75_GATE_ARGS=--allow-cpu-torch", "--tag", image, str(context))
    base_config = json.loads(buildah("inspect", "--type", "image", BASE).stdout)["OCIv1"]["config"]
    yield log.stdout + log.stderr, image, base_config
    buildah("rmi", "--force", image, check=False)


@pytest.fixture(scope="module")
def container(built):
    _, image, _ = built
    name = buildah("from", *ULIMITS, image).stdout.strip()
    yield name
    buildah("rm", name, check=False)


def run_in(container: str, *command: str) -> subprocess.CompletedProcess:
    return buildah("run", container, "--", *command, check=False)


def base_torch(container: str) -> str:
    """The stand-in's torch: its CPU build where PyTorch's CPU index (or a copy) is reachable, else
    PyPI's CUDA build (tests/fixtures/sagemaker-standin-base.sh)."""
    result = run_in(container, "python3", "-c", "import torch; print(torch.__version__)")
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_dockerfile_builds_and_its_gates_run_inside(built, container):
    log, _, _ = built
    assert f"turing_clamp check: OK: vLLM {VLLM}" in log
    assert "every variant fits: True; spill-free: True" in log
    torch = base_torch(container)
    if torch.endswith("+cpu"):  # the gate says it could not look, in the build's log
        assert f"sm75 gate: NOT CHECKED: torch {torch} is a CPU build" in log
    else:  # a CUDA build: the gate read its arch list, as on the real base
        assert f"sm75 gate: torch {torch} (CUDA" in log and "sm_75" in log


def test_the_image_runs_the_base_entrypoint_behind_the_tokens_wrapper(built, container):
    _, image, base = built
    config = json.loads(buildah("inspect", "--type", "image", image).stdout)["OCIv1"]["config"]
    assert base["Entrypoint"] == [catalog.SAGEMAKER_BASE_ENTRYPOINT]
    assert config["Entrypoint"] == ["python3", "/opt/turing-clamp/hf_token_entrypoint.py", *base["Entrypoint"]]
    assert config.get("Cmd") == base.get("Cmd") == ["serve"]
    assert config.get("Env") == base.get("Env")
    # Without a secret the base's entrypoint runs with the same arguments (the stand-in's execs a non-serve one).
    result = run_in(container, *config["Entrypoint"], "echo", "base entrypoint ran")
    assert result.returncode == 0 and result.stdout.strip() == "base entrypoint ran", result.stderr


def test_the_wrapper_reads_the_token_inside_the_image(container, moto):
    """The image's own python3 and botocore read the secret from moto on loopback, as the endpoint's container
    reads it from Secrets Manager with the execution role."""
    moto.reset()
    arn = moto.client("secretsmanager").create_secret(Name="hf", SecretString="hf_in_the_image")["ARN"]
    env = [f"--env={k}={v}" for k, v in {**moto.env(), catalog.HF_TOKEN_SECRET_ENV: arn}.items()]
    result = buildah("run", *env, container, "--", "python3", "/opt/turing-clamp/hf_token_entrypoint.py",
                     catalog.SAGEMAKER_BASE_ENTRYPOINT, "sh", "-c", 'echo "token=$HF_TOKEN"', check=False)
    assert result.returncode == 0 and result.stdout.strip() == "token=hf_in_the_image", result.stderr


def test_the_clamp_is_a_vllm_plugin_of_the_system_python(container):
    result = run_in(container, "python3", "-c", "from importlib.metadata import entry_points; import json; "
                    "print(json.dumps({e.value: str(e.dist.locate_file('')) "
                    "for e in entry_points(group='vllm.general_plugins')}))")
    assert result.returncode == 0, result.stderr
    plugins = json.loads(result.stdout)
    # vLLM registers its own plugins in the group too; the clamp sits beside vLLM, in the system
    # Python's dist-packages, where the entrypoint's python3 finds it.
    assert plugins["turing_clamp.plugin:register"] == "/usr/local/lib/python3.11/dist-packages"


def test_the_base_python_is_externally_managed_and_stays_so(container):
    """The Dockerfile installs despite PEP 668, without removing the marker: a plain pip install
    in the same image is still refused."""
    result = run_in(container, "python3", "-m", "pip", "install", "--no-index", "/opt/turing-clamp")
    assert result.returncode != 0 and "externally-managed-environment" in result.stdout + result.stderr


def test_without_the_stand_in_flag_the_gate_refuses_a_cpu_torch_and_passes_a_cuda_one(container):
    """As the real build runs it (no flag); every verdict on a fake torch: test_sagemaker_stack.py."""
    result = run_in(container, "python3", "/opt/turing-clamp/sm75_gate.py")
    if base_torch(container).endswith("+cpu"):
        assert result.returncode == 1
        assert "NOT CHECKED" in result.stderr and "only a CUDA torch can show sm_75" in result.stderr
    else:
        assert result.returncode == 0 and "arch: sm_75" in result.stdout, result.stdout + result.stderr


def test_the_real_build_never_passes_the_stand_in_flag():
    buildspec = (REPO / "turing" / "buildspec.yml").read_text()
    assert "SM75_GATE_ARGS" not in buildspec and "allow-cpu-torch" not in buildspec
    assert 'ARG SM75_GATE_ARGS=""' in (REPO / "turing" / "Dockerfile").read_text()
