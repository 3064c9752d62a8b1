"""gemma4-t4: plan, check, query and benchmark Gemma 4 on a Tesla T4 (GCE or SageMaker)."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import traceback
from typing import NoReturn

from .. import __version__, clouds
from ..core import failures
from ..errors import UsageError
from . import bench, cost, down, fit, logs, mcp, plan, preflight, query, start, status, stop, up, wait, zones
from .examples import EXAMPLES
from .output import err_console, print_failure

# The failure contract, the same for every command (docs/json.md, "Exit codes and failures").
EPILOG = """exit codes (every command):
  0    ok
  1    the operation failed: not serving, a check failed, the target refused or is unreachable,
       no or expired cloud credentials
  2    usage or config error: a bad flag, a refused or malformed stack file, a missing gcp:project
  130  interrupted (Ctrl-C); what the command had started is ended
every failure is one line on stderr with the fix; --verbose adds the client's whole text (gcloud's,
pulumi's, a server's error page), --debug (or GEMMA4_T4_DEBUG=1) the traceback; with --json the
failure is also a JSON document on stdout: {"schema_version", "ok": false, "error": {"kind",
"message", "exit_code", "detail"}}"""

COMMANDS = (up, down, plan, preflight, cost, zones, fit, status, wait, query, logs, bench, stop, start, mcp)


class Parser(argparse.ArgumentParser):
    """argparse as a Pulumi user expects it: no abbreviated flags (`--int` is not `--interval`),
    and a suggestion for a mistyped command or flag."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """A usage error, as every other failure: one line (not argparse's usage block), exit 2."""
        if "invalid choice: " in message:
            wrong = message.split("invalid choice: ", 1)[1].split("'")[1]
            choices = [c for a in self._actions if isinstance(a, argparse._SubParsersAction) for c in a.choices]
            message += _did_you_mean(wrong, choices)
        raise UsageError(f"{message} (`{self.prog} --help` shows the usage)", prog=self.prog)

    def option_strings(self) -> list[str]:
        return [o for action in self._actions for o in action.option_strings if action.help != argparse.SUPPRESS]


def _did_you_mean(wrong: str, known: list[str]) -> str:
    close = difflib.get_close_matches(wrong, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def build_parser() -> Parser:
    parser = Parser(prog="gemma4-t4", description=__doc__, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="print the traceback of a failure (also: GEMMA4_T4_DEBUG=1); also after the command")
    parser.add_argument("--verbose", action="store_true",
                        help="with a failure, also the client's whole text it was cut from; also after the command")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    for name, example in EXAMPLES.items():
        words = name.split()
        chosen = sub.choices[words[0]]
        if len(words) > 1:
            chosen = next(a for a in chosen._actions if isinstance(a, argparse._SubParsersAction)).choices[words[1]]
        chosen.epilog = "examples:\n" + "\n".join(f"  {line}" for line in example)
    return parser


def _command_parser(parser: Parser, args: argparse.Namespace) -> Parser:
    """The parser of the command (and action) ARGS ran, for its own usage line."""
    chosen: Parser = parser
    for dest in ("command", "action"):
        name = getattr(args, dest, None)
        subs = [a for a in chosen._actions if isinstance(a, argparse._SubParsersAction)]
        if name is None or not subs:
            break
        chosen = subs[0].choices[name]
    return chosen


def parse(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)  # bad usage: argparse prints it and exits 2
    if extras:
        chosen = _command_parser(parser, args)
        hints = "".join(_did_you_mean(e.split("=", 1)[0], chosen.option_strings()) for e in extras
                        if e.startswith("-"))
        chosen.error(f"unrecognized arguments: {' '.join(extras)}{hints}")
    if hasattr(args, "check_usage"):
        args.check_usage(args)  # rules argparse cannot say, e.g. --region only with --endpoint
    return args


GLOBAL_FLAGS = ("--debug", "--verbose")  # taken anywhere before `--`, after the command too


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    debug = "--debug" in argv[:cut] or failures.debugging()
    verbose = "--verbose" in argv[:cut]
    as_json = "--json" in argv[:cut]
    argv = [a for i, a in enumerate(argv) if not (i < cut and a in GLOBAL_FLAGS)]
    try:
        args = parse(argv)
        return int(args.run(args))
    except SystemExit:  # --help, --version
        raise
    except BaseException as err:  # the one boundary: every failure becomes one line
        failure = clouds.explain(err)  # the registered clouds' clients' errors too
        if debug and not isinstance(err, KeyboardInterrupt):
            traceback.print_exc()
        command = " ".join(a for a in argv[:1] if not a.startswith("-"))
        who = getattr(err, "prog", "") or (f"gemma4-t4 {command}" if command else "")
        prefix = f"{who}: " if who and failure.exit_code != failures.EXIT_INTERRUPTED else ""
        err_console.print(f"{prefix}{failure.message}", markup=False)
        if verbose and failure.detail:
            err_console.print(failure.detail, markup=False)
        if as_json:
            print_failure(failure)
        return failure.exit_code


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
