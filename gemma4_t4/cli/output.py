"""How every command talks: results on stdout (a JSON document with --json, rich text
otherwise), progress and errors on stderr; bars and spinners on a terminal, plain lines elsewhere."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from ..core.ops import SCHEMA_VERSION  # every --json document's version (docs/json.md), the MCP tools' too
from ..core.targets import TargetError
from ..errors import UsageError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

# No emoji codes: a key such as gemma4-t4:cloud: would print as "gemma4-t4☁".
console = Console(highlight=False, soft_wrap=True, emoji=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def print_json(document: Any) -> None:
    """The --json result: one document on stdout, nothing else there, with its schema_version
    (a list, fit's reports, is wrapped as {"reports": [...]})."""
    if not isinstance(document, dict):
        document = {"reports": document}
    document = {"schema_version": SCHEMA_VERSION, **document}
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=True, default=str) + "\n")


@contextmanager
def busy(label: str) -> Iterator[None]:
    """A spinner on stderr while something takes a while (the offline plan, a cloud's API, the
    compiler), on a terminal only: a pipe or a log gets nothing."""
    if not err_console.is_terminal:
        yield
        return
    with err_console.status(label):
        yield


def print_failure(failure: Any) -> None:
    """The --json document of a failure (core.failures.Failure): the same exit code, and this on stdout."""
    error = {"kind": failure.kind, "message": failure.message, "exit_code": failure.exit_code}
    if failure.detail:
        error["detail"] = failure.detail
    print_json({"ok": False, "error": error})


def fail(command: str, message: str, code: int = EXIT_FAILED) -> NoReturn:
    """End COMMAND with MESSAGE through the one boundary (gemma4_t4.cli.main): one line, exit CODE (2:
    the user's usage, 1: the operation failed), and with --json the failure document."""
    if code == EXIT_USAGE:
        raise UsageError(message, prog=f"gemma4-t4 {command}")
    raise TargetError(message)


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


# --- arguments every command checks the same way, before any network call ------------------------


def _number(kind: type, low: float, inclusive: bool, words: str):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a{'n integer' if kind is int else ' number'}") from None
        if value < low or (value == low and not inclusive):
            raise argparse.ArgumentTypeError(f"{text} must be {words}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


positive_float = _number(float, 0, False, "above 0")
non_negative_float = _number(float, 0, True, "0 or more")
positive_int = _number(int, 1, True, "1 or more")
non_negative_int = _number(int, 0, True, "0 or more")


def at_most(parse: Callable[[str], Any], high: float) -> Callable[[str], Any]:
    """PARSE, and at most HIGH (a bound of gemma4_t4.core.limits, which says why)."""

    def checked(text: str) -> Any:
        value = parse(text)
        if value > high:
            raise argparse.ArgumentTypeError(f"{text} is above the limit of {high:g} (gemma4_t4/core/limits.py)")
        return value

    checked.__name__ = parse.__name__  # argparse names the type in its messages
    return checked


def add_check(parser: argparse.ArgumentParser, check: Callable[[argparse.Namespace], None]) -> None:
    """One more usage rule for PARSER, after those it has (run before the command does anything)."""
    before = parser.get_default("check_usage")

    def both(args: argparse.Namespace) -> None:
        if before is not None:
            before(args)
        check(args)

    parser.set_defaults(check_usage=both)


def add_stack(parser: argparse.ArgumentParser, help_text: str = "gce-t4 or sagemaker-t4") -> None:
    """The stack, as `plan gce-t4` (positional, as it always was) or `plan -s gce-t4` (as Pulumi)."""
    parser.add_argument("stack_positional", nargs="?", metavar="STACK", help=help_text)
    parser.add_argument("-s", "--stack", help="the same, as Pulumi's commands take it")

    def check(args: argparse.Namespace) -> None:
        if args.stack and args.stack_positional and args.stack != args.stack_positional:
            parser.error(f"two stacks: {args.stack_positional} and --stack {args.stack}; say one")
        args.stack = args.stack or args.stack_positional
        if not args.stack:
            parser.error("which stack? e.g. gce-t4 or -s gce-t4")

    add_check(parser, check)
