"""What the operator commands do, as data: find the target, look at it, wait for it, ask it.

Nothing here prints: the CLI (gemma4_t4.cli) renders the results, and progress arrives through
callbacks, so any other front end can call the same functions.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import catalog
from ..errors import UsageError
from . import proc
from .lifecycle import VM_ABSENT
from .targets import Target, TargetError, cause
from .untrusted import quoted

# `pulumi stack output` reads one stack's state from its backend: seconds, even from a remote backend on a
# slow network. The limit only catches a hang (a backend that never answers, a held lock, a prompt):
# two minutes, then the command says so instead of waiting for ever.
PULUMI_TIMEOUT_S = 120.0

# The version of every result document's vocabulary, the CLI's --json and the MCP tools' results alike
# (docs/json.md): bumped when a key changes meaning or goes; new keys do not bump it.
SCHEMA_VERSION = 1


# What a command that talks to a server takes instead of a stack, for the line that says the Pulumi CLI is missing.
INSTEAD_OF_A_STACK = "--url URL, or --endpoint NAME --region REGION"


def stack_outputs(stack: str, cwd: Path | None = None, instead: str = INSTEAD_OF_A_STACK) -> dict[str, Any]:
    """`pulumi stack output --json` of a deployed stack. INSTEAD: the caller's own way to name its target
    without a stack (its flags; "" where it has none), for the line that says the Pulumi CLI is missing."""
    if shutil.which("pulumi") is None:
        raise TargetError(f"reading stack {stack} needs the Pulumi CLI (https://www.pulumi.com/docs/install/)"
                          + (f"; or pass {instead}" if instead else ""))
    argv = ["pulumi", "stack", "output", "--json", "--stack", stack]
    try:
        result = proc.run(argv, PULUMI_TIMEOUT_S, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise TargetError(f"`{' '.join(argv)}` did not answer in {PULUMI_TIMEOUT_S:.0f}s (its backend unreachable, "
                          "or a lock held by another pulumi?): run it by hand to see why") from None
    if result.returncode != 0:
        raise TargetError(f"pulumi stack output --stack {stack}: {cause(result.stderr)}",
                          detail=result.stderr.strip())
    return json.loads(result.stdout)


def served_model(target: Target, model: str | None) -> str:
    """The model id to send: the one asked for if the server serves it, else the only one served."""
    served = [m["id"] for m in target.models()]
    # The ids are the server's words: quoted and defanged (core.untrusted), data inside the message.
    if model is None:
        if len(served) != 1:
            raise TargetError(f"the server serves [{', '.join(map(quoted, served))}]: pick one with --model")
        return served[0]
    if model not in served:
        raise TargetError(f"model {quoted(model)} is not served here; /v1/models reports: "
                          f"{', '.join(map(quoted, served))}")
    return model


# --- status ---------------------------------------------------------------------------------------


@dataclass
class Status:
    target: str
    serving: bool
    details: dict[str, Any] = field(default_factory=dict)
    models: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""  # why not serving: refused, no answer in time, the HTTP status, the endpoint's state


def status(target: Target) -> Status:
    serving, reason = target.probe()  # first: a GCE target's tunnel opens here, and describe() uses it
    details = target.describe()
    models = [{"id": m["id"], "max_model_len": m.get("max_model_len")} for m in target.models()] if serving else []
    return Status(target.label, serving, details, models, reason)


# --- wait -----------------------------------------------------------------------------------------


@dataclass
class WaitResult:
    target: str
    healthy: bool
    elapsed_s: float
    reason: str = ""  # why not: "timeout", "died", "guest failed", "vm stopped", or the endpoint's failure
    recent_log: list[str] = field(default_factory=list)
    last_probe: str = ""  # what the last health check saw: the tunnel, refused, no answer, the HTTP status
    # A GCE VM's own account, through the Compute API: its status and the guest's first-boot phases.
    vm_status: str | None = None
    phase: str | None = None
    detail: str = ""
    phases: list[Any] = field(default_factory=list)  # the boot's phases (e.g. GCE's Phase): phase, started, seconds
    # Each failure the guest said it retries, as it said it (GCE's `retrying` phase): waited through, not the end.
    retries: list[str] = field(default_factory=list)


# The guest's word for a failure it retries by itself (wait goes on) and for one it does not (wait ends).
RETRYING, FAILED = "retrying", "failed"
# A VM seen stopped this long is not booting: `wait` ends rather than wait for a start nobody began.
STOPPED_GRACE_S = 60.0
VM_STOPPED = ("TERMINATED", "STOPPED", "STOPPING", "SUSPENDED", "SUSPENDING")


# The default wait lasts as long as a GCE guest itself may take to a first answer (catalog/first_boot.py: every
# part of a first boot at its worst, the same cap the guest's idle stop keeps); a stuck boot ends it sooner, as a
# stopped VM or the phase `failed`.
WAIT_TIMEOUT_S = catalog.WAIT_TIMEOUT_S


def wait(target: Target, timeout_s: float = WAIT_TIMEOUT_S, interval_s: float = 15,
         on_tick: Callable[[float, dict[str, Any]], None] | None = None,
         alive: Callable[[], bool] | None = None,
         on_boot: Callable[[Any], None] | None = None) -> WaitResult:
    """Poll until healthy. Each tick reports the elapsed time and what the target says of itself
    (VRAM on GCE: a compiling engine claims memory, a dead one does not; the endpoint status on
    SageMaker). ``alive`` says whether the server process still exists, where that is known. A GCE
    target also reports its VM's status and the guest's boot phases (``on_boot``, each look)."""
    start = time.monotonic()
    stopped_since: float | None = None
    look = getattr(target, "boot_view", None)
    retries: list[str] = []
    while True:
        elapsed = time.monotonic() - start
        healthy, why = target.probe()
        view = look() if look is not None else None
        if view is not None and on_boot is not None:
            on_boot(view)
        if view is not None and view.phase == RETRYING and view.detail not in retries[-1:]:
            retries.append(view.detail)
        result = functools.partial(_outcome, target, elapsed, why, view, retries)
        if healthy:
            return result(True, log=False)
        if alive is not None and not alive():
            return result(False, "died")
        if view is not None and view.phase == FAILED:
            return result(False, "guest failed")
        if view is not None and view.vm_status in VM_STOPPED:
            stopped_since = stopped_since if stopped_since is not None else time.monotonic()
            if time.monotonic() - stopped_since >= STOPPED_GRACE_S:
                return result(False, "vm stopped", log=False)
        else:
            stopped_since = None
        info = target.describe()
        if info.get("endpoint_status") == "Failed":
            return result(False, f"endpoint Failed: {info.get('failure_reason')}")
        if elapsed >= timeout_s:
            return result(False, "timeout")
        if on_tick is not None:
            on_tick(elapsed, {**info, "last": why} if why else info)
        time.sleep(min(interval_s, max(timeout_s - elapsed, 0.0)) or interval_s)


def _outcome(target: Target, elapsed: float, why: str, view: Any, retries: list[str], healthy: bool,
             reason: str = "", log: bool = True) -> WaitResult:
    outcome = WaitResult(target.label, healthy, elapsed, reason, _recent_log(target) if log else [], why,
                         retries=list(retries))
    if view is not None:
        outcome.vm_status, outcome.phase, outcome.detail = view.vm_status, view.phase, view.detail
        outcome.phases = list(view.phases)
    return outcome


def wait_failure(result: WaitResult, timeout_s: float) -> str:
    """What went wrong, as the operator reads it: why, what was seen last, the last log lines,
    where to look next. Only what was seen: no guess at a cause."""
    why = {"timeout": f"not healthy after {timeout_s:.0f}s", "died": "the server died during startup",
           "guest failed": "the VM's guest stopped at a failure it does not retry",
           "vm stopped": f"the VM is {result.vm_status}"}
    lines = [f"{why.get(result.reason, result.reason)}: {result.target}"
             + (f" (last check: {result.last_probe})" if result.last_probe else "")]
    if result.vm_status == VM_ABSENT:  # the cloud's API has no such VM
        lines.append("there is no VM yet: is `pulumi up` still creating it, or did it fail (no T4 free in the zone?)")
    elif result.phase:
        lines.append(f"the guest's phase: {result.phase}" + (f": {result.detail}" if result.detail else ""))
        if result.phase == RETRYING:
            lines.append("the guest is still trying again by itself: `gemma4-t4 wait -s STACK` again, or fix what "
                         "it names")
    elif result.vm_status:
        lines.append(f"the VM is {result.vm_status}; its guest has published no boot phase yet")
    if result.recent_log:
        lines.append("last log lines:\n" + "\n".join(result.recent_log))
    if result.reason == "vm stopped":
        lines.append("start it (`gemma4-t4 start -s STACK`), then wait again")
    elif result.reason == "died" and not any("Traceback" in line for line in result.recent_log):
        # The one case [gce-t4-article] names: a process gone with no traceback in its own log.
        lines.append("no traceback: the kernel log says whether it was killed (`sudo dmesg -T | grep -i oom`)")
    elif result.reason in ("timeout", "guest failed") and result.vm_status not in (None, VM_ABSENT):
        lines.append("more: `gemma4-t4 logs -s STACK`, or the boot's console without SSH: "
                     "`gcloud compute instances get-serial-port-output VM --zone ZONE`")
    return "\n".join(lines)


def _recent_log(target: Target, lines: int = 20) -> list[str]:
    try:
        return list(target.log_lines(follow=False, lines=lines))
    except (TargetError, UsageError):
        return []  # a plain URL has no log; a log that cannot be read is not the failure to report


# --- query ----------------------------------------------------------------------------------------


@dataclass
class Reply:
    model: str
    text: str
    usage: dict[str, Any] | None
    finish_reason: str | None


def chat_body(model: str, prompt: str, max_tokens: int, temperature: float) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": temperature}


def query(target: Target, prompt: str, model: str | None = None, max_tokens: int = 256,
          temperature: float = 0.0) -> Reply:
    model = served_model(target, model)
    reply = target.chat(chat_body(model, prompt, max_tokens, temperature))
    choice = reply["choices"][0]
    return Reply(model, choice["message"]["content"] or "", reply.get("usage"), choice.get("finish_reason"))


def query_stream(target: Target, prompt: str, model: str | None = None, max_tokens: int = 256,
                 temperature: float = 0.0) -> Iterator[str | Reply]:
    """Text pieces as they arrive, then the whole Reply."""
    model = served_model(target, model)
    pieces: list[str] = []
    usage, finish = None, None
    for chunk in target.chat_stream(chat_body(model, prompt, max_tokens, temperature)):
        for choice in chunk.get("choices", []):
            piece = choice.get("delta", {}).get("content") or ""
            finish = choice.get("finish_reason") or finish
            if piece:
                pieces.append(piece)
                yield piece
        usage = chunk.get("usage") or usage
    yield Reply(model, "".join(pieces), usage, finish)
