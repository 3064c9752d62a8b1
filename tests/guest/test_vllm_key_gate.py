"""The key gate a VM exposed beyond loopback runs vLLM with (cloudinit/vllm_path/vllm_key_gate.py): vLLM checks its
key under /v1, /v2, /inference and /cohere only (catalog.vllm.API_KEY_GUARDED_PREFIXES), so the gate asks it on every
other route too. Exercised as vLLM loads it: a class `app.add_middleware()` wraps around a Starlette app (vLLM's
FastAPI is one) holding routes of vLLM's own names, called through httpx's ASGI transport from a given peer."""

from __future__ import annotations

import asyncio
import importlib.util

import httpx
import pytest
import yaml
from conftest import REPO
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from gemma4_t4 import catalog
from gemma4_t4.components.gce import guest as render

KEY = "k" * 40
# Routes vLLM serves without its own key check (vLLM's security guide lists them); /v1 is checked by vLLM too.
OPEN_IN_VLLM = ("/invocations", "/pause", "/abort_requests", "/tokenize", "/metrics", "/health", "/v1/models")


def gate_module():
    spec = importlib.util.spec_from_file_location("vllm_key_gate", REPO / "cloudinit" / "vllm_path" / "vllm_key_gate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def vllm_like_app(monkeypatch) -> Starlette:
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    app = Starlette(routes=[Route(path, lambda request: PlainTextResponse("served"), methods=["GET", "POST"])
                            for path in OPEN_IN_VLLM])
    app.add_middleware(gate_module().KeyGate)  # how vLLM adds a --middleware class
    return app


def status(app: Starlette, peer: str, path: str, headers: dict[str, str] | None = None) -> int:
    async def call() -> int:
        transport = httpx.ASGITransport(app=app, client=(peer, 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://vm:8000") as client:
            return (await client.post(path, headers=headers)).status_code

    return asyncio.run(call())


@pytest.mark.parametrize("path", OPEN_IN_VLLM)
def test_from_beyond_loopback_every_route_needs_the_key(monkeypatch, path):
    app = vllm_like_app(monkeypatch)
    assert status(app, "203.0.113.7", path) == 401
    assert status(app, "203.0.113.7", path, {"Authorization": "Bearer wrong"}) == 401
    assert status(app, "203.0.113.7", path, {"Authorization": f"Basic {KEY}"}) == 401
    assert status(app, "203.0.113.7", path, {"Authorization": f"Bearer {KEY}"}) == 200


def test_from_loopback_the_tunnel_and_the_idle_stop_pass_without_it(monkeypatch):
    app = vllm_like_app(monkeypatch)
    assert status(app, "127.0.0.1", "/metrics") == 200
    assert status(app, "::1", "/health") == 200


def test_without_a_key_the_gate_refuses_to_start(monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", " ")
    with pytest.raises(RuntimeError, match="VLLM_API_KEY is empty"):
        gate_module().KeyGate(Starlette())


def test_a_keyed_vm_runs_vllm_with_the_gate_importable_and_an_unkeyed_one_without_it():
    keyed = render.render_serving_env(["--model", "m", "--host", "0.0.0.0"], 8000, 0, api_key=KEY)
    args = next(line for line in keyed.splitlines() if line.startswith("VLLM_ARGS="))
    assert f"--middleware {catalog.vllm.KEY_GATE_MIDDLEWARE}" in args
    # vLLM's import path gains the gate's folder alone: no guest script (progress, hf_token, ...) can shadow a
    # package of vLLM's venv.
    assert f"\nPYTHONPATH={render.VLLM_PATH_DIR}\n" in keyed
    module, _, cls = catalog.vllm.KEY_GATE_MIDDLEWARE.rpartition(".")
    assert hasattr(gate_module(), cls)
    assert [m.name for m in render.vllm_path_modules()] == [f"{module}.py"]
    files = yaml.safe_load(render.render_user_data(render.GuestSettings("gemma4-data", 16)))["write_files"]
    assert [f["path"] for f in files if f["path"].startswith(render.VLLM_PATH_DIR + "/")] == [
        f"{render.VLLM_PATH_DIR}/{module}.py"]
    assert "--middleware" not in render.render_serving_env(["--model", "m"], 8000, 0)
