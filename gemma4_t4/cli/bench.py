"""`gemma4-t4 bench run`: the reference T4 benchmark (decode rate, load at several concurrencies, 40
questions, $/Mtok) with TTFT/ITL/E2E percentiles, checked against the server's /metrics.
`gemma4-t4 bench compare A.json B.json`: two runs side by side. `--plot DIR`: PNG charts."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from .. import catalog
from ..core import bench, bench_report, charts, limits, ops
from ..core.targets import TargetError
from . import target_options
from .output import (
    EXIT_OK,
    EXIT_USAGE,
    add_check,
    at_most,
    console,
    fail,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    print_json,
    steps,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmark a server (`bench run`), or compare two runs (`bench compare`)",
                       description=__doc__)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    r = actions.add_parser("run", help="decode rate, load, quality and $/Mtok of one server",
                           description=bench.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target_options.add(r)
    target_options.add_model(r)
    r.add_argument("--out", type=Path, metavar="FILE", help="also write the whole report (every timing) here")
    r.add_argument("--json", action="store_true", help="print the report as one JSON document")
    r.add_argument("--plot", type=Path, metavar="DIR", help="write throughput.png and latency.png here")
    price = r.add_mutually_exclusive_group()
    price.add_argument("--price-per-hour", type=positive_float, metavar="USD",
                       help="what the server costs per hour, for $/Mtok")
    price.add_argument("--instance-type", choices=sorted(catalog.BENCH_INSTANCE_PRICES),
                       help=f"take the hourly SageMaker price from the catalog ({catalog.BENCH_PRICE_REGION})")
    defaults = bench.BenchPlan()
    tokens, repeats = at_most(positive_int, limits.MAX_TOKENS), at_most(positive_int, limits.MAX_REPEATS)
    r.add_argument("--short", type=tokens, default=defaults.short,
                   help="decode: the short answer, tokens (default 16)")
    r.add_argument("--long", type=tokens, default=defaults.long,
                   help="decode: the long answer, tokens (default 512)")
    r.add_argument("--repeats", type=repeats, default=defaults.repeats,
                   help="decode: calls of each length (default 5)")
    r.add_argument("--concurrency", type=_concurrency, default=defaults.concurrency, metavar="N,N,...",
                   help="load: parallel requests per batch (default 1,4,16)")
    r.add_argument("--load-tokens", type=tokens, default=defaults.load_tokens,
                   help="load: fixed output tokens per request (default 256)")
    r.add_argument("--load-repeats", type=repeats, default=defaults.load_repeats,
                   help="load: batches per concurrency; the median is reported (default 2)")
    r.add_argument("--questions", type=non_negative_int, default=defaults.questions,
                   help="quality: how many of the 40 (default 40)")
    r.add_argument("--pause-s", type=at_most(non_negative_float, limits.MAX_INTERVAL_S), default=defaults.pause_s,
                   help="load: seconds between batches (default 0)")
    r.set_defaults(run=run)
    add_check(r, lambda args: _check_run(r, args))

    c = actions.add_parser("compare", help="two `bench run --out` reports side by side, with ratios B/A",
                           description="Two runs side by side: each metric, the ratio B/A, and how many of the "
                                       "quality answers are byte-identical.")
    c.add_argument("a", type=Path, metavar="A.json", help="the baseline run")
    c.add_argument("b", type=Path, metavar="B.json", help="the run compared with it")
    c.add_argument("--json", action="store_true", help="print the comparison as one JSON document")
    c.add_argument("--plot", type=Path, metavar="DIR",
                   help="write compare-throughput.png and compare-latency.png (A against B) here")
    c.set_defaults(run=compare)


def _check_run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.short >= args.long:
        parser.error(f"--short ({args.short}) must be below --long ({args.long}): the decode rate is measured on "
                     "their difference")
    if args.out and not args.out.resolve().parent.is_dir():  # found before the run, not after its minutes
        parser.error(f"--out {args.out}: no folder {args.out.resolve().parent}")
    if args.questions > len(bench.questions()):
        parser.error(f"--questions {args.questions}: there are {len(bench.questions())}")


def _concurrency(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers, e.g. 1,4,16") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("every concurrency must be at least 1")
    if max(values) > limits.MAX_CONCURRENCY or len(values) > limits.MAX_CONCURRENCY_STEPS:
        raise argparse.ArgumentTypeError(f"at most {limits.MAX_CONCURRENCY_STEPS} steps of at most "
                                         f"{limits.MAX_CONCURRENCY} each (gemma4_t4/core/limits.py)")
    return values


def run(args: argparse.Namespace) -> int:
    plan = bench.BenchPlan(short=args.short, long=args.long, repeats=args.repeats, concurrency=args.concurrency,
                           load_tokens=args.load_tokens, load_repeats=args.load_repeats, questions=args.questions,
                           pause_s=args.pause_s)
    price = args.price_per_hour
    if args.instance_type:
        price = catalog.BENCH_INSTANCE_PRICES[args.instance_type].usd_per_hour
    with target_options.opened(args) as target, steps() as on_step:
        report = bench.Bench(target, ops.served_model(target, args.model), plan, on_step).run(price)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    written = charts.plot_run(dict(report), args.plot) if args.plot else []
    if args.json:
        print_json(report)
    else:
        show_report(dict(report))
        _show_written(written)
    return EXIT_OK


def _show_written(paths: list[Path]) -> None:
    for path in paths:
        console.print(f"wrote {path}", markup=False)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:,.3f}" if isinstance(value, float) else str(value)


def _ms(seconds: float | None) -> str:
    """Milliseconds to three significant digits: 0.0421, 4.21, 42.1, 421, 4210."""
    if seconds is None:
        return "-"
    ms = seconds * 1000
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"


def show_report(report: dict[str, Any]) -> None:
    table = Table("metric", "value", title=f"{report['target']}  model {report['model']}", title_justify="left")
    table.add_row("decode tok/s", _fmt(report["decode"]["tok_s"]))
    table.add_row("fixed cost per call s", _fmt(report["decode"]["fixed_cost_s"]))
    for concurrency, load in report["load"].items():
        table.add_row(f"load c={concurrency} tok/s", _fmt(load["tok_s"]))
    quality = report["quality"]
    table.add_row("quality", f"{quality['correct']}/{quality['total']} correct")
    if report.get("usd_per_mtok") is not None:
        table.add_row("$ per million output tokens",
                      f"{report['usd_per_mtok']:.3f} at ${report['running_usd_per_hour']}/h")
    console.print(table)
    show_latency(report)
    show_server_check(report)


LATENCIES = (("ttft_s", "TTFT"), ("itl_s", "ITL"), ("e2e_s", "E2E"), ("tpot_s", "TPOT"))


def show_latency(report: dict[str, Any]) -> None:
    """One column per concurrency: requests/s, output tok/s, and p50/p90/p99 of each latency."""
    loads = report["load"]
    table = Table("", *(f"c={c}" for c in loads), title="throughput and latency (ms) by concurrency",
                  title_justify="left")
    table.add_row("requests/s", *(f"{load['requests_per_s']:.2f}" for load in loads.values()))
    table.add_row("output tok/s", *(f"{load['tok_s']:,.1f}" for load in loads.values()))
    for key, name in LATENCIES:
        for cut in ("p50", "p90", "p99"):
            table.add_row(f"{name} {cut}", *(_ms(load[key][cut] if load[key] else None) for load in loads.values()),
                          end_section=cut == "p99")
    console.print(table)


def show_server_check(report: dict[str, Any]) -> None:
    """Each window (a concurrency, the whole run) against vLLM's own counters and histograms."""
    windows = [(f"c={c}", load["server"]) for c, load in report["load"].items()] + [("run", report["server"])]
    checks = [check for _, check in windows if check is not None]
    if not checks:
        console.print("the server has no /metrics: nothing to check the figures against", markup=False)
        return
    table = Table("bench / server", *(name for name, check in windows if check is not None),
                  title="checked against the server's /metrics", title_justify="left")
    for key, label in (("requests", "requests"), ("prompt_tokens", "prompt tokens"),
                       ("generation_tokens", "generation tokens")):
        table.add_row(label,
                      *(Text(f"{c['bench'][key]} / {c['server'][key]}",
                             style="" if c["bench"][key] == c["server"][key] else "bold red") for c in checks),
                      end_section=key == "generation_tokens")
    for key, label in (("ttft_mean_s", "TTFT"), ("itl_mean_s", "ITL"), ("e2e_mean_s", "E2E")):
        table.add_row(f"{label} mean ms", *(_ms(c["bench"][key]) for c in checks))
        table.add_row("  server's", *(_ms(c["server"][key]) for c in checks))
        differences = []
        for c in checks:
            b, s = c["bench"][key], c["server"][key]
            text = "-" if b is None or s is None else f"{(b - s) * 1000:+.3g}"
            differences.append(Text(text, style="yellow" if key == "ttft_mean_s" and not c["ttft_within_tolerance"]
                                    else ""))
        table.add_row("  difference", *differences, end_section=key != "ttft_mean_s")
        if key == "ttft_mean_s":  # where the difference is: the server's front end, and the client's own time
            table.add_row("  sent → response headers", *(_ms(c["bench"].get("headers_mean_s")) for c in checks))
            table.add_row("  client, before sending", *(_ms(c["bench"].get("client_mean_s")) for c in checks),
                          end_section=True)
    console.print(table)
    console.print("The bench's TTFT runs from the request's first byte on the wire to the first chunk; vLLM's from "
                  "when its front end starts rendering the chat to when the first token leaves the engine. The "
                  "difference is the server's HTTP front end on both sides of that (parsing and validating the "
                  "request, writing the chunk): vLLM sends the response headers once the request is rendered, so "
                  "most of it is in 'sent → response headers'; the client's own time before sending is in no figure. "
                  "Yellow: more than 10 % or 5 ms apart (a busy API server, or CPUs shared with the engine).",
                  markup=False)


def compare(args: argparse.Namespace) -> int:
    try:
        reports = bench_report.load_report(args.a), bench_report.load_report(args.b)
    except TargetError as err:  # a file that is missing or not a report: bad input, not a failed run
        return fail("bench compare", str(err), EXIT_USAGE)
    combined = bench_report.compare(*reports)
    written = charts.plot_compare(*reports, args.plot) if args.plot else []
    if args.json:
        print_json(combined)
        return EXIT_OK
    table = Table("metric", "A", "B", "B/A", caption=f"A = {combined['a']}, B = {combined['b']}")
    for row in combined["rows"]:
        table.add_row(Text(row["metric"]), _fmt(row["a"]), _fmt(row["b"]), _fmt(row["ratio_b_a"]))
    console.print(table)
    console.print(f"identical answers: {combined['identical_answers']}/{combined['compared']}")
    _show_written(written)
    return EXIT_OK
