"""A GCE stack's server is reached through the stack's own IAP tunnel, never through whatever
already listens on a local port: an unrelated server there is never reported as the stack's.

The two servers are stand-ins for vLLM's OpenAI server answering /health (200, empty body) and
/v1/models (vllm/entrypoints/openai/api_server.py: {"object": "list", "data": [{"id", "max_model_len"}]})."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import REPO, run, send_json

pytestmark = pytest.mark.cli


def serving(model: str, port: int = 0, health: int = 200) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/health":
                self.send_response(health)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path == "/v1/models":
                send_json(self, 200, {"object": "list", "data": [{"id": model, "object": "model",
                                                                  "max_model_len": 256}]})
            else:
                self.send_error(404)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def unrelated():
    """Another server on 127.0.0.1:8000 (every GCE stack's default port), or, where something on
    this machine already holds 8000, on another port that the stack then names as its own."""
    try:
        server = serving("someone-elses-model", 8000)
    except OSError:
        server = serving("someone-elses-model")
    yield server
    server.shutdown()
    server.server_close()


def cli(*args: str, env: dict):
    return run([sys.executable, "-m", "gemma4_t4", *args], cwd=REPO, env=env)


def stack(port: int) -> dict:
    return {"cloud": "gce", "port": port, "served_model_name": "the-stacks-model",
            "target": {"instance": "gemma4-t4-gce-t4-vm", "zone": "us-west2-b", "project": "p"}}


def test_an_unrelated_server_is_not_the_stack_when_the_tunnel_cannot_open(unrelated, fake_pulumi, fake_gcloud):
    env = fake_gcloud(dict(os.environ, **fake_pulumi(stack(unrelated.server_address[1]))), logged_out=True)
    for args in (("status", "-s", "gce-t4"), ("status", "--stack", "gce-t4", "--json"),
                 ("query", "hi", "--stack", "gce-t4"), ("wait", "--stack", "gce-t4", "--timeout", "0")):
        result = cli(*args, env=env)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        assert "serving" not in result.stdout and "someone-elses-model" not in result.stdout + result.stderr
        assert "gcloud auth login" in result.stderr and "Traceback" not in result.stderr


def test_the_stacks_own_tunnel_reaches_its_vm_and_not_the_unrelated_server(unrelated, fake_pulumi, fake_gcloud):
    vm = serving("the-stacks-model")
    try:
        env = fake_gcloud(dict(os.environ, **fake_pulumi(stack(unrelated.server_address[1]))),
                          vm_port=vm.server_address[1])
        result = cli("status", "-s", "gce-t4", "--json", env=env)
        assert result.returncode == 0, result.stderr
        status = json.loads(result.stdout)
        assert status["serving"] is True and status["target"] == "gce:gemma4-t4-gce-t4-vm"
        assert [m["id"] for m in status["models"]] == ["the-stacks-model"]
    finally:
        vm.shutdown()
        vm.server_close()


def test_the_tunnel_takes_a_port_nothing_listens_on(unrelated, fake_gcloud, monkeypatch):
    from gemma4_t4.core.targets import GceTarget

    vm = serving("the-stacks-model")
    env = fake_gcloud(dict(os.environ), vm_port=vm.server_address[1])
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("GCLOUD_STANDIN_VM_PORT", env["GCLOUD_STANDIN_VM_PORT"])
    port = unrelated.server_address[1]
    target = GceTarget(f"http://127.0.0.1:{port}", instance="vm", zone="us-west2-b", project="p", port=port)
    try:
        target.open_tunnel()
        assert target.local_port != port and target.base_url == f"http://127.0.0.1:{target.local_port}"
        assert [m["id"] for m in target.models()] == ["the-stacks-model"]
        with socket.create_connection(("127.0.0.1", target.local_port), timeout=1):
            pass
    finally:
        target.close()
        vm.shutdown()
        vm.server_close()


def test_status_and_wait_say_why_not_in_text_and_json():
    """vLLM's /health answers 503 once its engine is dead (api_server.py: EngineDeadError)."""
    from conftest import free_port

    dead_engine = serving("m", health=503)
    nothing = f"http://127.0.0.1:{free_port()}"
    try:
        url = f"http://127.0.0.1:{dead_engine.server_address[1]}"
        text = cli("status", "--url", url, env=dict(os.environ))
        assert text.returncode == 1 and "NOT serving (/health answered HTTP 503)" in text.stdout
        as_json = json.loads(cli("status", "--url", nothing, "--json", env=dict(os.environ)).stdout)
        assert as_json["serving"] is False and as_json["reason"].startswith("cannot connect to")
        assert as_json["schema_version"] == 1
        waited = cli("wait", "--url", url, "--timeout", "0", "--json", env=dict(os.environ))
        assert waited.returncode == 1 and json.loads(waited.stdout)["last_probe"] == "/health answered HTTP 503"
        plain = cli("wait", "--url", url, "--timeout", "0", env=dict(os.environ))
        assert "(last check: /health answered HTTP 503)" in plain.stderr
    finally:
        dead_engine.shutdown()
        dead_engine.server_close()
