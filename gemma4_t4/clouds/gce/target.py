"""GCE's target: the VM's loopback vLLM through an IAP SSH tunnel (gcloud), and what gcloud and IAP
say when the tunnel does not open.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ...core import proc
from ...core.lifecycle import VM_ABSENT
from ...core.targets import (
    HttpTarget,
    OnWire,
    TargetError,
    cause,
    free_local_port,
    stack_api_key,
    vram,
)


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
    cloud: str = field(default="gce", init=False)
    instance: str = ""
    zone: str = ""
    project: str = ""
    port: int = 8000  # the VM's own port (vLLM on its loopback)
    api_key: str | None = field(default_factory=stack_api_key, repr=False)  # the stack's own server: its apiKey
    watch: Any = field(default=None, repr=False)  # lifecycle.VmWatch: the VM's status and boot phases
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
                                  f"{self._phase_hint()}; `gemma4-t4 wait -s STACK` waits through a boot")
            time.sleep(0.5)

    def _phase_hint(self) -> str:
        if self.watch is None:
            return ""
        view = self.watch.look()
        if view.vm_status == VM_ABSENT:
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

    def chat_stream(self, body: dict[str, Any], on_wire: OnWire | None = None) -> Iterator[dict[str, Any]]:
        self._ready()
        return super().chat_stream(body, on_wire)

    def metrics(self) -> str | None:
        self._ready()
        return super().metrics()

    def boot_view(self) -> Any:
        """lifecycle.BootView: the VM's status and the guest's phases; None without a watch."""
        return self.watch.look(max_age_s=0) if self.watch is not None else None

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {}
        if self.watch is not None:
            from .lifecycle import describe_vm

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
