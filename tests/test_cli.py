"""The command line's conventions, as a user meets them: help everywhere, one target at a time,
exit codes that mean the same on every command."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest
from conftest import REPO

from gemma4_t4 import cli
from gemma4_t4.cli import output

pytestmark = pytest.mark.cli


def _parsers(parser: argparse.ArgumentParser, path: str = "gemma4-t4"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_option_of_every_command_says_what_it_does():
    missing = [f"{path} {'/'.join(action.option_strings) or action.dest}"
               for path, parser in _parsers(cli.build_parser()) for action in parser._actions
               if not isinstance(action, argparse._SubParsersAction) and action.help is None]
    assert missing == []


def test_waits_hint_agrees_with_the_first_boot_timings():
    """`wait --help` and docs/gce-guest.md name the same first-boot figure, and the default covers it."""
    import re

    wait = next(p for path, p in _parsers(cli.build_parser()) if path == "gemma4-t4 wait")
    timeout = next(a for a in wait._actions if "--timeout" in a.option_strings)
    docs = (REPO / "docs" / "gce-guest.md").read_text()
    total = re.search(r"\*\*measured and sourced parts\*\* \| \*\*(\d+)–(\d+) \(~(\d+) min\)\*\*", docs)
    assert total, "the doc's first-boot total row"
    low, high, minutes = (int(g) for g in total.groups())
    assert round((low + high) / 2 / 60) == minutes
    assert f"~{minutes} min of measured parts" in timeout.help and "docs/gce-guest.md" in timeout.help
    assert timeout.default > high, "the default wait must outlast the measured parts"


def gemma4_t4(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gemma4_t4", *args], capture_output=True, text=True, cwd=REPO)


@pytest.mark.parametrize("args,fragment", [
    (("bench", "typo"), "invalid choice: 'typo'"),
    (("status",), "one of the arguments --url --stack --endpoint is required"),
    (("query", "hi", "--url", "http://127.0.0.1:1", "--endpoint", "e"), "not allowed with argument"),
    (("status", "--endpoint", "e"), "--endpoint needs --region"),
    (("bench", "run", "--url", "http://127.0.0.1:1", "--concurrency", "1,x"), "not a comma-separated list"),
])
def test_bad_usage_exits_2_before_anything_runs(args, fragment):
    result = gemma4_t4(*args)
    assert result.returncode == output.EXIT_USAGE and fragment in result.stderr and "Traceback" not in result.stderr


def test_an_interrupt_exits_130(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.status, "run", interrupted)
    assert cli.main(["status", "--url", "http://127.0.0.1:1"]) == output.EXIT_INTERRUPTED
    assert "interrupted" in capsys.readouterr().err


def test_an_unreachable_server_fails_with_1_and_no_traceback():
    result = gemma4_t4("query", "hi", "--url", "http://127.0.0.1:1")
    assert result.returncode == output.EXIT_FAILED and "cannot reach http://127.0.0.1:1" in result.stderr
    assert "Traceback" not in result.stderr
