"""The security review's probes replayed through the MCP SDK's client, each refused or harmless: the
stack's key never sent to a url the caller names, untrusted server text defanged, every input bounded, the HTTP
transport closed to a request without its token. The server the tools reach is a loopback recorder that answers
as vLLM does (its /health, and /v1/models' documented shape: {"object": "list", "data": [{"id": ...}]}) with the
hostile text the probes planted, and records what each request carried."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import anyio
import pytest
from test_mcp import call, cli, session

from gemma4_t4.core import limits

pytestmark = pytest.mark.standin

KEY = "sk-" + "k" * 40
# A model id as a hostile server may name it: an ANSI escape that clears the screen, a right-to-left override.
HOSTILE_ID = "gemma\x1b[2J\u202eevil"


class Recorder(BaseHTTPRequestHandler):
    """vLLM's answers to the operator tools' reads; every request's path and Authorization kept in `seen`."""

    seen: ClassVar[list[tuple[str, str | None]]] = []
    model_id = "m"

    def do_POST(self):
        """A streamed chat completion in vLLM's chunk shape (OpenAI's chat.completion.chunk; data: [DONE] last),
        its pieces the hostile text; or, for an unknown path, vLLM's 404."""
        self.seen.append((self.path, self.headers.get("Authorization")))
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path != "/v1/chat/completions":
            self.send_error(404)
            return
        chunks = [{"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": piece},
                                                                   "finish_reason": None}]}
                  for piece in ("\x1b]0;pwned\x07", "\u202eevil", " ok")]
        chunks.append({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4}})
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

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


# --- untrusted text reaches the agent defanged ------------------------------------------------------------------

RAW = ("\x1b", "\x07", "\u202e")


def raw_in(value) -> bool:
    return any(char in json.dumps(value, ensure_ascii=False) for char in RAW)


def test_a_hostile_model_id_and_answer_reach_the_agent_escaped(recorder):
    Recorder.model_id = HOSTILE_ID
    try:
        async def main():
            async with session() as client:
                return (await call(client, "status", url=url_of(recorder)),
                        await call(client, "query", url=url_of(recorder), prompt="hi", max_tokens=8))
        status, query = anyio.run(main)
    finally:
        Recorder.model_id = "m"
    assert status.data["models"][0]["id"] == "gemma\\x1b[2J\\u202eevil" and not raw_in(status.data)
    assert query.data["untrusted_model_output"] == "\\x1b]0;pwned\\x07\\u202eevil ok"
    assert query.data["model"] == "gemma\\x1b[2J\\u202eevil" and not raw_in(query.data)
    messages = [message for _, _, message in query.progress]
    assert messages and not raw_in(messages) and "\\u202eevil" in messages


def test_a_hostile_model_id_in_an_error_is_quoted_and_escaped(recorder):
    Recorder.model_id = HOSTILE_ID
    try:
        async def main():
            async with session() as client:
                return await call(client, "query", url=url_of(recorder), prompt="hi", model="other")
        refused = anyio.run(main)
    finally:
        Recorder.model_id = "m"
    assert refused.message.endswith('/v1/models reports: "gemma\\x1b[2J\\u202eevil"') and not raw_in(refused.message)


# --- the operator's HF token is not sent for a model an agent names --------------------------------------------


def test_plan_and_cost_ask_the_hub_anonymously_for_a_model_an_agent_names(hub, tmp_path):
    async def main():
        async with session(env={"HF_TOKEN": "hf_" + "s" * 34, "GEMMA4_T4_CACHE_DIR": str(tmp_path)}) as client:
            return await call(client, "cost", stack="gce-t4", config=["gemma4-t4:model=Qwen/Qwen2.5-0.5B-Instruct"])

    cost = anyio.run(main)
    assert cost.data["cloud"] == "gce"
    assert hub.requests, "the Hub was asked (the model is not in the catalog)"
    assert hub.authorizations and all(auth is None for auth in hub.authorizations), hub.authorizations


# --- every input bounded, in the schema and when called ---------------------------------------------------------


def test_the_schemas_state_the_bounds():
    async def main():
        async with session() as client:
            return {tool.name: tool.input_schema["properties"] for tool in (await client.list_tools()).tools}

    tools = anyio.run(main)
    concurrency = json.dumps(tools["bench"]["concurrency"])
    assert f'"maximum": {limits.MAX_CONCURRENCY}' in concurrency and f'"maxItems": {limits.MAX_CONCURRENCY_STEPS}' \
        in concurrency
    assert tools["bench"]["repeats"]["maximum"] == tools["bench"]["load_repeats"]["maximum"] == limits.MAX_REPEATS
    assert tools["bench"]["long"]["maximum"] == tools["query"]["max_tokens"]["maximum"] == limits.MAX_TOKENS
    assert tools["query"]["prompt"]["maxLength"] == limits.MAX_PROMPT_CHARS
    for name in ("wait", "stop", "start"):
        assert tools[name]["timeout_s"]["maximum"] == limits.MAX_TIMEOUT_S, name
        assert tools[name]["interval_s"]["maximum"] == limits.MAX_INTERVAL_S, name


def test_calls_beyond_the_bounds_are_refused_before_any_request(recorder):
    async def main():
        async with session() as client:
            where = {"url": url_of(recorder)}
            return [await call(client, "bench", **where, concurrency=[300]),
                    await call(client, "bench", **where, repeats=10_000),
                    await call(client, "query", **where, prompt="x" * (limits.MAX_PROMPT_CHARS + 1)),
                    await call(client, "query", **where, prompt="hi", max_tokens=10**9),
                    await call(client, "wait", **where, timeout_s=10**9)]

    refused = anyio.run(main)
    assert all(outcome.result.is_error for outcome in refused)
    assert all("less than or equal to" in outcome.error or "at most" in outcome.error for outcome in refused), \
        [outcome.error for outcome in refused]
    assert Recorder.seen == [], "a call beyond a bound reached the server"


@pytest.mark.parametrize("args", [("bench", "run", "--concurrency", "300"), ("bench", "run", "--repeats", "10000"),
                                  ("query", "hi", "--max-tokens", "1000000000"), ("wait", "--timeout", "1e9")])
def test_the_cli_holds_the_same_bounds(recorder, args):
    result = cli(*args, "--url", url_of(recorder))
    assert result.returncode == 2 and ("limit" in result.stderr or "at most" in result.stderr), result.stderr
    assert Recorder.seen == []


# --- preflight checks the stack's own project only --------------------------------------------------------------


def test_preflight_never_moves_to_a_project_the_stack_file_does_not_name():
    async def main():
        async with session() as client:
            return (await call(client, "preflight", stack="gce-t4", project="victim"),
                    await call(client, "preflight", stack="gce-t4", config=["gcp:project=victim"]))

    no_own, moved = anyio.run(main)
    # The shipped gce-t4 stack file sets no gcp:project: a `project` has nothing to be confirmed against.
    assert no_own.message == ("refused: project victim is not stack gce-t4's: its stack file sets no gcp:project to "
                              "confirm it against")
    assert moved.message.startswith("refused: config gcp:project=victim: the tools check the stack's own project")


# --- the stacks a server may act on -----------------------------------------------------------------------------


def test_a_server_started_for_one_stack_refuses_the_others():
    async def main():
        async with session("--stack", "gce-t4") as client:
            return (await call(client, "cost", stack="sagemaker-t4"),
                    await call(client, "plan", stack="sagemaker-t4"),
                    await call(client, "cost", stack="gce-t4"))

    other_cost, other_plan, own = anyio.run(main)
    refusal = ("refused: stack sagemaker-t4: the server was started for gce-t4 only (--stack); start it with --stack "
               "sagemaker-t4 to allow it")
    assert other_cost.message == other_plan.message == refusal
    assert own.data["cloud"] == "gce"
