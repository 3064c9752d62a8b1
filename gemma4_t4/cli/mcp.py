"""`gemma4-t4 mcp`: serve the operator commands as MCP tools (plan, cost, preflight, fit, status,
wait, query, logs, bench, bench_compare, stop, start) to an MCP client such as an editor's
assistant, over stdio (what clients launch), or streamable HTTP on 127.0.0.1 with --transport.
Each tool calls the same core as the command of the same name; `pulumi up` and `pulumi destroy`
are not offered.

Scoped: a tool acts only on the named stack's own VM or endpoint; it reads and writes files only
inside --workdir; a `url` must be on loopback unless its origin is given with --allow-url. Anything
else is refused before anything is contacted (docs/mcp.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .output import EXIT_OK, EXIT_USAGE, fail, positive_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mcp", help="serve these commands as MCP tools (stdio, or HTTP on loopback)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio",
                   help="stdio (default: the client starts the server) or streamable-http on 127.0.0.1")
    p.add_argument("--port", type=positive_int, default=8765, help="the HTTP port on 127.0.0.1 (default 8765)")
    p.add_argument("--project-dir", type=Path, help="the gemma4-t4 Pulumi project: for plan, cost, preflight, fit, "
                                                    "and where `pulumi stack output` runs (default: the working "
                                                    "directory)")
    p.add_argument("--workdir", type=Path,
                   help="the one folder the tools read and write files in (bench's out and plot_dir, "
                        "bench_compare's reports): anything outside it, symlinks and .. resolved, hidden files and "
                        "folders and Pulumi's files are refused, and a report is never written over a file; not / "
                        "nor a folder holding your home (default: $XDG_DATA_HOME/gemma4-t4/mcp, "
                        "~/.local/share/gemma4-t4/mcp when unset)")
    p.add_argument("--allow-url", action="append", default=[], type=_origin, metavar="ORIGIN",
                   help="also let a tool's url reach this origin, scheme://host[:port] (repeatable); "
                        "without it only loopback: 127.0.0.0/8, ::1, localhost")
    p.add_argument("--stack", action="append", default=[], dest="stacks", metavar="STACK",
                   help="act only on this stack of the project (repeatable); without it, on any of its stacks")
    # Local stand-ins for the tests; not for users.
    p.add_argument("--endpoint-url", help=argparse.SUPPRESS)
    p.add_argument("--compute-endpoint", help=argparse.SUPPRESS)
    p.set_defaults(run=run)


def _origin(text: str) -> str:
    from ..mcp import scope

    try:
        scope.Urls((text,))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def run(args: argparse.Namespace) -> int:
    from ..mcp import server  # the SDK takes half a second to import: only for this command
    from ..mcp.workspace import default_workdir, refuse_broad_workdir

    if args.workdir is None:
        args.workdir = default_workdir()
    if not args.workdir.is_dir():
        raise FileNotFoundError(2, "no such folder (--workdir)", str(args.workdir))
    try:
        refuse_broad_workdir(args.workdir)
    except ValueError as err:
        return fail("mcp", str(err), EXIT_USAGE)
    token = None
    if args.transport == "streamable-http":
        try:
            token, made = server.http_token()
        except ValueError as err:
            return fail("mcp", str(err), EXIT_USAGE)
        if made:  # printed once, on stderr: the client's config takes it; it is never written anywhere
            print(f"gemma4-t4 mcp: http://127.0.0.1:{args.port}/mcp asks every request for this token "
                  f"(Authorization: Bearer TOKEN; set ${server.TOKEN_ENV} to choose it): {token}",
                  file=sys.stderr, flush=True)
    server.serve(args.transport, args.port, token=token, project_dir=args.project_dir, workdir=args.workdir,
                 allow_urls=args.allow_url, stacks=args.stacks,
                 endpoint_url=args.endpoint_url, compute_endpoint=args.compute_endpoint)
    return EXIT_OK
