"""vLLM's key on every route, for a VM exposed beyond its loopback (allowNonLoopbackHost).

vLLM checks its API key only under /v1, /v2, /inference and /cohere (docs.vllm.ai/en/stable/usage/security/):
/invocations, /pause, /abort_requests, /tokenize, /metrics and the rest answer anyone the firewall lets in. vLLM
loads this ASGI middleware by import path (`--middleware vllm_key_gate.KeyGate`, vllm/entrypoints/openai/cli_args.py
FrontendArgs.middleware: "If a class is provided, vLLM will add it to the server using app.add_middleware()"), so it
wraps every route, mounts included. A request from loopback passes as before: the IAP tunnel arrives through sshd on
127.0.0.1, and the guest's own idle stop and progress read /metrics and /health there. Any other client must send
`Authorization: Bearer $VLLM_API_KEY`; vLLM's own check still runs on /v1. Standard library only: it runs inside
vLLM's venv.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

KEY_ENV = "VLLM_API_KEY"
UNAUTHORIZED = json.dumps({"error": "Unauthorized"}).encode()


def from_loopback(scope: Scope) -> bool:
    client = scope.get("client")
    if not client:
        return False  # no peer address (a Unix socket, a test harness): not known to be loopback
    try:
        return ipaddress.ip_address(client[0]).is_loopback
    except ValueError:
        return False


def bearer(scope: Scope) -> bytes:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"authorization":
            scheme, _, token = bytes(value).partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" else b""
    return b""


class KeyGate:
    """The ASGI app APP, answering 401 to any HTTP or WebSocket request from beyond loopback without the key."""

    def __init__(self, app: App, key: str | None = None) -> None:
        self.app = app
        key = key if key is not None else os.environ.get(KEY_ENV, "")
        if not key.strip():
            # Loaded only with a key (components/gce/guest.py): without one, refuse to start rather than serve open.
            raise RuntimeError(f"vllm_key_gate: {KEY_ENV} is empty; the gate has no key to check")
        self.key = key.strip().encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or from_loopback(scope) \
                or hmac.compare_digest(bearer(scope), self.key):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # policy violation, before accepting
            return
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": UNAUTHORIZED})
