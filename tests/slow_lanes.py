"""`make test`'s slow set in two lanes at once: the boot test (guests under systemd-nspawn, mostly waiting on
their timers, apt and downloads) beside the rest of the slow set (servers, builds, moto, the index). Each lane is
one pytest run, one test at a time, as before; together they take about the longer lane's time instead of the
sum. The boot lane's report goes to a file and is printed once the other lane ends.

    python tests/slow_lanes.py SLOW_MARKER_EXPRESSION [PYTEST_ARGS...]

Exits non-zero when either lane fails. Both lanes take SIGINT as a foreground command does (a lane started from
a non-interactive shell would otherwise ignore it, and the Ctrl-C tests and the boot test's clean-up need it),
and a SIGINT or SIGTERM to this runner reaches both.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


def _default_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def lanes(slow: str, extra: list[str], scratch: Path) -> dict[str, list[str]]:
    pytest = [sys.executable, "-m", "pytest", "-q", *extra]
    # Its own temporary root and no cache writes: two pytest sessions share neither.
    return {"boot": [*pytest, "-m", "boot", f"--basetemp={scratch / 'boot-lane'}", "-p", "no:cacheprovider"],
            "rest": [*pytest, "-m", f"({slow}) and not boot"]}


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    scratch = Path(os.environ.get("TMPDIR", "/tmp"))
    scratch.mkdir(parents=True, exist_ok=True)
    commands = lanes(argv[0], argv[1:], scratch)
    log_path = scratch / "boot-lane.log"
    print(f"slow set: the boot lane runs beside the rest; its report follows theirs ({log_path})", flush=True)
    with log_path.open("w") as log:
        boot = subprocess.Popen(commands["boot"], stdout=log, stderr=subprocess.STDOUT, preexec_fn=_default_signals)
        rest = subprocess.Popen(commands["rest"], preexec_fn=_default_signals)
        children = (boot, rest)

        def forward(signum: int, _frame: object) -> None:
            for child in children:
                if child.poll() is None:
                    child.send_signal(signum)

        signal.signal(signal.SIGTERM, forward)
        signal.signal(signal.SIGINT, forward)
        codes = {"rest": rest.wait(), "boot": boot.wait()}
    print("\n===== the boot lane =====", flush=True)
    sys.stdout.write(log_path.read_text())
    print(f"\nslow set: rest exited {codes['rest']}, boot exited {codes['boot']}", flush=True)
    return 0 if not any(codes.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
