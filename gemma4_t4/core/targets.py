"""Where the operator commands send their requests: the Target every cloud's target is, and HttpTarget,
any OpenAI-compatible URL. Each cloud's own target (a tunnel to a VM, a managed endpoint's API) is in its
folder (gemma4_t4/clouds/NAME/target.py). Every failure becomes a TargetError whose message says what
happened and what to do.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from .. import catalog
from ..errors import UsageError
from .untrusted import defang


class TargetError(RuntimeError):
    """A failure the operator can act on: the message says what and what to do, in one line.
    ``detail``: the client's whole text it was cut from (gcloud's stderr, a server's error page),
    for --verbose and the --json failure document."""

    def __init__(self, message: str, detail: str = ""):
        super().__init__(message)
        self.detail = detail


# Lines a client prints around its cause: gcloud's advice and warnings, pulumi's banner.
NOT_A_CAUSE = ("warning:", "recommendation:", "recommendations,", "rerun the ", "updates are available")


def cause(text: str) -> str:
    """The line of a client's long text (gcloud's, pulumi's stderr) that says what went wrong: its
    first `ERROR:`/`error:` line, else its first line that is not advice or a warning."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in lines:
        if line.lower().startswith("error:"):
            return line
    return next((line for line in lines if not line.lower().startswith(NOT_A_CAUSE)), lines[0] if lines else "")


def http_cause(response: httpx.Response) -> str:
    """An error answer in one line: its status, and the server's own words when they are short (a
    JSON error's message, an HTML page's <title>), never the page itself."""
    text = response.text
    message = ""
    try:
        body = response.json()
        error = body.get("error", body) if isinstance(body, dict) else body
        message = str(error.get("message") or error.get("detail") or "") if isinstance(error, dict) else ""
    except ValueError:
        if (title := re.search(r"<title[^>]*>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)) is not None:
            message = " ".join(title.group(1).split())
        elif "<" not in text[:200]:
            message = cause(text)
    phrase = response.reason_phrase or ""
    line = f"HTTP {response.status_code}" + (f" {phrase}" if phrase and phrase not in message else "")
    message = defang(" ".join(message.split()))  # the server's words: no escape sequence reaches a reader
    return f"{line}: {message[:200]}" if message else line


def vram(query_output: str) -> dict[str, Any]:
    """nvidia-smi's memory.used,memory.total (csv, no header, no units): one line per GPU, summed,
    and each GPU's pair where there are several (tensorParallelSize)."""
    gpus = [tuple(int(x) for x in line.split(",")) for line in query_output.strip().splitlines() if line.strip()]
    summary: dict[str, Any] = {"vram_used_mib": sum(g[0] for g in gpus), "vram_total_mib": sum(g[1] for g in gpus)}
    if len(gpus) > 1:
        summary["vram_per_gpu_mib"] = [list(g) for g in gpus]
    return summary


# What a target tells a caller about a request on the wire: "sent", then "answered" (Target.chat_stream).
OnWire = Callable[[str], None]


class Target(Protocol):
    label: str
    cloud: str  # the registered cloud it is on (gemma4_t4.clouds), "" for a bare URL

    def health(self) -> bool: ...
    def probe(self) -> tuple[bool, str]: ...
    def models(self) -> list[dict[str, Any]]: ...
    def chat(self, body: dict[str, Any]) -> dict[str, Any]: ...
    def chat_stream(self, body: dict[str, Any], on_wire: OnWire | None = None) -> Iterator[dict[str, Any]]:
        """The streamed answer's chunks. ON_WIRE, where the target can say: "sent" once, as the request leaves for the
        server (its first byte written), and "answered" once its response's headers are in, so a caller times the
        server and not its own client (the benchmark)."""
        ...
    def metrics(self) -> str | None: ...
    def describe(self) -> dict[str, Any]: ...
    def log_lines(self, follow: bool, lines: int = 200) -> Iterator[str]: ...
    def close(self) -> None: ...


def sse_events(lines: Iterator[str], require_done: bool = False) -> Iterator[dict[str, Any]]:
    """The JSON payloads of `data: {...}` server-sent events, until `data: [DONE]`. With
    ``require_done``, a stream that ends without it is an error: the answer was cut."""
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[len("data:"):].strip()
        if data == "[DONE]":
            return
        yield json.loads(data)
    if require_done:
        raise TargetError("the stream ended before the answer was complete (no [DONE]): the connection was closed "
                          "midway; ask again")


# --- OpenAI-compatible HTTP ----------------------------------------------------------------------

# Generation can take minutes on a T4 under load; connecting must not.
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 1800.0


# What `logs` says to a bare URL: a server's log is on its machine, which only a stack or an endpoint names.
NO_LOG_AT_A_URL = "a plain URL has no log to read: use --stack STACK, or --endpoint NAME --region REGION"

# The forms of a server's URL the tools take: its origin, or the OpenAI SDK's base (ORIGIN/v1), which names the same
# server. The tools add the API's paths themselves; a path, query, fragment or user part would send the request (and
# the stack's key, where it has one) somewhere the caller chose.
SERVER_URL_PATHS = ("", "/", "/v1", "/v1/")


def server_url(url: str) -> str:
    """URL if it names a server as the tools take it (SERVER_URL_PATHS); UsageError saying why not, with the URL to
    give instead. A URL without a scheme (localhost:8000) is refused with its http:// form, never taken as one: the
    scheme is the caller's to say (a server behind TLS is https), and the same --url means the same everywhere."""
    if "://" not in url:
        guess = f"http://{url}"
        try:
            named = bool(url) and bool(httpx.URL(guess).host)
        except httpx.InvalidURL:
            named = False
        if named:
            raise UsageError(f"url {url} has no scheme: give {guess} (or https://{url} for a server behind TLS)")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as err:
        raise UsageError(f"url {url}: {err}; give http(s)://host:port, e.g. http://127.0.0.1:8000") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise UsageError(f"url {url}: give http(s)://host:port, e.g. http://127.0.0.1:8000")
    extra = [what for what, there in (("a path", parsed.path not in SERVER_URL_PATHS), ("a query", parsed.query),
                                      ("a fragment", parsed.fragment), ("a user part", parsed.userinfo)) if there]
    if extra:
        origin = f"{parsed.scheme}://{parsed.host}" + (f":{parsed.port}" if parsed.port else "")
        raise UsageError(f"url {url} has {' and '.join(extra)}: give the server's origin, e.g. {origin} (the tools "
                         "add the API's paths themselves)")
    return url


def stack_api_key() -> str | None:
    """vLLM's key for a stack's own server (apiKey): the operator's environment holds it under the name vLLM reads it
    from (catalog.vllm.API_KEY_ENV). Only a stack's target sends it, never a URL a caller names."""
    return os.environ.get(catalog.vllm.API_KEY_ENV, "").strip() or None


@dataclass
class HttpTarget:
    base_url: str
    label: str = ""
    cloud: str = field(default="", init=False)
    read_timeout_s: float = READ_TIMEOUT_S
    api_key: str | None = field(default=None, repr=False)  # sent as a bearer token: a stack's own server only
    _client: httpx.Client | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # The OpenAI SDK's form (http://host:8000/v1) names the same server: the paths below add /v1.
        self.base_url = self.base_url.rstrip("/").removesuffix("/v1")
        self.label = self.label or self.base_url

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            timeout = httpx.Timeout(self.read_timeout_s, connect=CONNECT_TIMEOUT_S)
            # A stack with apiKey: vLLM refuses /v1 without it, through the tunnel too (stack_api_key).
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else None
            self._client = httpx.Client(base_url=self.base_url, timeout=timeout, headers=headers)
        return self._client

    def _error(self, path: str, err: Exception) -> TargetError:
        if isinstance(err, httpx.HTTPStatusError):
            return TargetError(f"{self.base_url}{path}: {http_cause(err.response)}", detail=err.response.text)
        if isinstance(err, httpx.TimeoutException):
            return TargetError(f"{self.base_url}{path}: no answer in time ({type(err).__name__})")
        return TargetError(f"cannot reach {self.base_url}: {err}")

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None,
                 timeout_s: float | None = None) -> httpx.Response:
        try:
            response = self.client.request(method, path, json=body,
                                           timeout=httpx.USE_CLIENT_DEFAULT if timeout_s is None else timeout_s)
            response.raise_for_status()
            return response
        except httpx.HTTPError as err:
            raise self._error(path, err) from None

    def probe(self) -> tuple[bool, str]:
        """(healthy, why not): refused, no answer in time, or the HTTP status /health gave."""
        try:
            response = self.client.get("/health", timeout=5)
        except httpx.TimeoutException:
            return False, "no answer from /health within 5s"
        except httpx.ConnectError as err:
            return False, f"cannot connect to {self.base_url} ({err})"
        except httpx.HTTPError as err:
            return False, f"{type(err).__name__}: {err}"
        if response.status_code == 200:
            return True, ""
        return False, f"/health answered HTTP {response.status_code}"

    def health(self) -> bool:
        return self.probe()[0]

    def models(self) -> list[dict[str, Any]]:
        return self._request("GET", "/v1/models", timeout_s=10).json()["data"]

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._request("POST", "/v1/chat/completions", {**body, "stream": False}).json()

    def chat_stream(self, body: dict[str, Any], on_wire: OnWire | None = None) -> Iterator[dict[str, Any]]:
        stream_body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        path = "/v1/chat/completions"
        extensions = {"trace": _wire_trace(on_wire)} if on_wire is not None else None
        try:
            with self.client.stream("POST", path, json=stream_body, extensions=extensions) as response:
                if response.is_error:
                    response.read()
                    response.raise_for_status()
                lines = response.iter_lines()
                yield from sse_events(lines)
                # Read past [DONE] to the end of the body: a response closed unread takes its
                # connection with it, and every next request would pay for a new one.
                for _ in lines:
                    pass
        except httpx.HTTPError as err:
            raise self._error(path, err) from None

    def metrics(self) -> str | None:
        try:
            return self._request("GET", "/metrics", timeout_s=10).text
        except TargetError:
            return None

    def describe(self) -> dict[str, Any]:
        return {}

    def log_lines(self, follow: bool, lines: int = 200) -> Iterator[str]:
        raise UsageError(NO_LOG_AT_A_URL)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


# httpcore's trace events (its "trace" request extension), on HTTP/1.1 and 2: the request's headers start to go out
# (after the connection is set up and taken from the pool, before the server can have seen any of it), and the
# response's headers are in.
WIRE_EVENTS = {"http11.send_request_headers.started": "sent", "http2.send_request_headers.started": "sent",
               "http11.receive_response_headers.complete": "answered",
               "http2.receive_response_headers.complete": "answered"}


def _wire_trace(on_wire: OnWire) -> Callable[[str, dict[str, Any]], None]:
    told: set[str] = set()

    def trace(event: str, info: dict[str, Any]) -> None:
        if (said := WIRE_EVENTS.get(event)) is not None and said not in told:
            told.add(said)
            on_wire(said)

    return trace


def free_local_port() -> int:
    """A port nothing listens on now, chosen by the kernel."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
