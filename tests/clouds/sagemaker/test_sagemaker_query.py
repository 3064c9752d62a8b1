"""Queries to a SageMaker endpoint within SageMaker's limits: boto3 against a scripted stand-in of
sagemaker-runtime on loopback (the wire format is AWS's: rest-json errors, the vnd.amazon.eventstream
response stream with its exception events). Each error class gets its own message, a broken
stream is reported without a traceback, and an invocation is never sent twice. Budget: ~15 s."""

from __future__ import annotations

import contextlib
import json
import os
import struct
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import REPO, run
from sagemaker_standin import _header, event_message

from gemma4_t4.clouds.sagemaker.target import SageMakerTarget
from gemma4_t4.core import ops
from gemma4_t4.core.targets import TargetError

pytestmark = pytest.mark.standin

AWS = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_EC2_METADATA_DISABLED": "true",
       "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}
MODEL = "gemma"


def exception_event(kind: str, payload: dict) -> bytes:
    headers = (_header(":exception-type", kind) + _header(":content-type", "application/json")
               + _header(":message-type", "exception"))
    body = json.dumps(payload).encode()
    prelude = struct.pack(">II", 12 + len(headers) + len(body) + 4, len(headers))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + body
    return message + struct.pack(">I", zlib.crc32(message))


def chunk(text: str, finish: str | None = None) -> bytes:
    return b"data: " + json.dumps({"choices": [{"delta": {"content": text}, "finish_reason": finish}]}).encode() + b"\n\n"


USAGE = b"data: " + json.dumps({"choices": [], "usage": {"completion_tokens": 3}}).encode() + b"\n\n"


class Runtime:
    """sagemaker-runtime and the three DescribeX calls, answering as ``self.script`` says."""

    def __init__(self) -> None:
        self.script = "ok"
        self.invocations = 0
        runtime = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for key, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(key, value)
                self.end_headers()
                with contextlib.suppress(BrokenPipeError):  # the client gave up first (the timeout test)
                    self.wfile.write(body)

            def _error(self, status: int, code: str, message: str) -> None:
                self._send(status, json.dumps({"message": message}).encode(),
                           {"Content-Type": "application/json", "X-Amzn-ErrorType": f"{code}:http://internal"})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                target = self.headers.get("X-Amz-Target", "")
                if target:
                    return self._control(target.split(".")[-1], json.loads(body or b"{}"))
                runtime.invocations += 1
                script = runtime.script
                if script == "slow":
                    time.sleep(3)
                if script in ("timeout", "slow"):
                    return self._error(424, "ModelError", "Received server error (0) from primary with message "
                                       "\"Your invocation timed out while waiting for a response from container "
                                       "primary.\"")
                if script == "container-error":
                    return self._error(424, "ModelError", "Received client error (400) from primary with message "
                                       "\"max_tokens is too large\"")
                if script == "throttled":
                    return self._error(400, "ThrottlingException", "Rate exceeded")
                if script == "internal":
                    return self._error(500, "InternalFailure", "An internal error occurred")
                if script == "not-ready":
                    return self._error(429, "ModelNotReadyException", "Model is not ready")
                if script == "missing":
                    return self._error(400, "ValidationError", "Endpoint nope of account 123 not found.")
                if not self.path.endswith("invocations-response-stream"):
                    reply = {"choices": [{"message": {"content": "Mercury"}, "finish_reason": "stop"}],
                             "usage": {"completion_tokens": 1}}
                    return self._send(200, json.dumps(reply).encode(), {"Content-Type": "application/json"})
                parts = [chunk("Mercury, "), chunk("Venus, "), chunk("Earth", "stop"), USAGE, b"data: [DONE]\n\n"]
                if script == "stream-error":
                    parts = [*parts[:2], exception_event("ModelStreamError", {
                        "Message": "Your model primary did not complete sending the inference response in the "
                                   "allotted time.", "ErrorCode": "ModelInvocationTimeExceeded"})]
                if script == "stream-cut":
                    parts = parts[:2]
                payload = b"".join(event_message(p) if p.startswith(b"data:") else p for p in parts)
                self._send(200, payload, {"Content-Type": "application/vnd.amazon.eventstream"})

            def _control(self, operation: str, request: dict) -> None:
                answers = {
                    "DescribeEndpoint": {"EndpointName": "gemma", "EndpointStatus": "InService",
                                         "EndpointConfigName": "gemma-config"},
                    "DescribeEndpointConfig": {"ProductionVariants": [{"ModelName": "gemma-model"}]},
                    "DescribeModel": {"PrimaryContainer": {"Environment": {"SM_VLLM_SERVED_MODEL_NAME": MODEL}}}}
                self._send(200, json.dumps(answers[operation]).encode(), {"Content-Type": "application/x-amz-json-1.1"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def runtime():
    server = Runtime()
    yield server
    server.server.shutdown()


@pytest.fixture
def target(runtime, monkeypatch):
    for key, value in AWS.items():
        monkeypatch.setenv(key, value)
    runtime.script, runtime.invocations = "ok", 0
    return SageMakerTarget("gemma", "us-east-2", endpoint_url=runtime.url, read_timeout_s=1)


def cli_query(runtime, *extra: str):
    return run([sys.executable, "-m", "gemma4_t4", "query", "Name the inner planets.", "--endpoint", "gemma",
                "--region", "us-east-2", "--endpoint-url", runtime.url, *extra], cwd=REPO, env={**os.environ, **AWS})


def test_the_cli_streams_from_sagemaker_by_default(runtime, target):
    result = cli_query(runtime)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Mercury, Venus, Earth\n" and "finish: stop" in result.stderr
    plain = cli_query(runtime, "--no-stream")
    assert plain.returncode == 0 and plain.stdout == "Mercury\n"


@pytest.mark.parametrize("script,words", [
    ("timeout", "did not answer within SageMaker's 60s: stream it"),
    ("container-error", "the model container answered with an error: Received client error (400)"),
    ("throttled", "SageMaker answered ThrottlingException: Rate exceeded; not retried"),
    ("internal", "SageMaker answered InternalFailure"),
    ("not-ready", "is not ready for requests yet"),
    ("missing", "endpoint gemma not found in us-east-2"),
])
def test_each_error_class_has_its_message_and_is_sent_once(runtime, target, script, words):
    runtime.script = script
    with pytest.raises(TargetError) as caught:
        target.chat({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
    assert words in str(caught.value)
    assert runtime.invocations == 1, "an invocation must never be retried"


def test_a_slow_answer_times_out_once_with_the_limit_named(runtime, target):
    runtime.script = "slow"
    with pytest.raises(TargetError, match=r"no answer in 1s \(SageMaker ends a real-time invocation at 60s\)"):
        target.chat({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
    assert runtime.invocations == 1


def test_a_stream_error_midway_keeps_the_partial_answer_and_says_why(runtime, target):
    runtime.script = "stream-error"
    pieces = []
    with pytest.raises(TargetError) as caught:
        pieces.extend(p for p in ops.query_stream(target, "hi", MODEL) if isinstance(p, str))
    assert pieces == ["Mercury, ", "Venus, "]
    assert "the stream broke midway (SageMaker's time for one streamed answer ran out: ask for fewer " \
           "--max-tokens): Your model primary did not complete" in str(caught.value)
    assert runtime.invocations == 1


def test_a_stream_cut_without_its_end_is_not_taken_for_an_answer(runtime, target):
    runtime.script = "stream-cut"
    with pytest.raises(TargetError, match=r"the stream ended before the answer was complete"):
        list(ops.query_stream(target, "hi", MODEL))


def test_the_cli_reports_a_broken_stream_without_a_traceback(runtime, target):
    runtime.script = "stream-error"
    result = cli_query(runtime)
    assert result.returncode == 1
    assert result.stdout == "Mercury, Venus, \n"
    assert "the stream broke midway" in result.stderr and "Traceback" not in result.stderr
