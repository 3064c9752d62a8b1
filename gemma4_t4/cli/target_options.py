"""The target options every command that talks to a server shares: exactly one of --url,
--stack or --endpoint (with --region)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager

from .. import clouds
from ..core.ops import INSTEAD_OF_A_STACK
from ..core.targets import Target
from .output import add_check, busy


def add(parser: argparse.ArgumentParser) -> None:
    where = parser.add_argument_group("target (exactly one of --url, --stack, --endpoint)")
    choice = where.add_mutually_exclusive_group(required=True)
    choice.add_argument("--url", help="any OpenAI-compatible server, e.g. http://127.0.0.1:8000 (a trailing /v1, "
                                      "as the OpenAI SDK takes it, is fine)")
    choice.add_argument("-s", "--stack",
                        help="a deployed stack, e.g. gce-t4 (reads `pulumi stack output`; a GCE stack's "
                                   "IAP tunnel is opened on a free local port, again if it drops, and closed "
                                   "afterwards)")
    choice.add_argument("--endpoint", help="a SageMaker endpoint name (with --region)")
    where.add_argument("--region", help="the SageMaker endpoint's AWS region (only with --endpoint)")
    # Local SageMaker and Compute Engine stand-ins for the tests; not for users.
    where.add_argument("--endpoint-url", help=argparse.SUPPRESS)
    where.add_argument("--compute-endpoint", help=argparse.SUPPRESS)
    add_check(parser, lambda args: _check(parser, args))


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.region and not args.endpoint:
        parser.error("--region goes with --endpoint (a stack knows its own region)")
    if args.endpoint and not args.region:
        parser.error("--endpoint needs --region")


def add_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="the model id to send (default: the one model the server serves)")


@contextmanager
def opened(args: argparse.Namespace, instead: str = INSTEAD_OF_A_STACK) -> Iterator[Target]:
    """The target the options name. INSTEAD: the options the command takes instead of a stack (for the line that
    says the Pulumi CLI is missing): every one it names must work with the command."""
    with busy("reading the stack" if args.stack else "connecting"):
        target = clouds.resolve_target(url=args.url, stack=args.stack, endpoint=args.endpoint, region=args.region,
                                       endpoint_url=args.endpoint_url, compute_endpoint=args.compute_endpoint,
                                       instead=instead)
    try:
        yield target
    finally:
        target.close()
