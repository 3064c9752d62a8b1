"""Every child process the operator tools start (pulumi, gcloud and the ssh it runs, a fit
environment's python) starts here, so each one is held to the same three rules:

- stdin is /dev/null: nothing a child asks can wait on a prompt nobody sees, and no child reads
  what the caller's stdin carries (the MCP server's stdio transport is its stdin);
- its own session (start_new_session): the child leads a process group of its own, so ending it
  ends what it started too (gcloud runs ssh, which runs gcloud's IAP helper) and nothing is orphaned;
- a timeout, a Ctrl-C (during the wait, or while the child starts) or any other way out of the wait
  ends that whole group: SIGTERM, then SIGKILL for what is left after a grace. Being in its own
  session, the child does not get the terminal's Ctrl-C itself: the KeyboardInterrupt that reaches
  this process ends it here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

# How long a child's group has, after SIGTERM, to end by itself (ssh closing its session, gcloud
# its helper) before SIGKILL.
GRACE_S = 5.0
KILL_WAIT_S = 1.0


def start(argv: Sequence[str], *, stdout: int | IO[Any] | None = subprocess.PIPE,
          stderr: int | IO[Any] | None = subprocess.PIPE, text: bool = True, cwd: Path | str | None = None,
          env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """ARGV started with stdin /dev/null, in a session of its own (see the module's rules). A Ctrl-C that comes
    while the child starts (it runs before Popen returns: a loaded machine widens that moment) ends the child's
    group here, as the caller never got the child to end."""
    with _ctrl_c_held() as ctrl_c:
        process = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, text=text,
                                   cwd=cwd, env=None if env is None else dict(env), start_new_session=True)
    if ctrl_c:
        end_group(process)
        raise KeyboardInterrupt
    return process


@contextlib.contextmanager
def _ctrl_c_held() -> Iterator[list[int]]:
    """Hold a Ctrl-C until the block ends; the list yielded is not empty when one came. Only Python's own handler
    is held (a program's own handler is its business), and only in the main thread, the one a Ctrl-C reaches."""
    held: list[int] = []
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield held
        return
    signal.signal(signal.SIGINT, lambda signum, _frame: held.append(signum))
    try:
        yield held
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _signal_group(pgid: int, sig: int) -> bool:
    """SIG to the group; False when no process of it is left."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:  # macOS answers a group of zombies so: nothing left to signal
        return False


def end_group(process: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """End PROCESS and every process of its group: SIGTERM, then SIGKILL to whatever is left after
    GRACE_S. Waits for PROCESS itself (no zombie)."""
    pgid = process.pid  # start_new_session: the child leads its own group, whose id is its pid
    if not _signal_group(pgid, signal.SIGTERM):
        process.wait()
        return
    if not _group_ends(process, grace_s):
        _signal_group(pgid, signal.SIGKILL)
        _group_ends(process, KILL_WAIT_S)  # SIGKILL is not refused, but dying takes the kernel a moment
    process.wait()


def _group_ends(process: subprocess.Popen, within_s: float) -> bool:
    """Whether PROCESS's group is gone within WITHIN_S (a member that is a zombie nobody reaped counts)."""
    deadline = time.monotonic() + within_s
    while True:
        process.poll()  # reap the leader: a zombie still counts as a member of the group
        if not _signal_group(process.pid, 0):  # signal 0: is anyone of the group left?
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def run(argv: Sequence[str], timeout_s: float | None, *, cwd: Path | str | None = None,
        env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """ARGV to its end, its output captured as text. subprocess.TimeoutExpired after TIMEOUT_S
    (None: no limit), its group ended first; a KeyboardInterrupt while it runs ends the group too,
    then goes on up (the CLI's boundary makes it exit 130)."""
    process = start(argv, cwd=cwd, env=env)
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except BaseException:
        end_group(process)
        with contextlib.suppress(Exception):
            process.communicate()  # close the pipes
        raise
    return subprocess.CompletedProcess(list(argv), process.returncode, stdout, stderr)
