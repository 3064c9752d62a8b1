"""How every command talks: results on stdout (a JSON document with --json, rich text
otherwise), progress and errors on stderr; bars and spinners on a terminal, plain lines elsewhere."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

# No emoji codes: a key such as gemma4-t4:cloud: would print as "gemma4-t4☁".
console = Console(highlight=False, soft_wrap=True, emoji=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def print_json(document: Any) -> None:
    """The --json result: one document on stdout, nothing else there."""
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=True, default=str) + "\n")


def fail(command: str, message: str, code: int = EXIT_FAILED) -> int:
    err_console.print(f"gemma4-t4 {command}: {message}", markup=False)
    return code


class Steps:
    """Progress of work counted in steps, one bar per phase: a rich bar on a terminal, one plain
    line per finished phase elsewhere (a log or a pipe gets no per-request noise)."""

    def __init__(self, progress: Progress | None):
        self._progress = progress
        self._tasks: dict[str, Any] = {}

    def __call__(self, phase: str, done: int, total: int) -> None:
        if self._progress is not None:
            if phase not in self._tasks:
                self._tasks[phase] = self._progress.add_task(phase, total=total)
            self._progress.update(self._tasks[phase], completed=done)
        elif done == total:
            err_console.print(f"{phase}: {done}/{total} done", markup=False)


@contextmanager
def steps() -> Iterator[Steps]:
    if not err_console.is_terminal:
        yield Steps(None)
        return
    columns = (TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=False) as progress:
        yield Steps(progress)


class Ticker:
    """A waiting clock: a spinner with the latest status on a terminal, a plain line per tick elsewhere."""

    def __init__(self, progress: Progress | None, label: str):
        self._progress = progress
        self._task = progress.add_task(label, status="") if progress else None

    def __call__(self, elapsed_s: float, info: dict[str, Any]) -> None:
        status = "  ".join(f"{k} {v}" for k, v in info.items())
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, status=status)
        else:
            err_console.print(f"{elapsed_s:6.0f}s  waiting  {status}".rstrip(), markup=False)


@contextmanager
def ticker(label: str) -> Iterator[Ticker]:
    if not err_console.is_terminal:
        yield Ticker(None, label)
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
               TextColumn("{task.fields[status]}"))
    with Progress(*columns, console=err_console, transient=True) as progress:
        yield Ticker(progress, label)
