"""The benchmark's report: its fields (docs/benchmark.md: "The benchmark's JSON"; times in seconds), reading one
back from a file, and two runs side by side. What fills it in is core/bench.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typing_extensions import TypedDict

from .targets import TargetError

# Bumped whenever a field of the report changes meaning (docs/benchmark.md: "The benchmark's JSON").
# 2: every request streamed; latency percentiles, requests/s and the /metrics cross-check.
SCHEMA_VERSION = 3


class Percentiles(TypedDict):
    mean: float
    p50: float
    p90: float
    p99: float


class RequestTiming(TypedDict):
    ttft_s: float  # sent -> first chunk (vLLM sends it with the first token)
    last_token_s: float  # sent -> the last chunk that carries text
    e2e_s: float  # sent -> end of stream
    chunks: int  # chunks that carried text (a chunk may carry several tokens under load)
    prompt_tokens: int
    completion_tokens: int
    # The client's own time before the request left (building it, a pooled or new connection): in no latency above.
    client_s: float
    # sent -> the response's headers (None where the target cannot say). vLLM 0.30 writes them once it has parsed,
    # validated and rendered the request, before the engine has it: most of its front end, little of its TTFT.
    headers_s: float | None


class Batch(TypedDict):
    wall_s: float
    completion_tokens: int
    tok_s: float
    requests_per_s: float
    requests: list[RequestTiming]
    metrics_generation_tokens: float | None  # growth of vllm:generation_tokens_total; None without /metrics


class Figures(TypedDict):
    """One window of work as the bench counted it, or as the server did."""

    requests: int
    prompt_tokens: int
    generation_tokens: int
    ttft_mean_s: float | None
    itl_mean_s: float | None  # sum of (last token - first token) / sum of (tokens - 1): per token
    e2e_mean_s: float | None
    client_mean_s: float | None  # the bench's own time before a request left (RequestTiming.client_s); None: server
    headers_mean_s: float | None  # mean RequestTiming.headers_s; None: the server's, or a target that cannot say


class ServerCheck(TypedDict):
    bench: Figures
    server: Figures
    counts_equal: bool  # requests, prompt and generation tokens
    ttft_within_tolerance: bool  # |bench - server| <= max(10 % of server, 5 ms)


class Load(TypedDict):
    tok_s: float
    requests_per_s: float
    ttft_s: Percentiles
    itl_s: Percentiles | None  # None when no request produced two chunks
    e2e_s: Percentiles
    tpot_s: Percentiles | None
    batches: list[Batch]
    server: ServerCheck | None


class Decode(TypedDict):
    tok_s: float
    fixed_cost_s: float
    walls_s: dict[str, list[float]]


class Answer(TypedDict):
    kind: str
    prompt: str
    expected: str
    answer: str
    correct: bool


class Quality(TypedDict):
    correct: int
    total: int
    answers: list[Answer]


class Report(TypedDict):
    schema_version: int
    target: str
    model: str
    plan: dict[str, Any]
    started: str
    decode: Decode
    load: dict[str, Load]  # by concurrency, as a string
    quality: Quality
    running_usd_per_hour: float | None
    usd_per_mtok: float | None
    server: ServerCheck | None  # the whole run against /metrics; None where the server has none


# --- two runs side by side -----------------------------------------------------------------------------


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Side by side, with ratios B/A and how many answers are byte-identical."""
    try:
        return _compare(a, b)
    except (KeyError, TypeError, IndexError) as err:
        raise TargetError(f"a report lacks {err}: both files must come from "
                          "`gemma4-t4 bench run -s STACK --out FILE`") from None


# Latency rows of the comparison: (label, load key, percentile). Reports of schema 1 have none.
LATENCY_ROWS = (("TTFT p50 ms", "ttft_s", "p50"), ("TTFT p99 ms", "ttft_s", "p99"), ("ITL p50 ms", "itl_s", "p50"),
                ("ITL p99 ms", "itl_s", "p99"), ("E2E p50 ms", "e2e_s", "p50"), ("E2E p99 ms", "e2e_s", "p99"))


def _ms(load: dict[str, Any], key: str, cut: str) -> float | None:
    block = load.get(key)
    return None if not block else block[cut] * 1000


def _compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    def row(name: str, va: float | None, vb: float | None) -> dict[str, Any]:
        return {"metric": name, "a": va, "b": vb, "ratio_b_a": None if not va or vb is None else round(vb / va, 2)}

    rows = [row("decode tok/s", a["decode"]["tok_s"], b["decode"]["tok_s"]),
            row("fixed cost s", a["decode"]["fixed_cost_s"], b["decode"]["fixed_cost_s"])]
    for c in (c for c in a["load"] if c in b["load"]):
        la, lb = a["load"][c], b["load"][c]
        rows.append(row(f"load c{c} tok/s", la["tok_s"], lb["tok_s"]))
        if "requests_per_s" in la and "requests_per_s" in lb:
            rows.append(row(f"load c{c} req/s", la["requests_per_s"], lb["requests_per_s"]))
            rows += [row(f"load c{c} {label}", _ms(la, key, cut), _ms(lb, key, cut))
                     for label, key, cut in LATENCY_ROWS]
    rows.append(row("correct", a["quality"]["correct"], b["quality"]["correct"]))
    rows.append(row("$/Mtok", a.get("usd_per_mtok"), b.get("usd_per_mtok")))
    # The same seeded questions in the same order: pair them up to the shorter run.
    pairs = list(zip(a["quality"]["answers"], b["quality"]["answers"], strict=False))
    identical = sum(x["answer"] == y["answer"] for x, y in pairs)
    return {"a": a["target"], "b": b["target"], "rows": rows, "identical_answers": identical, "compared": len(pairs),
            "disagreements": [{"prompt": x["prompt"], "a": x["answer"], "b": y["answer"]}
                              for x, y in pairs if x["answer"] != y["answer"]]}


REPORT_KEYS = ("target", "decode", "load", "quality")


def load_report(path: str | Path) -> dict[str, Any]:
    """A report written by `bench run --out`; a missing, unreadable or foreign file is a TargetError."""
    try:
        report = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise TargetError(f"{path}: no such file (write one with "
                          f"`gemma4-t4 bench run -s STACK --out {path}`)") from None
    except (OSError, UnicodeDecodeError) as err:
        raise TargetError(f"{path}: cannot read it ({err})") from None
    except json.JSONDecodeError as err:
        raise TargetError(f"{path}: not JSON ({err.msg} at line {err.lineno})") from None
    missing = [k for k in REPORT_KEYS if not isinstance(report, dict) or k not in report]
    if missing:
        raise TargetError(f"{path}: not a gemma4-t4 bench report (missing {', '.join(missing)})")
    return report
