"""The seeds' benchmark, so figures compare with their tables.

- decode: (LONG - SHORT) / (median wall of a LONG-token answer - median wall of a SHORT-token
  answer), `ignore_eos`, REPEATS each; the fixed cost per call is what is left at zero tokens.
- load: CONCURRENCY parallel requests of LOAD_TOKENS fixed output tokens, LOAD_REPEATS batches;
  tok/s = all completion tokens / batch wall, median over batches.
- quality: 40 seeded questions (15 two-digit products, 15 a+b-c of three-digit numbers, 10
  capitals) at temperature 0, scored by regex.
- $/Mtok = price per hour / (tok/s at the highest concurrency x 3600) x 10^6.
Where the server has /metrics, each load batch also records the growth of vLLM's own
vllm:generation_tokens_total, the check on the bench's own count.
"""

from __future__ import annotations

import json
import random
import re
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, TextIO

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


def generation_tokens(metrics_text: str | None) -> float | None:
    """Sum of vllm:generation_tokens_total over its label sets."""
    if metrics_text is None:
        return None
    values = [float(line.rsplit(" ", 1)[1]) for line in metrics_text.splitlines()
              if line.startswith("vllm:generation_tokens_total")]
    return sum(values) if values else None


class Bench:
    def __init__(self, target, model: str, plan: BenchPlan, progress: TextIO = sys.stderr):
        self.target, self.model, self.plan, self.progress = target, model, plan, progress

    def _say(self, text: str) -> None:
        print(text, file=self.progress, flush=True)

    def _timed_chat(self, prompt: str, max_tokens: int, ignore_eos: bool, temperature: float = 0.0) -> dict[str, Any]:
        body = {"model": self.model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
                "temperature": temperature, "ignore_eos": ignore_eos}
        start = time.perf_counter()
        reply = self.target.chat(body)
        wall = time.perf_counter() - start
        return {"wall_s": wall, "completion_tokens": reply["usage"]["completion_tokens"],
                "text": reply["choices"][0]["message"]["content"] or ""}

    def decode(self) -> dict[str, Any]:
        walls: dict[int, list[float]] = {}
        for n in (self.plan.short, self.plan.long):
            walls[n] = []
            for i in range(self.plan.repeats):
                call = self._timed_chat(STORY_PROMPT, n, ignore_eos=True)
                if call["completion_tokens"] != n:
                    raise RuntimeError(f"asked for {n} tokens with ignore_eos, got {call['completion_tokens']}")
                walls[n].append(call["wall_s"])
                self._say(f"decode {n:4d} tokens  {i + 1}/{self.plan.repeats}  {call['wall_s']:.3f}s")
        short, long = statistics.median(walls[self.plan.short]), statistics.median(walls[self.plan.long])
        tokens = self.plan.long - self.plan.short
        return {"tok_s": tokens / (long - short), "fixed_cost_s": short - self.plan.short * (long - short) / tokens,
                "walls_s": {str(k): v for k, v in walls.items()}}

    def load(self) -> dict[str, Any]:
        result = {}
        for concurrency in self.plan.concurrency:
            batches = []
            for i in range(self.plan.load_repeats):
                before = generation_tokens(self.target.metrics())
                start = time.perf_counter()
                with ThreadPoolExecutor(max_workers=concurrency) as pool:
                    calls = list(pool.map(lambda _: self._timed_chat(STORY_PROMPT, self.plan.load_tokens, True),
                                          range(concurrency)))
                wall = time.perf_counter() - start
                after = generation_tokens(self.target.metrics())
                tokens = sum(c["completion_tokens"] for c in calls)
                batch = {"wall_s": wall, "completion_tokens": tokens, "tok_s": tokens / wall,
                         "request_walls_s": [c["wall_s"] for c in calls],
                         "metrics_generation_tokens": None if before is None or after is None else after - before}
                batches.append(batch)
                self._say(f"load c={concurrency:<3d} batch {i + 1}/{self.plan.load_repeats}  {tokens} tokens "
                          f"in {wall:.3f}s = {batch['tok_s']:.1f} tok/s")
                time.sleep(self.plan.pause_s)
            result[str(concurrency)] = {"tok_s": statistics.median(b["tok_s"] for b in batches), "batches": batches}
        return result

    def quality(self) -> dict[str, Any]:
        answers = []
        for i, q in enumerate(questions(self.plan.questions)):
            call = self._timed_chat(q["prompt"], 64, ignore_eos=False)
            answers.append({**q, "answer": call["text"], "correct": is_correct(q, call["text"])})
            self._say(f"quality {i + 1}/{self.plan.questions}  {'ok' if answers[-1]['correct'] else 'wrong'}")
        return {"correct": sum(a["correct"] for a in answers), "total": len(answers), "answers": answers}

    def run(self, price_per_hour: float | None) -> dict[str, Any]:
        report = {"target": self.target.label, "model": self.model, "plan": asdict(self.plan),
                  "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        report["decode"] = self.decode()
        report["load"] = self.load()
        report["quality"] = self.quality()
        top = report["load"][str(max(self.plan.concurrency))]["tok_s"]
        report["price_per_hour_usd"] = price_per_hour
        report["usd_per_mtok"] = None if price_per_hour is None else price_per_hour / (top * 3600) * 1e6
        return report


def format_report(report: dict[str, Any]) -> str:
    lines = [f"{report['target']}  model {report['model']}",
             f"decode        {report['decode']['tok_s']:8.1f} tok/s   fixed cost per call "
             f"{report['decode']['fixed_cost_s']:.3f} s"]
    for concurrency, load in report["load"].items():
        lines.append(f"load c={concurrency:<5} {load['tok_s']:8.1f} tok/s")
    quality = report["quality"]
    lines.append(f"quality       {quality['correct']}/{quality['total']} correct")
    if report["usd_per_mtok"] is not None:
        lines.append(f"cost          ${report['usd_per_mtok']:.3f} per million output tokens "
                     f"at ${report['price_per_hour_usd']}/h")
    return "\n".join(lines)


def combine(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Side by side, with ratios B/A and how many answers are byte-identical."""
    def row(name: str, va: float | None, vb: float | None) -> dict[str, Any]:
        return {"metric": name, "a": va, "b": vb, "ratio_b_a": None if not va or vb is None else round(vb / va, 2)}

    rows = [row("decode tok/s", a["decode"]["tok_s"], b["decode"]["tok_s"]),
            row("fixed cost s", a["decode"]["fixed_cost_s"], b["decode"]["fixed_cost_s"])]
    rows += [row(f"load c{c} tok/s", a["load"][c]["tok_s"], b["load"][c]["tok_s"])
             for c in a["load"] if c in b["load"]]
    rows.append(row("correct", a["quality"]["correct"], b["quality"]["correct"]))
    rows.append(row("$/Mtok", a.get("usd_per_mtok"), b.get("usd_per_mtok")))
    pairs = list(zip(a["quality"]["answers"], b["quality"]["answers"]))
    identical = sum(x["answer"] == y["answer"] for x, y in pairs)
    return {"a": a["target"], "b": b["target"], "rows": rows, "identical_answers": identical, "compared": len(pairs),
            "disagreements": [{"prompt": x["prompt"], "a": x["answer"], "b": y["answer"]}
                              for x, y in pairs if x["answer"] != y["answer"]]}


def format_combined(combined: dict[str, Any]) -> str:
    lines = [f"{'metric':<16}{'A':>12}{'B':>12}{'B/A':>8}    A = {combined['a']}, B = {combined['b']}"]
    for r in combined["rows"]:
        fmt = (lambda v: "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v))
        lines.append(f"{r['metric']:<16}{fmt(r['a']):>12}{fmt(r['b']):>12}{fmt(r['ratio_b_a']):>8}")
    lines.append(f"identical answers: {combined['identical_answers']}/{combined['compared']}")
    return "\n".join(lines)


def load_json(path: str) -> dict[str, Any]:
    with open(path) as f:
        return json.load(f)
