"""`gemma4-t4 query PROMPT`: one chat completion (the OpenAI chat API; raw /v1/completions returns
an empty string on an instruction-tuned checkpoint). --stream prints tokens as they arrive; it is
the default for a SageMaker endpoint, which ends a plain invocation after 60 s."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from ..clouds import Feature, lacks
from ..core import limits, ops
from ..core.targets import TargetError
from . import target_options
from .output import EXIT_OK, at_most, console, err_console, non_negative_float, positive_int, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("query", help="one chat completion", description=__doc__)
    target_options.add(p)
    target_options.add_model(p)
    p.add_argument("prompt", type=_prompt, help=f"the user message (at most {limits.MAX_PROMPT_CHARS:,} characters)")
    p.add_argument("--stream", action=argparse.BooleanOptionalAction, default=None,
                   help="print the answer as it is generated (default: on for a SageMaker endpoint, whose plain "
                        "invocations must answer within 60 s; off for a URL or a GCE stack)")
    p.add_argument("--max-tokens", type=at_most(positive_int, limits.MAX_TOKENS), default=256,
                   help=f"the most tokens to generate (default 256, at most {limits.MAX_TOKENS})")
    p.add_argument("--temperature", type=non_negative_float, default=0.0,
                   help="sampling temperature (default 0: greedy)")
    p.add_argument("--json", action="store_true", help="print the reply (text, usage, finish reason) as JSON")
    p.set_defaults(run=run)


def _prompt(text: str) -> str:
    if len(text) > limits.MAX_PROMPT_CHARS:
        raise argparse.ArgumentTypeError(f"the prompt is {len(text):,} characters; at most {limits.MAX_PROMPT_CHARS:,} "
                                         "(gemma4_t4/core/limits.py)")
    return text


def run(args: argparse.Namespace) -> int:
    with target_options.opened(args) as target:
        reply: ops.Reply | None = None
        stream = lacks(target.cloud, Feature.BLOCKING_QUERY) if args.stream is None else args.stream
        if stream:
            printed = False
            try:
                for piece in ops.query_stream(target, args.prompt, args.model, args.max_tokens, args.temperature):
                    if isinstance(piece, ops.Reply):
                        reply = piece
                    elif not args.json:
                        console.out(piece, end="", highlight=False)
                        printed = True
            except TargetError:
                if printed:
                    console.out("")  # the error starts on its own line, after the partial answer
                raise
            if not args.json:
                console.out("")
        else:
            reply = ops.query(target, args.prompt, args.model, args.max_tokens, args.temperature)
    assert reply is not None, "a stream always ends with the whole reply"
    if args.json:
        print_json(asdict(reply))
        return EXIT_OK
    if not stream:
        console.out(reply.text, highlight=False)
    err_console.print(f"usage: {json.dumps(reply.usage)}  finish: {reply.finish_reason}", markup=False)
    return EXIT_OK
