"""`gemma4-t4 up` and `down`'s engine: a stack of the user's project deployed and destroyed through Pulumi's
Automation API (pulumi.automation), which drives the user's own `pulumi` CLI and backend. Nothing here prints:
progress arrives as engine events (the CLI renders them), and an attempt's outcome is data: what the engine
created, and the resources it failed on with the provider's own words, for the cloud to read.

How the Automation API drives the CLI, its event stream, its errors and Ctrl-C: pulumi/pulumi's
sdk/python/lib/pulumi/automation (_cmd.py, _stack.py, events.py, errors.py, as in PyPI pulumi 3.272.0) and the Go
CLI's pkg/backend/cancellation_scope.go and pkg/backend/display/display.go.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .targets import TargetError, cause

Progress = Callable[[str], None]


class DeployError(TargetError):
    """Pulumi refused or failed outside a resource (no CLI, no backend, a lock, the program's own refusal)."""


@dataclass(frozen=True)
class Failed:
    """A resource the engine failed on, and the provider's diagnostic for it, as Pulumi printed it."""

    urn: str
    type: str
    message: str


@dataclass
class Attempt:
    """One `pulumi up` or `destroy`: whether it worked, what it created (URN -> type), where it failed."""

    ok: bool = False
    created: dict[str, str] = field(default_factory=dict)
    # Every resource the engine stepped over (created, adopted or the same): URN -> its outputs (name, zone, ...).
    states: dict[str, dict[str, Any]] = field(default_factory=dict)
    failed: list[Failed] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # the engine's own error lines ("update failed")
    interrupted: bool = False
    outputs: dict[str, Any] = field(default_factory=dict)
    output: str = ""  # what the CLI printed, for --verbose

    def failed_on(self, type_: str) -> Failed | None:
        return next((f for f in self.failed if f.type == type_), None)

    def state_of(self, type_: str) -> tuple[str, dict[str, Any]] | None:
        """(URN, outputs) of the one resource of TYPE_ the engine stepped over, if any."""
        return next(((urn, state) for urn, state in self.states.items() if state["type"] == type_), None)


def _type_of(urn: str) -> str:
    """A URN's resource type: urn:pulumi:STACK::PROJECT::PARENT$TYPE::NAME (go resource/urn.go)."""
    return urn.split("::")[-2].rsplit("$", 1)[-1] if urn.count("::") >= 3 else ""


class Events:
    """The engine's events of one operation, kept as an Attempt and told to PROGRESS as lines."""

    def __init__(self, attempt: Attempt, progress: Progress):
        self.attempt, self.progress = attempt, progress

    def __call__(self, event: Any) -> None:
        if (pre := event.resource_pre_event) is not None and pre.metadata.type != "pulumi:pulumi:Stack":
            meta = pre.metadata
            if meta.op.value not in ("same", "read", "refresh"):
                self.progress(f"{_verb(meta.op.value, done=False)} {meta.type} {meta.urn.rsplit('::', 1)[-1]}")
        elif (done := event.res_outputs_event) is not None:
            meta = done.metadata
            if meta.op.value == "create":
                self.attempt.created[meta.urn] = meta.type
            if meta.new is not None:
                self.attempt.states[meta.urn] = {"type": meta.type, **(meta.new.outputs or {})}
            if meta.op.value not in ("same", "read", "refresh") and meta.type != "pulumi:pulumi:Stack":
                self.progress(f"{_verb(meta.op.value, done=True)} {meta.type} {meta.urn.rsplit('::', 1)[-1]}")
        elif (diag := event.diagnostic_event) is not None and diag.severity == "error":
            message = diag.message.strip()
            if diag.urn and _type_of(diag.urn) != "pulumi:pulumi:Stack":
                self.attempt.failed.append(Failed(diag.urn, _type_of(diag.urn), message))
            else:
                self.attempt.errors.append(message)
        elif (said := event.stdout_event) is not None and "received; cancelling" in said.message:
            self.progress(said.message.strip())


def _verb(op: str, done: bool) -> str:
    words = {"create": ("creating", "created"), "update": ("updating", "updated"), "delete": ("deleting", "deleted"),
             "replace": ("replacing", "replaced"), "import": ("adopting", "adopted"),
             "create-replacement": ("creating the replacement of", "created the replacement of"),
             "delete-replaced": ("deleting the replaced", "deleted the replaced")}
    return words.get(op, (op, op))[done]


@contextmanager
def graceful_interrupt(progress: Progress) -> Iterator[list[bool]]:
    """Ctrl-C while `pulumi` runs: the terminal sends SIGINT to the whole process group, the CLI too, which then
    cancels by itself (stops starting steps, lets the running ones finish, saves the state, releases the lock:
    pkg/backend/cancellation_scope.go). Python's default would raise KeyboardInterrupt inside the SDK, which
    closes the CLI's pipes, so the CLI may die mid-cancel (SIGPIPE) and leave pending operations and a lock
    (_cmd.py PulumiCommand.run; CPython's Popen.__exit__). So the first Ctrl-C is only noted (the flag yields
    True) and the SDK waits for the CLI's own end; a second one interrupts at once, as the CLI's second ^C
    terminates."""
    seen = [False]
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def on_sigint(signum: int, frame: Any) -> None:
        if seen[0]:
            raise KeyboardInterrupt
        seen[0] = True
        progress("Ctrl-C: pulumi finishes the steps it has begun and saves the state (Ctrl-C again: stop now, "
                 "which may leave pending operations)")

    before = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, before)


class Deployment:
    """One stack of the Pulumi project in WORK_DIR, through the user's `pulumi` (first on PATH)."""

    def __init__(self, stack: str, work_dir: Path):
        self.name, self.work_dir = stack, work_dir
        self._stack: Any = None

    def _auto(self) -> Any:
        try:
            from pulumi import automation
        except ImportError:
            raise DeployError("the Pulumi SDK is not installed: pip install pulumi") from None
        return automation

    def exists(self) -> bool:
        """Whether the backend has the stack (`pulumi stack select`; StackNotFoundError when not)."""
        auto = self._auto()
        try:
            self._stack = self._call(auto.select_stack, stack_name=self.name, work_dir=str(self.work_dir))
        except auto.StackNotFoundError:
            return False
        return True

    def create(self) -> None:
        auto = self._auto()
        self._stack = self._call(auto.create_stack, stack_name=self.name, work_dir=str(self.work_dir))

    @property
    def stack(self) -> Any:
        if self._stack is None and not self.exists():
            raise DeployError(f"there is no stack {self.name} in the backend: `gemma4-t4 up {self.name}` makes it")
        return self._stack

    def set_config(self, values: Mapping[str, str]) -> None:
        """Written into the stack file by the CLI itself (`pulumi config set`), so a plain `pulumi up` sees them."""
        auto = self._auto()
        for key, value in values.items():
            self._call(self.stack.set_config, key, auto.ConfigValue(value=str(value)))

    def outputs(self) -> dict[str, Any]:
        return {key: value.value for key, value in self._call(self.stack.outputs).items()}

    def up(self, progress: Progress) -> Attempt:
        return self._operation("up", progress)

    def destroy(self, progress: Progress) -> Attempt:
        return self._operation("destroy", progress)

    def _operation(self, verb: str, progress: Progress) -> Attempt:
        auto, attempt = self._auto(), Attempt()
        printed: list[str] = []
        run = self.stack.up if verb == "up" else self.stack.destroy
        with graceful_interrupt(progress) as interrupted:
            try:
                result = run(on_output=printed.append, on_event=Events(attempt, progress))
                attempt.ok = True
                attempt.outputs = {k: v.value for k, v in getattr(result, "outputs", {}).items()}
            except auto.ConcurrentUpdateError as err:
                raise DeployError(f"stack {self.name} is locked by another `pulumi` (an earlier run stopped hard, "
                                  f"or one still running): if none runs, `pulumi cancel --stack {self.name} --yes`, "
                                  "then again", detail=str(err)) from None
            except auto.CommandError:
                attempt.ok = False
        attempt.interrupted = interrupted[0]
        attempt.output = "\n".join(printed)
        return attempt

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """An Automation API call outside an operation: its failure is Pulumi's own first error line."""
        auto = self._auto()
        try:
            return fn(*args, **kwargs)
        except FileNotFoundError:
            raise DeployError("the Pulumi CLI is not installed (https://www.pulumi.com/docs/install/)") from None
        except auto.StackNotFoundError:
            raise
        except auto.CommandError as err:
            text = str(err)
            stderr = text.split(" stderr: ", 1)[-1]
            raise DeployError(f"pulumi: {cause(stderr) or cause(text)}", detail=text) from None
