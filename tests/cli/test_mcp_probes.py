"""The security review's probes (issue 36) replayed through the MCP SDK's client, each refused or harmless: the
stack's key never sent to a url the caller names, untrusted server text defanged, every input bounded, the HTTP
transport closed to a request without its token. The server the tools reach is a loopback recorder that answers
as vLLM does (its /health, and /v1/models' documented shape: {"object": "list", "data": [{"id": ...}]}) with the
hostile text the probes planted, and records what each request carried."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import pytest
from test_mcp import call, session

pytestmark = pytest.mark.standin

KEY = "sk-" + "k" * 40
# A model id as a hostile server may name it: an ANSI escape that clears the screen, a right-to-left override.
HOSTILE_ID = "gemma\x1b[2J\u202eevil"


class Recorder(BaseHTTPRequestHandler):
    """vLLM's answers to the operator tools' reads; every request's path and Authorization kept in `seen`."""

    seen: list[tuple[str, str | None]] = []
    model_id = "m"

    def do_GET(self):
        self.seen.append((self.path, self.headers.get("Authorization")))
        if self.path == "/health":
            body = b""
        elif self.path == "/v1/models":
            body = json.dumps({"object": "list", "data": [{"id": self.model_id, "object": "model"}]}).encode()
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def recorder():
    Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def url_of(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


# --- the key goes to the stack's own server only ---------------------------------------------------------------


def test_the_key_is_never_sent_to_a_loopback_port_the_caller_names(recorder):
    async def main():
        async with session(env={"VLLM_API_KEY": KEY}) as client:
            return await call(client, "status", url=url_of(recorder))

    status = anyio.run(main)
    assert status.data["serving"] is True
    assert Recorder.seen and all(auth is None for _, auth in Recorder.seen), Recorder.seen


@pytest.mark.parametrize("suffix,what", [("/some/path", "a path"), ("/?x=", "a query"), ("/v1?x=1", "a query"),
                                         ("/#frag", "a fragment")])
def test_a_url_with_a_path_or_query_is_refused_before_any_request(recorder, suffix, what):
    async def main():
        async with session(env={"VLLM_API_KEY": KEY}) as client:
            return await call(client, "status", url=url_of(recorder) + suffix)

    refused = anyio.run(main)
    assert refused.message.startswith(f"refused: url {url_of(recorder)}{suffix} has {what}")
    assert Recorder.seen == [], "a refused url was contacted"
