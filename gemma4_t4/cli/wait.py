"""`gemma4-t4 wait`: poll until the server is healthy, showing the elapsed time and what the cloud
says. On GCE: the VM's status and its guest's first-boot phases (read through the Compute API, no
SSH needed), and the IAP tunnel, opened again whenever it is down (sshd not up yet, the driver's
reboot, an IAP blip). If it fails or times out: what was seen last, the last log lines, exit 1."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

from rich.console import Group
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from ..core import limits, ops
from ..core.lifecycle import VM_ABSENT
from . import target_options
from .output import (
    EXIT_FAILED,
    EXIT_OK,
    at_most,
    console,
    err_console,
    non_negative_float,
    positive_float,
    print_json,
)

DEFAULT_TIMEOUT_S = ops.WAIT_TIMEOUT_S


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("wait", help="poll /health until healthy, with the VM's boot phases, elapsed time and VRAM",
                       description=__doc__)
    target_options.add(p)
    p.add_argument("--timeout", type=at_most(non_negative_float, limits.MAX_TIMEOUT_S), default=DEFAULT_TIMEOUT_S,
                   metavar="SECONDS",
                   help=f"give up after this long (default {DEFAULT_TIMEOUT_S:.0f}: as long as a VM's guest itself "
                        "may take, every part of a first boot at its worst; a boot that makes no progress stops its "
                        "VM sooner, which ends the wait; see docs/gce-guest.md, \"First-boot timings\")")
    p.add_argument("--interval", type=at_most(positive_float, limits.MAX_INTERVAL_S), default=15, metavar="SECONDS",
                   help="between two polls (default 15)")
    p.add_argument("--json", action="store_true", help="print the outcome as one JSON document")
    p.set_defaults(run=run)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class BootBoard:
    """The wait as a person follows it: the guest's phases with their times, and a status line
    (elapsed, what the last poll saw). Live on a terminal; elsewhere one plain line per new phase
    and per poll."""

    def __init__(self, label: str, live: bool):
        self.label = label
        self.live = live
        self.view: Any = None
        self.status = ""
        self._started = time.monotonic()
        self._shown = 0  # phases already printed (plain output)
        self._note_shown = False
        self._said = ""  # the last retry's or failure's detail printed (plain output)
        self._spinner = Spinner("dots")

    def tick(self, elapsed_s: float, info: dict[str, Any]) -> None:
        self.status = "  ".join(f"{k} {v}" for k, v in info.items() if k not in ("vm", "phase"))
        if not self.live:
            err_console.print(f"{elapsed_s:6.0f}s  waiting  {self._vm_line()}  {self.status}".rstrip(), markup=False)

    def boot(self, view: Any) -> None:
        self.view = view
        if view.note and not self._note_shown:
            self._note_shown = True
            err_console.print(view.note, markup=False)
        if self.live:
            return
        for phase in view.phases[self._shown:]:
            before = view.phases[self._shown - 1] if self._shown else None
            took = f" ({before.phase} took {_duration(before.seconds)})" if before else ""
            err_console.print(f"phase {phase.phase} began at {time.strftime('%H:%M:%S', time.localtime(phase.started))}"
                              f"{took}", markup=False)
            self._shown += 1
        if view.phase in (ops.RETRYING, ops.FAILED) and view.detail != self._said:
            self._said = view.detail
            said = "the guest tries again by itself" if view.phase == ops.RETRYING else "the guest does not retry"
            err_console.print(f"{view.phase} ({said}): {view.detail}", markup=False)

    def _vm_line(self) -> str:
        view = self.view
        if view is None or view.note:
            return ""
        if view.vm_status == VM_ABSENT:
            return "vm: not created yet"
        phase = f"  phase {view.phase}" + (f": {view.detail}" if view.detail else "") if view.phase else ""
        return f"vm {view.vm_status}{phase}"

    def __rich__(self) -> Group:
        table = Table(show_header=False, box=None, padding=(0, 2))
        phases = self.view.phases if self.view is not None else []
        for i, phase in enumerate(phases):
            current = i == len(phases) - 1
            mark = self._spinner if current and phase.phase not in ("serving", ops.FAILED) else Text("✓", "green")
            if phase.phase == ops.FAILED:
                mark = Text("✗", "bold red")
            elif phase.phase == ops.RETRYING:
                mark = Text("↻", "yellow") if not current else self._spinner
            detail = self.view.detail if current else ""
            # The current phase's clock runs between two polls (the guest's epoch; clocks agree on GCE).
            seconds = max(phase.seconds, time.time() - phase.started) if current and not isinstance(
                mark, Text) else phase.seconds
            table.add_row(mark, Text(phase.phase, "bold" if current else ""), Text(_duration(seconds)), Text(detail))
        elapsed = _duration(time.monotonic() - self._started)
        line = Text.assemble((f"waiting for {self.label} ", "bold"), elapsed, "  ", self._vm_line(), "  ",
                             (self.status, "dim"))
        return Group(table, line)

    def summary(self) -> str:
        phases = self.view.phases if self.view is not None else []
        return "phases: " + ", ".join(f"{p.phase} {_duration(p.seconds)}" for p in phases) if phases else ""


@contextmanager
def board(label: str) -> Iterator[BootBoard]:
    shown = BootBoard(label, live=err_console.is_terminal)
    if not shown.live:
        yield shown
        return
    with Live(shown, console=err_console, refresh_per_second=4, transient=False):
        yield shown


def run(args: argparse.Namespace) -> int:
    with target_options.opened(args) as target, board(target.label) as shown:
        result = ops.wait(target, timeout_s=args.timeout, interval_s=args.interval, on_tick=shown.tick,
                          on_boot=shown.boot)
    if not shown.live and (summary := shown.summary()):
        err_console.print(summary, markup=False)
    if args.json:
        print_json(asdict(result))
    elif result.healthy:
        console.print(f"healthy after {result.elapsed_s:.0f}s: {result.target}", markup=False)
    else:
        err_console.print(ops.wait_failure(result, args.timeout), markup=False)
    return EXIT_OK if result.healthy else EXIT_FAILED
