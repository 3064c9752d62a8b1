"""Where the operator commands send their requests: any OpenAI-compatible URL (a GCE VM through
its IAP tunnel is one), or a SageMaker endpoint through boto3's sagemaker-runtime.

Both speak the OpenAI chat body: the vLLM SageMaker container serves it at /invocations. Every
failure becomes a TargetError whose message says what happened and what to do.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from .. import catalog
from . import proc


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
    message = " ".join(message.split())
    return f"{line}: {message[:200]}" if message else line


def vram(query_output: str) -> dict[str, Any]:
    """nvidia-smi's memory.used,memory.total (csv, no header, no units): one line per GPU, summed,
    and each GPU's pair where there are several (tensorParallelSize)."""
    gpus = [tuple(int(x) for x in line.split(",")) for line in query_output.strip().splitlines() if line.strip()]
    summary: dict[str, Any] = {"vram_used_mib": sum(g[0] for g in gpus), "vram_total_mib": sum(g[1] for g in gpus)}
    if len(gpus) > 1:
        summary["vram_per_gpu_mib"] = [list(g) for g in gpus]
    return summary


class Target(Protocol):
    label: str

    def health(self) -> bool: ...
    def probe(self) -> tuple[bool, str]: ...
    def models(self) -> list[dict[str, Any]]: ...
    def chat(self, body: dict[str, Any]) -> dict[str, Any]: ...
    def chat_stream(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]: ...
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


@dataclass
class HttpTarget:
    base_url: str
    label: str = ""
    read_timeout_s: float = READ_TIMEOUT_S
    _client: httpx.Client | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # The OpenAI SDK's form (http://host:8000/v1) names the same server: the paths below add /v1.
        self.base_url = self.base_url.rstrip("/").removesuffix("/v1")
        self.label = self.label or self.base_url

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            timeout = httpx.Timeout(self.read_timeout_s, connect=CONNECT_TIMEOUT_S)
            # A stack with apiKey: vLLM refuses /v1 without it, through the tunnel too. The operator's environment
            # holds it under the name vLLM reads it from (catalog.vllm.API_KEY_ENV).
            key = os.environ.get(catalog.vllm.API_KEY_ENV, "").strip()
            headers = {"Authorization": f"Bearer {key}"} if key else None
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

    def chat_stream(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        stream_body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        path = "/v1/chat/completions"
        try:
            with self.client.stream("POST", path, json=stream_body) as response:
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
        raise TargetError("a plain URL has no log to read: use --stack STACK or --endpoint NAME")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


# --- GCE: the VM's loopback server through an IAP SSH tunnel -------------------------------------


def free_local_port() -> int:
    """A port nothing listens on now, chosen by the kernel."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# What gcloud and IAP print when a tunnel does not open, and what each means at that moment. The
# texts: `Error while connecting [CODE: 'TEXT']` from gcloud's start-iap-tunnel (the ProxyCommand
# of `gcloud compute ssh --tunnel-through-iap`), as published transcripts show them: 4003 while the
# VM's sshd does not answer (hashicorp/packer#13164, terraform-google-modules/
# terraform-google-bastion-host#58), 4033 without roles/iap.tunnelResourceAccessor (a recorded
# `gcloud compute ssh` transcript in NVIDIA/spark-rapids-tools' bootstrap test), 4047 while IAP does
# not know the new VM yet (hashicorp/packer-plugin-googlecompute#195), 4010 a dropped connection
# (ZcashFoundation/zebra#5362). Packer's googlecompute builder retries 4003, 4033 and 4047 right
# after creating a VM ("after about a minute of retries this goes away": step_start_tunnel.go).
@dataclass(frozen=True)
class TunnelSign:
    text: str  # what to look for in gcloud's stderr
    seen: str  # what it means, for the person waiting
    grace_s: float | None = None  # fatal once seen this long without a tunnel; None: retried until timeout


IAP_NOT_AUTHORIZED_FIX = ("your account needs roles/iap.tunnelResourceAccessor (IAP-secured Tunnel User) on the "
                          "VM (add it to the stack's operators, then pulumi up), and port 22 open to 35.235.240.0/20 "
                          "(the stack's firewall rule)")
TUNNEL_SIGNS = (
    TunnelSign("You do not currently have an active account selected",
               "gcloud has no active account: run `gcloud auth login`", grace_s=0),
    TunnelSign("4003: 'failed to connect to backend'",
               "the VM's sshd does not answer yet (IAP 4003: failed to connect to backend): booting or rebooting"),
    TunnelSign("4033: 'not authorized'", f"IAP refused the tunnel (4033: not authorized): {IAP_NOT_AUTHORIZED_FIX}",
               grace_s=120),
    TunnelSign("4047: 'Failed to lookup instance'",
               "IAP does not know the VM yet (4047: Failed to lookup instance)"),
    TunnelSign("4010: 'destination read failed'", "the IAP connection dropped (4010: destination read failed)"),
    TunnelSign("Permission denied (publickey)",
               "sshd refused the key (Permission denied (publickey)): a new key takes a minute to reach the VM; "
               "if it lasts, your account needs roles/compute.osLogin on the VM (the stack's operators)", grace_s=180),
    # ssh(1) when the far end closes an open session, e.g. sshd stopping for the driver's reboot.
    TunnelSign("closed by remote host", "the VM closed the tunnel (a reboot?)"),
    # OpenSSH channels.c with ExitOnForwardFailure, when the local port was taken meanwhile.
    TunnelSign("Address already in use", "the local port was taken meanwhile; another one is tried"),
)


def read_tunnel_failure(stderr: str) -> TunnelSign:
    """What gcloud's stderr says about a tunnel that ended or never opened."""
    for sign in TUNNEL_SIGNS:
        if sign.text in stderr:
            return sign
    return TunnelSign("", f"the IAP tunnel ended: {cause(stderr) or 'gcloud said nothing'}")


# Reopening a tunnel that is down: 0.5 s, then doubling up to 30 s; an open tunnel resets it.
BACKOFF_FIRST_S, BACKOFF_MAX_S = 0.5, 30.0
# A gcloud that has neither opened the port nor ended by then is ended and started again (a first
# run generates a key and waits for it to reach the VM, which takes a while: leave it that long).
OPENING_LIMIT_S = 180.0


@dataclass
class IapTunnel:
    """`gcloud compute ssh --tunnel-through-iap -- -N -L PORT:127.0.0.1:REMOTE`, kept open: whenever
    it is down, it is opened again (with backoff) on a new free port. Never on a port something
    already listens on: another local vLLM, or another stack's tunnel, would answer for this VM."""

    argv: Any  # Callable[[str], list[str]]: the gcloud command for a forward spec
    instance: str
    remote_port: int
    local_port: int = 0
    process: subprocess.Popen | None = field(default=None, repr=False)
    _stderr: Any = field(default=None, repr=False)
    _started_at: float = 0.0
    _open: bool = False  # this process's listener has answered
    _next_try_at: float = 0.0
    _backoff_s: float = BACKOFF_FIRST_S
    _failing_since: dict[str, float] = field(default_factory=dict, repr=False)
    seen: str = "the IAP tunnel is not open yet"

    def _port_answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.local_port), timeout=1):
                return True
        except OSError:
            return False

    def _start(self) -> None:
        self.local_port = free_local_port()
        forward = f"{self.local_port}:127.0.0.1:{self.remote_port}"
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed when the tunnel ends)
        # proc.start: stdin /dev/null (nothing waits on a hidden prompt; gcloud runs with --quiet) and a
        # session of its own: gcloud runs ssh, which runs gcloud's IAP helper; close() ends them all.
        # ExitOnForwardFailure: a port taken meanwhile ends ssh rather than reaching another listener.
        # ServerAlive*: a tunnel whose VM went away (a reboot) ends within 45 s instead of hanging.
        self.process = proc.start(self.argv(forward), stdout=subprocess.DEVNULL, stderr=self._stderr, text=False)
        self._started_at = time.monotonic()

    def _ended(self) -> TunnelSign:
        assert self.process is not None and self._stderr is not None
        self._stderr.seek(0)
        sign = read_tunnel_failure(self._stderr.read().decode(errors="replace"))
        self._stderr.close()
        self.process, self._stderr, self._open = None, None, False
        self._next_try_at = time.monotonic() + self._backoff_s
        self._backoff_s = min(self._backoff_s * 2, BACKOFF_MAX_S)
        return sign

    def _note(self, sign: TunnelSign) -> None:
        self.seen = sign.seen
        if sign.grace_s is None:
            self._failing_since.clear()
            return
        since = self._failing_since.setdefault(sign.text, time.monotonic())
        if time.monotonic() - since >= sign.grace_s:
            self.close()
            raise TargetError(f"the IAP tunnel to {self.instance} did not open: {sign.seen}")

    def ensure(self, wait_s: float = 30) -> bool:
        """Open (or reopen) the tunnel if it is down and its backoff has passed, waiting up to
        WAIT_S for it; True when it answers. ``seen`` says what was seen when it does not."""
        if self.process is not None and self.process.poll() is None and (self._open or self._port_answers()):
            return True  # once open, a live ssh keeps its listener (ExitOnForwardFailure): no probe needed
        if self.process is not None and self.process.poll() is not None:
            self._note(self._ended())
        if self.process is None:
            if time.monotonic() < self._next_try_at:
                return False
            self._start()
        assert self.process is not None
        deadline = time.monotonic() + wait_s
        while True:
            if self.process.poll() is not None:
                self._note(self._ended())
                return False
            if self._port_answers():
                self._open = True
                self._backoff_s, self.seen = BACKOFF_FIRST_S, ""
                self._failing_since.clear()
                return True
            if time.monotonic() >= deadline:
                break
            time.sleep(0.25)
        opening = time.monotonic() - self._started_at
        self.seen = f"the IAP tunnel is still opening (gcloud compute ssh has run {opening:.0f}s)"
        if opening > OPENING_LIMIT_S:
            self._stop()
            self.seen = (f"the IAP tunnel did not open in {opening:.0f}s: is port 22 open to 35.235.240.0/20? "
                         "(`gcloud compute ssh` by hand shows why)")
        return False

    def _stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            proc.end_group(self.process)
        self.process, self._open = None, False
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def close(self) -> None:
        self._stop()


# One `nvidia-smi` over the open IAP path: seconds; a minute means the connection hangs.
NVIDIA_SMI_TIMEOUT_S = 60.0

# How long a one-off command (query, logs, status) keeps reopening a tunnel that does not open
# yet: long enough for an IAP blip or a new key to reach the VM, short enough to say why.
ONE_OFF_TUNNEL_S = 60.0


@dataclass
class GceTarget(HttpTarget):
    instance: str = ""
    zone: str = ""
    project: str = ""
    port: int = 8000  # the VM's own port (vLLM on its loopback)
    watch: Any = field(default=None, repr=False)  # gce_watch.VmWatch: the VM's status and boot phases
    _tunnel: IapTunnel | None = field(default=None, repr=False)

    @property
    def local_port(self) -> int:
        return self._tunnel.local_port if self._tunnel else 0

    def _gcloud_ssh(self, *remote: str, extra: tuple[str, ...] = ()) -> list[str]:
        if shutil.which("gcloud") is None:
            raise TargetError("gcloud is not installed: the GCE target needs it for the IAP tunnel and SSH "
                              "(https://cloud.google.com/sdk/docs/install)")
        # --quiet: "Disable all interactive prompts ... If input is required, defaults will be used"
        # (gcloud's global flags): a first run's key generation takes an empty passphrase instead of
        # waiting on a prompt nobody sees.
        # After `--`, ssh's own flags (gcloud compute ssh's SSH_ARGS): -n, stdin from /dev/null, as
        # well as the child's own stdin (proc.start): a remote command never reads this side's input.
        return ["gcloud", "compute", "ssh", self.instance, "--project", self.project, "--zone", self.zone,
                "--tunnel-through-iap", "--quiet", *(("--command", " ".join(remote)) if remote else ()),
                "--", "-n", *extra]

    def _forward_argv(self, forward: str) -> list[str]:
        return self._gcloud_ssh(extra=("-N", "-o", "ExitOnForwardFailure=yes", "-o", "ServerAliveInterval=15",
                                       "-o", "ServerAliveCountMax=3", "-L", forward))

    @property
    def tunnel(self) -> IapTunnel:
        if self._tunnel is None:
            self._tunnel = IapTunnel(self._forward_argv, self.instance, self.port)
        return self._tunnel

    def _tunnel_up(self, wait_s: float = 30) -> bool:
        up = self.tunnel.ensure(wait_s)
        if up:
            self.base_url = f"http://127.0.0.1:{self.tunnel.local_port}"
            if self._client is not None and str(self._client.base_url).rstrip("/") != self.base_url:
                super().close()  # the tunnel moved to a new port: a new client for it
        return up

    def open_tunnel(self, within_s: float = ONE_OFF_TUNNEL_S) -> None:
        """The tunnel open now, or TargetError saying what was seen: reopened with backoff for up
        to WITHIN_S (an IAP blip, a VM still booting)."""
        deadline = time.monotonic() + within_s
        while not self._tunnel_up(wait_s=max(1.0, min(30.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                seen = self.tunnel.seen
                self.close()
                raise TargetError(f"no tunnel to {self.instance} after {within_s:.0f}s: {seen}"
                                  f"{self._phase_hint()}; `gemma4-t4 wait` waits through a boot")
            time.sleep(0.5)

    def _phase_hint(self) -> str:
        if self.watch is None:
            return ""
        view = self.watch.look()
        if view.vm_status == "ABSENT":  # gce_watch.VM_ABSENT
            return f" (no VM {self.instance} in {self.zone})"
        return f" (VM {view.vm_status}, guest phase {view.phase})" if view.phase else (
            f" (VM {view.vm_status})" if view.vm_status else "")

    def probe(self) -> tuple[bool, str]:
        """Through the tunnel, opened again first if it is down: (healthy, what was seen)."""
        if not self._tunnel_up():
            return False, self.tunnel.seen
        healthy, why = super().probe()
        if not healthy and not why.startswith("/health answered"):
            # The forward is up but its far end is closed: ssh accepts locally and drops the
            # channel ("open failed: connect failed: Connection refused", OpenSSH channels.c).
            return False, f"vLLM does not answer on the VM yet (the tunnel is up; {why})"
        return healthy, why

    def _ready(self) -> None:
        if not self._tunnel_up(wait_s=1):
            self.open_tunnel()

    def models(self) -> list[dict[str, Any]]:
        self._ready()
        return super().models()

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        self._ready()
        return super().chat(body)

    def chat_stream(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        self._ready()
        return super().chat_stream(body)

    def metrics(self) -> str | None:
        self._ready()
        return super().metrics()

    def boot_view(self) -> Any:
        """gce_watch.BootView: the VM's status and the guest's phases; None without a watch."""
        return self.watch.look(max_age_s=0) if self.watch is not None else None

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {}
        if self.watch is not None:
            from .gce_watch import describe_vm

            info.update(describe_vm(self.watch.look(), self.watch.vm))
        if self._tunnel is None or not self._tunnel_up(wait_s=1):
            return info  # nvidia-smi needs sshd: nothing to ask while the VM boots
        query = "nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader,nounits"
        try:
            result = proc.run(self._gcloud_ssh(query), timeout_s=NVIDIA_SMI_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return {**info, "vram": f"unknown (nvidia-smi over SSH did not answer in {NVIDIA_SMI_TIMEOUT_S:.0f}s)"}
        if result.returncode != 0:
            return {**info, "vram": f"unknown ({read_tunnel_failure(result.stderr).seen})"}
        return {**info, **vram(result.stdout)}

    def log_lines(self, follow: bool, lines: int = 200) -> Iterator[str]:
        """The service's journal over SSH, once. Following, a connection that does not open or drops
        (sshd not up yet, a reboot, an IAP blip) is opened again, with backoff, from the moment it
        dropped; each new reason is one `-- gemma4-t4: ... --` line, as journalctl marks a boot."""
        since: float | None = None
        backoff_s, said = 2.0, ""
        while True:
            window = f"--since @{int(since)}" if since is not None else f"-n {lines}"
            command = f"sudo journalctl -u gemma4-vllm --no-pager {window}" + (" -f" if follow else "")
            printed = False
            with tempfile.TemporaryFile() as errors, proc.start(self._gcloud_ssh(command), stderr=errors) as process:
                try:
                    assert process.stdout is not None
                    for line in process.stdout:
                        printed = True
                        yield line.rstrip("\n")
                finally:
                    if process.poll() is None:
                        proc.end_group(process)
                errors.seek(0)
                sign = read_tunnel_failure(errors.read().decode(errors="replace"))
            if process.returncode == 0:
                return
            if not follow or sign.grace_s == 0:
                raise TargetError(f"reading the journal on {self.instance} failed (exit {process.returncode}): "
                                  f"{sign.seen}")
            if printed:
                since, backoff_s, said = time.time(), 2.0, ""
            if sign.seen != said:
                said = sign.seen
                yield f"-- gemma4-t4: no connection to the VM ({sign.seen}); opening it again --"
            time.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, BACKOFF_MAX_S)

    def close(self) -> None:
        if self._tunnel is not None:
            self._tunnel.close()
        super().close()


# --- SageMaker -------------------------------------------------------------------------------------


def aws_session(region: str, profile: str | None, error: type[Exception]) -> Any:
    """A boto3 session in REGION as PROFILE (the stack's aws:profile) or the default chain; a
    missing profile or no credentials at all is ``error`` with what to do."""
    import boto3
    from botocore.exceptions import ProfileNotFound

    try:
        session = boto3.session.Session(profile_name=profile or None, region_name=region)
    except ProfileNotFound:
        raise error(f"the AWS profile {profile!r} (the stack's aws:profile) is not in ~/.aws/config: "
                    + shlex.join(["aws", "configure", "--profile", profile or ""])) from None
    if session.get_credentials() is None:
        as_whom = f" for the profile {profile!r}" if profile else ""
        raise error(f"no AWS credentials{as_whom}: run `aws configure` or `aws sso login`, or set AWS_PROFILE")
    return session


# SageMaker cuts a real-time invocation at 60 s; AWS advises a 70 s socket timeout (InvokeEndpoint).
SAGEMAKER_INVOKE_LIMIT_S = 60
SAGEMAKER_READ_TIMEOUT_S = 70.0


@dataclass
class SageMakerTarget:
    """An endpoint through boto3. Invocations are never retried (a generation is not idempotent:
    a retry after a timeout would run it twice), and a plain invocation must answer within 60 s,
    so the CLI streams by default here."""

    endpoint: str
    region: str
    endpoint_url: str | None = None  # a local stand-in (tests); None for AWS
    profile: str | None = None  # the stack's aws:profile; None: the default chain (AWS_*, ~/.aws)
    # The stack's endpointTtl, when it has one: when the schedule deletes the endpoint, and the
    # dead-letter queue where a delete that kept failing lands (then the endpoint still bills).
    ttl_deletes_at: str | None = None
    ttl_dead_letter_queue_url: str | None = None
    # The stack whose tag (catalog.SAGEMAKER_STACK_TAG) marks its endpoints: any other than ENDPOINT is outside
    # the stack's state (an `up` stopped during the endpoint's wait) and bills; None: not asked.
    stack: str | None = None
    label: str = ""
    read_timeout_s: float = SAGEMAKER_READ_TIMEOUT_S
    runtime: Any = field(init=False, repr=False)
    control: Any = field(init=False, repr=False)
    _session: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        from botocore.config import Config

        if not self.region or not self.region.strip():
            raise TargetError("no AWS region: pass --region (or set aws:region in the stack)")
        self._session = aws_session(self.region, self.profile, TargetError)
        once = Config(read_timeout=self.read_timeout_s, connect_timeout=CONNECT_TIMEOUT_S,
                      retries={"total_max_attempts": 1, "mode": "standard"})
        self.runtime = self._session.client("sagemaker-runtime", endpoint_url=self.endpoint_url, config=once)
        self.control = self._session.client("sagemaker", endpoint_url=self.endpoint_url)
        self.label = self.label or f"sagemaker:{self.endpoint}@{self.region}"

    def _error(self, err: Exception) -> TargetError:
        """One message per error class, each with what to do."""
        from botocore.exceptions import (
            ClientError,
            ConnectionClosedError,
            EndpointConnectionError,
            ReadTimeoutError,
            ResponseStreamingError,
        )

        if isinstance(err, ReadTimeoutError):
            return TargetError(f"{self.endpoint}: no answer in {self.read_timeout_s:.0f}s (SageMaker ends a "
                               f"real-time invocation at {SAGEMAKER_INVOKE_LIMIT_S}s): stream it (the default) or "
                               "ask for fewer --max-tokens")
        if isinstance(err, ConnectionClosedError | ResponseStreamingError):
            return TargetError(f"{self.endpoint}: the connection broke midway ({err}): ask again")
        from .failures import cloud_message  # the one wording of credential and network failures

        if (message := cloud_message(err)) is not None:
            return TargetError(message)
        if isinstance(err, EndpointConnectionError):
            return TargetError(f"cannot reach SageMaker in {self.region}: {err}")
        if not isinstance(err, ClientError):
            return TargetError(f"{self.endpoint}: {err}")
        error = err.response.get("Error", {})
        code, message = error.get("Code", ""), error.get("Message", str(err))
        if code in ("ValidationError", "ValidationException") and (
                "not found" in message or "Could not find endpoint" in message):
            return TargetError(f"endpoint {self.endpoint} not found in {self.region}: {message}")
        if code in ("ValidationError", "ValidationException"):
            return TargetError(f"{self.endpoint}: SageMaker refused the request: {message}")
        if code == "ModelError" and "timed out" in message:
            return TargetError(f"{self.endpoint}: the container did not answer within SageMaker's "
                               f"{SAGEMAKER_INVOKE_LIMIT_S}s: stream it (the default) or ask for fewer --max-tokens")
        if code == "ModelError":
            return TargetError(f"{self.endpoint}: the model container answered with an error: {message} "
                               f"(its log: gemma4-t4 logs --endpoint {self.endpoint} --region {self.region})")
        if code == "ModelStreamError":
            # botocore keeps only the message of a stream's exception event (not its ErrorCode).
            cut = " (SageMaker's time for one streamed answer ran out: ask for fewer --max-tokens)" \
                if "allotted time" in message else ""
            return TargetError(f"{self.endpoint}: the stream broke midway{cut}: {message}; the answer is incomplete")
        if code == "InternalStreamFailure":
            return TargetError(f"{self.endpoint}: SageMaker's stream failed midway: {message}; ask again")
        if code == "ModelNotReadyException":
            return TargetError(f"{self.endpoint} is not ready for requests yet: {message} "
                               f"(gemma4-t4 wait --endpoint {self.endpoint} --region {self.region})")
        if code in ("ThrottlingException", "ServiceUnavailable", "InternalFailure", "InternalDependencyException"):
            return TargetError(f"{self.endpoint}: SageMaker answered {code}: {message}; not retried (a generation "
                               "is not idempotent): ask again")
        if code in ("AccessDeniedException", "UnrecognizedClientException", "ExpiredTokenException",
                    "InvalidSignatureException"):
            return TargetError(f"{self.endpoint}: AWS refused your credentials ({code}): {message}")
        return TargetError(f"{self.endpoint}: {code}: {message}")

    def _call(self, fn, **kwargs):
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(**kwargs)
        except (BotoCoreError, ClientError) as err:
            raise self._error(err) from None

    def describe(self) -> dict[str, Any]:
        described = self._call(self.control.describe_endpoint, EndpointName=self.endpoint)
        info = {"endpoint_status": described["EndpointStatus"]}
        if described.get("FailureReason"):
            info["failure_reason"] = described["FailureReason"]
        if self.ttl_deletes_at:
            info["ttl_deletes_at"] = self.ttl_deletes_at
        if self.ttl_dead_letter_queue_url:
            failed = self.failed_ttl_deletes(described["CreationTime"])
            info["ttl_failed_deletes"] = failed
            if failed:
                info["ttl_warning"] = (f"the TTL's delete failed {failed} time(s) and is not retried again: the "
                                       f"endpoint was NOT deleted and bills; delete it with `pulumi destroy` and read "
                                       f"the reason in {self.ttl_dead_letter_queue_url}")
        if self.stack:
            strays = self.strays()
            if strays:
                info["not_in_the_stack"] = strays
        return info

    def failed_ttl_deletes(self, created: Any) -> int:
        """The TTL deletes Scheduler gave up on for THIS endpoint: dead letters that name it and were sent after it
        was created. The queue also holds, for 14 days, the backstop's harmless failure after every delete that
        worked, and the letters of an earlier endpoint of the same name; those are not this endpoint's."""
        sqs = self._session.client("sqs", endpoint_url=self.endpoint_url)
        # A dead letter's body is "a JSON payload containing invocation details and any response received from the
        # target" (EventBridge Scheduler User Guide, "Configuring a dead-letter queue"): the endpoint's name is read
        # as a whole word in it, whatever its layout. SentTimestamp is SQS's own attribute (epoch milliseconds).
        named = re.compile(rf"(?<![A-Za-z0-9-]){re.escape(self.endpoint)}(?![A-Za-z0-9-])")
        since_ms = created.timestamp() * 1000
        seen: dict[str, bool] = {}
        for _ in range(10):  # short polls sample the queue's servers: ask until nothing new comes back
            messages = self._call(sqs.receive_message, QueueUrl=self.ttl_dead_letter_queue_url,
                                  MaxNumberOfMessages=10, VisibilityTimeout=0,
                                  AttributeNames=["SentTimestamp"]).get("Messages", [])
            new = [m for m in messages if m["MessageId"] not in seen]
            if not new:
                break
            for message in new:
                seen[message["MessageId"]] = bool(named.search(message.get("Body", ""))) and \
                    int(message.get("Attributes", {}).get("SentTimestamp", 0)) >= since_ms
        return sum(seen.values())

    def strays(self) -> list[str]:
        """Endpoints that carry the stack's tag but are not the stack's endpoint, each with the line that deletes
        it: one made by an `up` that was stopped during its wait bills outside the stack's state."""
        from botocore.exceptions import BotoCoreError, ClientError

        from ..catalog import SAGEMAKER_STACK_TAG

        found = []
        try:
            for page in self.control.get_paginator("list_endpoints").paginate():
                for summary in page["Endpoints"]:
                    if summary["EndpointName"] == self.endpoint:
                        continue
                    tags = self.control.list_tags(ResourceArn=summary["EndpointArn"]).get("Tags", [])
                    if {"Key": SAGEMAKER_STACK_TAG, "Value": self.stack} in tags:
                        found.append(f"{summary['EndpointName']} ({summary['EndpointStatus']}, not in the stack's "
                                     "state, bills): " + shlex.join([
                                         "aws", "sagemaker", "delete-endpoint", "--endpoint-name",
                                         summary["EndpointName"], "--region", self.region]))
        except (BotoCoreError, ClientError) as err:
            raise self._error(err) from None
        return found

    def probe(self) -> tuple[bool, str]:
        status = self.describe()["endpoint_status"]
        return status == "InService", "" if status == "InService" else f"the endpoint is {status}"

    def health(self) -> bool:
        return self.probe()[0]

    def models(self) -> list[dict[str, Any]]:
        """The served model as the endpoint's Model defines it (there is no /v1/models behind SageMaker)."""
        described = self._call(self.control.describe_endpoint, EndpointName=self.endpoint)
        config = self._call(self.control.describe_endpoint_config, EndpointConfigName=described["EndpointConfigName"])
        model = self._call(self.control.describe_model, ModelName=config["ProductionVariants"][0]["ModelName"])
        env = model.get("PrimaryContainer", {}).get("Environment", {})
        name = env.get("SM_VLLM_SERVED_MODEL_NAME") or env.get("SM_VLLM_MODEL", "")
        max_len = int(env["SM_VLLM_MAX_MODEL_LEN"]) if "SM_VLLM_MAX_MODEL_LEN" in env else None
        return [{"id": name, "max_model_len": max_len}]

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        response = self._call(self.runtime.invoke_endpoint, EndpointName=self.endpoint,
                              ContentType="application/json", Accept="application/json",
                              Body=json.dumps({**body, "stream": False}))
        return json.loads(response["Body"].read())

    def chat_stream(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        from botocore.exceptions import BotoCoreError, ClientError

        response = self._call(self.runtime.invoke_endpoint_with_response_stream, EndpointName=self.endpoint,
                              ContentType="application/json",
                              Body=json.dumps({**body, "stream": True, "stream_options": {"include_usage": True}}))

        def lines() -> Iterator[str]:
            buffer = b""
            try:
                for event in response["Body"]:
                    buffer += event.get("PayloadPart", {}).get("Bytes", b"")
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        yield line.decode("utf-8")
            except (BotoCoreError, ClientError) as err:  # an error event, or the connection, midway
                raise self._error(err) from None

        yield from sse_events(lines(), require_done=True)

    def metrics(self) -> str | None:
        return None  # SageMaker exposes no /metrics; CloudWatch has the endpoint's metrics

    def log_lines(self, follow: bool, lines: int = 200) -> Iterator[str]:
        client = self._session.client("logs")
        group = f"/aws/sagemaker/Endpoints/{self.endpoint}"
        start = int((time.time() - 3600) * 1000)
        while True:
            try:
                events = client.filter_log_events(logGroupName=group, startTime=start)["events"]
            except client.exceptions.ResourceNotFoundException:
                raise TargetError(f"no log group {group}: the container never started (host image pin?)") from None
            for event in events[-lines:] if not follow else events:
                yield event["message"]
                start = max(start, event["timestamp"] + 1)
            if not follow:
                return
            time.sleep(5)

    def close(self) -> None:
        pass
