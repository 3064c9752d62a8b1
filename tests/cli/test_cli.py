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
    """`wait --help`, docs/gce-guest.md's table and the catalog's derivation name the same first boot (its longest
    chain, with the worst column every part at its worst one after another), and the default wait outlasts that."""
    import re

    from gemma4_t4 import catalog

    wait = next(p for path, p in _parsers(cli.build_parser()) if path == "gemma4-t4 wait")
    timeout = next(a for a in wait._actions if "--timeout" in a.option_strings)
    docs = (REPO / "docs" / "gce-guest.md").read_text()
    total = re.search(r"\*\*a first boot\*\* \| \*\*(\d+)–(\d+) \(~(\d+)–(\d+) min\)\*\* \| \*\*(\d+) ", docs)
    assert total, "the doc's first-boot total row"
    low, high, low_min, high_min, worst = (int(g) for g in total.groups())
    assert (low, high) == catalog.GCE_FIRST_BOOT_S and (low_min, high_min) == (low // 60, high // 60)
    assert worst == sum(part.worst_s for part in catalog.FIRST_BOOT)
    assert f"default {catalog.WAIT_TIMEOUT_S}" in timeout.help and "docs/gce-guest.md" in timeout.help
    assert timeout.default == catalog.WAIT_TIMEOUT_S > worst, "the default wait outlasts the slowest first boot"


def gemma4_t4(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gemma4_t4", *args], capture_output=True, text=True, cwd=REPO)


@pytest.mark.parametrize("args,fragment", [
    (("bench", "typo"), "invalid choice: 'typo'"),
    (("status",), "one of the arguments --url -s/--stack --endpoint is required"),
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


# --- the same arguments everywhere, checked before any network call ------------------------------------

DEAD = "http://127.0.0.1:1"  # reaching it would fail with 1, not 2: a 2 proves nothing was sent


@pytest.mark.parametrize("args,fragment", [
    (("stauts",), "did you mean 'status'?"),
    (("wait", "--url", DEAD, "--intervall", "5"), "did you mean '--interval'?"),
    (("wait", "--url", DEAD, "--int", "5"), "unrecognized arguments: --int"),  # no abbreviated flags
    (("wait", "--url", DEAD, "--interval", "0"), "--interval: 0 must be above 0"),
    (("wait", "--url", DEAD, "--timeout", "-1"), "--timeout: -1 must be 0 or more"),
    (("stop", "-s", "gce-t4", "--interval", "0"), "must be above 0"),
    (("logs", "--url", DEAD, "--lines", "0"), "--lines: 0 must be 1 or more"),
    (("query", "hi", "--url", DEAD, "--max-tokens", "-5"), "--max-tokens: -5 must be 1 or more"),
    (("query", "hi", "--url", DEAD, "--temperature", "-1"), "must be 0 or more"),
    (("bench", "run", "--url", DEAD, "--short", "10", "--long", "5"), "--short (10) must be below --long (5)"),
    (("bench", "run", "--url", DEAD, "--questions", "41"), "--questions 41: there are 40"),
    (("bench", "run", "--url", DEAD, "--repeats", "0"), "must be 1 or more"),
    (("bench", "run", "--url", DEAD, "--out", "/nonexistent/run.json"), "--out /nonexistent/run.json: no folder"),
    (("cost", "gce-t4", "-s", "sagemaker-t4"), "two stacks"),
    (("cost",), "which stack?"),
    (("query", "hi", "--url", "localhost:8000"), "url localhost:8000 has no scheme: give http://localhost:8000"),
    (("status", "--url", "127.0.0.1:8000/v1"), "give http://127.0.0.1:8000/v1"),
    (("status", "--url", "http://127.0.0.1:8000/v1/chat"), "has a path: give the server's origin"),
    (("bench", "run", "--url", "ftp://127.0.0.1"), "give http(s)://host:port"),
    (("logs", "--url", DEAD), "a plain URL has no log to read: use --stack STACK, or --endpoint NAME --region REGION"),
])
def test_values_are_checked_before_anything_is_sent(args, fragment):
    result = gemma4_t4(*args)
    assert result.returncode == output.EXIT_USAGE, result.stderr
    assert fragment in result.stderr and "Traceback" not in result.stderr


def test_the_stack_is_positional_or_dash_s_alike():
    import json

    positional, short, long_ = (gemma4_t4("cost", "gce-t4", "--json"), gemma4_t4("cost", "-s", "gce-t4", "--json"),
                                gemma4_t4("cost", "--stack", "gce-t4", "--json"))
    assert positional.returncode == short.returncode == long_.returncode == 0, positional.stderr + short.stderr
    assert json.loads(positional.stdout) == json.loads(short.stdout) == json.loads(long_.stdout)
    assert json.loads(short.stdout)["stack"] == "gce-t4"


def test_every_command_shows_examples_and_every_target_command_takes_dash_s():
    for path, parser in _parsers(cli.build_parser()):
        subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if path == "gemma4-t4":
            continue
        assert parser.epilog and "examples:" in parser.epilog, path
        if not subcommands and path not in ("gemma4-t4 fit", "gemma4-t4 mcp", "gemma4-t4 bench compare",
                                            "gemma4-t4 zones"):
            assert "-s" in parser.option_strings(), path


def test_a_trailing_v1_is_the_same_server():
    from gemma4_t4.core.targets import HttpTarget

    assert HttpTarget("http://127.0.0.1:8000/v1").base_url == "http://127.0.0.1:8000"
    assert HttpTarget("http://127.0.0.1:8000/v1/").base_url == "http://127.0.0.1:8000"


def test_an_unknown_price_is_unknown_never_zero():
    """A zone that sells T4s in a region the catalog has no disk prices for: null in JSON, "-" in text."""
    import json

    from gemma4_t4 import catalog

    zone = next(z for z in sorted(catalog.GCE_T4_ZONES)
                if "disk:pd-balanced:gb-month" not in catalog.GCE_PRICES.get(catalog.region_of(z), {}))
    result = gemma4_t4("cost", "gce-t4", "--config", f"gemma4-t4:zone={zone}", "--json")
    estimate = json.loads(result.stdout)
    assert estimate["after_destroy_usd_per_month"] is None and estimate["running_usd_per_hour"] is None
    text = gemma4_t4("cost", "gce-t4", "--config", f"gemma4-t4:zone={zone}").stdout
    assert "$0.00" not in text and "unknown, not free" in text
    planned = gemma4_t4("plan", "gce-t4", "--config", f"gemma4-t4:zone={zone}").stdout
    assert "estimated cost while running: unknown" in planned


def test_a_spinner_on_a_terminal_and_nothing_in_a_pipe(monkeypatch):
    import io

    from rich.console import Console

    for terminal in (True, False):
        stream = io.StringIO()
        monkeypatch.setattr(output, "err_console", Console(file=stream, force_terminal=terminal))
        with output.busy("running stack gce-t4's program offline"):
            pass
        assert ("running stack gce-t4's program offline" in stream.getvalue()) is terminal
