"""The reference T4 benchmark, so figures compare with their tables, plus the latencies serving engineers
read. Every request is streamed and timed from the moment it is sent; one warm-up request goes first and is counted
nowhere (`vllm bench serve`'s "initial single prompt test run").

- decode: (LONG - SHORT) / (median wall of a LONG-token answer - median wall of a SHORT-token
  answer), `ignore_eos`, REPEATS each; the fixed cost per call is what is left at zero tokens.
- load: CONCURRENCY parallel requests of LOAD_TOKENS fixed output tokens, LOAD_REPEATS batches;
  tok/s = all completion tokens / batch wall and requests/s = requests / batch wall, median over
  batches. Over every request at that concurrency, mean, p50, p90 and p99 of: TTFT (sent to the
  first chunk), ITL (the gap between two chunks that carry text, as `vllm bench serve` counts
  it), E2E (sent to the end of the stream) and TPOT ((E2E - TTFT) / (tokens - 1)).
- quality: 40 seeded questions (15 two-digit products, 15 a+b-c of three-digit numbers, 10
  capitals) at temperature 0, scored by regex.
- $/Mtok = price per hour / (tok/s at the highest concurrency x 3600) x 10^6.
Where the server has /metrics, vLLM's own counters and histograms are read before and after each
concurrency and the whole run: requests, prompt and generation tokens must equal the bench's
count, and the bench's mean TTFT must be within 10 % or 5 ms of the histogram's sum / count (the
client also pays for HTTP and SSE; vLLM starts its clock once the chat template is rendered).
Another client on the same server spoils that check, never the bench's own figures.
"""

from __future__ import annotations

import random
import re
import statistics
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass

from ..catalog import vllm as vllm_metrics
from . import limits, metrics
from .bench_report import (
    SCHEMA_VERSION,
    Answer,
    Batch,
    Decode,
    Figures,
    Load,
    Percentiles,
    Quality,
    Report,
    RequestTiming,
    ServerCheck,
)
from .targets import Target, TargetError

# on_step(phase, done, total): "decode", "load c=4", "quality"; done counts requests of that phase.
StepCallback = Callable[[str, int, int], None]
# The bench's mean TTFT against the server's histogram: within 10 %, or 5 ms, whichever is larger.
TTFT_TOLERANCE = 0.10
TTFT_FLOOR_S = 0.005
# vLLM records a request's metrics just after it sends the last chunk: how long to wait for them.
METRICS_SETTLE_S = 5.0

STORY_PROMPT = ("Write a long, detailed story about a lighthouse keeper who finds a message in a bottle. "
                "Describe the sea, the weather and every room of the lighthouse.")
QUALITY_SEED = 20260925
CAPITALS = [("France", "Paris"), ("Japan", "Tokyo"), ("Canada", "Ottawa"), ("Australia", "Canberra"),
            ("Brazil", "Brasilia"), ("Kenya", "Nairobi"), ("Norway", "Oslo"), ("Egypt", "Cairo"),
            ("Peru", "Lima"), ("Vietnam", "Hanoi"), ("Poland", "Warsaw"), ("Chile", "Santiago"),
            ("Thailand", "Bangkok"), ("Portugal", "Lisbon"), ("Argentina", "Buenos Aires"), ("Ireland", "Dublin")]


@dataclass(frozen=True)
class BenchPlan:
    short: int = 16
    long: int = 512
    repeats: int = 5
    concurrency: tuple[int, ...] = (1, 4, 16)
    load_tokens: int = 256
    load_repeats: int = 2
    questions: int = 40
    pause_s: float = 0.0


# --- measuring -------------------------------------------------------------------------------------


def questions(limit: int = 40) -> list[dict[str, str]]:
    """The 40 deterministic questions, in a fixed order (the first ``limit`` of them)."""
    rng = random.Random(QUALITY_SEED)
    items = []
    for _ in range(15):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        items.append({"kind": "product", "prompt": f"What is {a} * {b}? Answer with the number only.",
                      "expected": str(a * b)})
    for _ in range(15):
        a, b, c = rng.randint(100, 999), rng.randint(100, 999), rng.randint(100, 999)
        items.append({"kind": "arithmetic", "prompt": f"What is {a} + {b} - {c}? Answer with the number only.",
                      "expected": str(a + b - c)})
    for country, capital in rng.sample(CAPITALS, 10):
        items.append({"kind": "capital", "prompt": f"What is the capital of {country}? Answer with the city only.",
                      "expected": capital})
    return items[:limit]


def is_correct(question: dict[str, str], answer: str) -> bool:
    if question["kind"] == "capital":
        return re.search(rf"\b{re.escape(question['expected'])}\b", answer, re.IGNORECASE) is not None
    return re.search(rf"(?<![\d-]){re.escape(question['expected'])}(?!\d)", answer.replace(",", "")) is not None


def percentiles(values: Iterable[float]) -> Percentiles | None:
    """Mean and p50/p90/p99, interpolated linearly between order statistics (numpy's default,
    which `vllm bench serve` uses); None for no values."""
    data = sorted(values)
    if not data:
        return None
    if len(data) == 1:
        return Percentiles(mean=data[0], p50=data[0], p90=data[0], p99=data[0])
    cuts = statistics.quantiles(data, n=100, method="inclusive")
    return Percentiles(mean=statistics.fmean(data), p50=cuts[49], p90=cuts[89], p99=cuts[98])


@dataclass
class _Stream:
    """One streamed request: the report's timing plus the gaps between its text chunks."""

    timing: RequestTiming
    text: str
    gaps_s: list[float]


def figures(timings: list[RequestTiming]) -> Figures:
    """What the bench sent and saw, in the server's terms."""
    decoding = [t for t in timings if t["completion_tokens"] >= 2]
    decode_tokens = sum(t["completion_tokens"] - 1 for t in decoding)
    heard = [h for t in timings if (h := t.get("headers_s")) is not None]
    return Figures(
        requests=len(timings), prompt_tokens=sum(t["prompt_tokens"] for t in timings),
        generation_tokens=sum(t["completion_tokens"] for t in timings),
        ttft_mean_s=statistics.fmean(t["ttft_s"] for t in timings) if timings else None,
        itl_mean_s=sum(t["last_token_s"] - t["ttft_s"] for t in decoding) / decode_tokens if decode_tokens else None,
        e2e_mean_s=statistics.fmean(t["e2e_s"] for t in timings) if timings else None,
        client_mean_s=statistics.fmean(t.get("client_s", 0.0) for t in timings) if timings else None,
        headers_mean_s=statistics.fmean(heard) if heard else None)


def server_check(timings: list[RequestTiming], window: metrics.Window) -> ServerCheck:
    bench = figures(timings)
    server = Figures(requests=window.requests, prompt_tokens=window.prompt_tokens,
                     generation_tokens=window.generation_tokens, ttft_mean_s=window.ttft_mean_s,
                     itl_mean_s=window.itl_mean_s, e2e_mean_s=window.e2e_mean_s, client_mean_s=None,
                     headers_mean_s=None)
    counts_equal = (bench["requests"] == server["requests"] and bench["prompt_tokens"] == server["prompt_tokens"]
                    and bench["generation_tokens"] == server["generation_tokens"])
    ttft_ok = False
    if bench["ttft_mean_s"] is not None and server["ttft_mean_s"] is not None:
        allowed = max(TTFT_TOLERANCE * server["ttft_mean_s"], TTFT_FLOOR_S)
        ttft_ok = abs(bench["ttft_mean_s"] - server["ttft_mean_s"]) <= allowed
    return ServerCheck(bench=bench, server=server, counts_equal=counts_equal, ttft_within_tolerance=ttft_ok)


class Bench:
    def __init__(self, target: Target, model: str, plan: BenchPlan, on_step: StepCallback | None = None):
        self.target, self.model, self.plan = target, model, plan
        self.on_step: StepCallback = on_step or (lambda phase, done, total: None)
        self._timings: list[RequestTiming] = []  # every request of the run, for the whole-run check
        self.max_run_s = limits.BENCH_MAX_S
        self._deadline = float("inf")  # set when the run starts: no request is sent after it

    def _in_time(self) -> None:
        if time.monotonic() > self._deadline:
            raise TargetError(f"the bench ran past its limit of {self.max_run_s / 60:.0f} min "
                              "(core.limits.BENCH_MAX_S) and sent no more requests: a bench counts as use, so it must "
                              "not hold the VM awake past the idle stop; run fewer repeats, steps or tokens")

    def _stream(self, prompt: str, max_tokens: int, ignore_eos: bool, temperature: float = 0.0) -> _Stream:
        self._in_time()
        body = {"model": self.model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
                "temperature": temperature, "ignore_eos": ignore_eos}
        called = time.perf_counter()
        # When the request left and its answer's headers came: the target says (HttpTarget: on the wire).
        wire: dict[str, float] = {}

        def on_wire(said: str) -> None:
            wire.setdefault(said, time.perf_counter())

        first = last = None
        gaps, pieces, usage = [], [], None
        for chunk in self.target.chat_stream(body, on_wire=on_wire):
            start = wire.get("sent", called)
            now = time.perf_counter() - start
            choices = chunk.get("choices") or []
            if choices and first is None:
                first = now
            text = "".join((c.get("delta") or {}).get("content") or "" for c in choices)
            if text:
                if last is not None:
                    gaps.append(now - last)
                last = now
                pieces.append(text)
            usage = chunk.get("usage") or usage
        start = wire.get("sent", called)
        end = time.perf_counter() - start
        if usage is None or first is None:
            raise TargetError(f"{self.target.label}: the stream ended without {'usage' if first else 'any choice'}: "
                              "is this an OpenAI-compatible server that honours stream_options.include_usage?")
        timing = RequestTiming(ttft_s=first, last_token_s=last if last is not None else first, e2e_s=end,
                               chunks=len(pieces), prompt_tokens=usage["prompt_tokens"],
                               completion_tokens=usage["completion_tokens"], client_s=start - called,
                               headers_s=wire["answered"] - start if "answered" in wire else None)
        return _Stream(timing, "".join(pieces), gaps)

    def _read_metrics(self) -> metrics.Snapshot | None:
        text = self.target.metrics()
        return None if text is None else metrics.Snapshot.parse(text)

    def _settled(self, before: metrics.Snapshot | None, requests: int) -> metrics.Snapshot | None:
        """/metrics once the server has recorded ``requests`` more finished requests (or the last
        read after METRICS_SETTLE_S: the check then shows what it missed)."""
        if before is None:
            return None
        deadline = time.monotonic() + METRICS_SETTLE_S
        while True:
            after = self._read_metrics()
            if after is None or after.requests - before.requests >= requests or time.monotonic() > deadline:
                return after
            time.sleep(0.05)

    def _check(self, before: metrics.Snapshot | None, timings: list[RequestTiming]) -> ServerCheck | None:
        after = self._settled(before, len(timings))
        return None if before is None or after is None else server_check(timings, metrics.window(before, after))

    def _call(self, prompt: str, max_tokens: int, ignore_eos: bool) -> _Stream:
        call = self._stream(prompt, max_tokens, ignore_eos)
        self._timings.append(call.timing)
        return call

    def decode(self) -> Decode:
        walls: dict[int, list[float]] = {}
        total = 2 * self.plan.repeats
        for n in (self.plan.short, self.plan.long):
            walls[n] = []
            for _ in range(self.plan.repeats):
                call = self._call(STORY_PROMPT, n, ignore_eos=True)
                if call.timing["completion_tokens"] != n:
                    raise TargetError(f"asked for {n} tokens with ignore_eos, got {call.timing['completion_tokens']}: "
                                      "the server does not honour ignore_eos, so decode cannot be measured")
                walls[n].append(call.timing["e2e_s"])
                self.on_step("decode", sum(len(w) for w in walls.values()), total)
        short, long = statistics.median(walls[self.plan.short]), statistics.median(walls[self.plan.long])
        tokens = self.plan.long - self.plan.short
        return Decode(tok_s=tokens / (long - short), fixed_cost_s=short - self.plan.short * (long - short) / tokens,
                      walls_s={str(k): v for k, v in walls.items()})

    def _batch(self, concurrency: int, done_before: int, total: int, phase: str) -> tuple[Batch, list[_Stream]]:
        before = self._read_metrics()
        start = time.perf_counter()
        calls: list[_Stream] = []
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            futures = [pool.submit(self._stream, STORY_PROMPT, self.plan.load_tokens, True)
                       for _ in range(concurrency)]
            # Progress is reported from this thread only: front ends may bridge it to an event loop.
            for future in as_completed(futures):
                calls.append(future.result())
                self.on_step(phase, done_before + len(calls), total)
        wall = time.perf_counter() - start
        after = self._settled(before, concurrency)
        tokens = sum(c.timing["completion_tokens"] for c in calls)
        self._timings.extend(c.timing for c in calls)
        return Batch(wall_s=wall, completion_tokens=tokens, tok_s=tokens / wall, requests_per_s=concurrency / wall,
                     requests=[c.timing for c in calls],
                     metrics_generation_tokens=None if before is None or after is None else
                     after.get(vllm_metrics.GENERATION_TOKENS) - before.get(vllm_metrics.GENERATION_TOKENS)), calls

    def load(self) -> dict[str, Load]:
        result: dict[str, Load] = {}
        for concurrency in self.plan.concurrency:
            phase, total = f"load c={concurrency}", concurrency * self.plan.load_repeats
            window_start = self._read_metrics()
            batches: list[Batch] = []
            calls: list[_Stream] = []
            for i in range(self.plan.load_repeats):
                if i:
                    time.sleep(self.plan.pause_s)
                batch, batch_calls = self._batch(concurrency, i * concurrency, total, phase)
                batches.append(batch)
                calls.extend(batch_calls)
            timings = [c.timing for c in calls]
            ttft = percentiles(t["ttft_s"] for t in timings)
            e2e = percentiles(t["e2e_s"] for t in timings)
            assert ttft is not None and e2e is not None, "a batch has at least one request"
            result[str(concurrency)] = Load(
                tok_s=statistics.median(b["tok_s"] for b in batches),
                requests_per_s=statistics.median(b["requests_per_s"] for b in batches),
                ttft_s=ttft, itl_s=percentiles(gap for c in calls for gap in c.gaps_s), e2e_s=e2e,
                tpot_s=percentiles((t["e2e_s"] - t["ttft_s"]) / (t["completion_tokens"] - 1)
                                   for t in timings if t["completion_tokens"] >= 2),
                batches=batches, server=self._check(window_start, timings))
        return result

    def quality(self) -> Quality:
        answers: list[Answer] = []
        asked = questions(self.plan.questions)
        for i, q in enumerate(asked):
            call = self._call(q["prompt"], 64, ignore_eos=False)
            answers.append(Answer(kind=q["kind"], prompt=q["prompt"], expected=q["expected"], answer=call.text,
                                  correct=is_correct(q, call.text)))
            self.on_step("quality", i + 1, len(asked))
        return Quality(correct=sum(a["correct"] for a in answers), total=len(answers), answers=answers)

    def warm_up(self) -> metrics.Snapshot | None:
        """One request before the run, counted nowhere, as `vllm bench serve` sends its "initial single prompt test
        run": a fresh server's first request pays for compiling the chat template and the client's first connection
        (measured on loopback: 77 ms TTFT, then 13-15 ms). /metrics once the server has recorded it."""
        before = self._read_metrics()
        self._stream(STORY_PROMPT, self.plan.short, ignore_eos=True)
        return self._settled(before, 1)

    def run(self, price_per_hour: float | None) -> Report:
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self._timings = []
        self._deadline = time.monotonic() + self.max_run_s
        run_start = self.warm_up()
        decode, load, quality = self.decode(), self.load(), self.quality()
        top = load[str(max(self.plan.concurrency))]["tok_s"]
        return Report(schema_version=SCHEMA_VERSION, target=self.target.label, model=self.model,
                      plan=asdict(self.plan), started=started, decode=decode, load=load, quality=quality,
                      running_usd_per_hour=price_per_hour,
                      usd_per_mtok=None if price_per_hour is None else price_per_hour / (top * 3600) * 1e6,
                      server=self._check(run_start, self._timings))
