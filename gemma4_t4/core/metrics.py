"""The server's own account of a window of work: vLLM's /metrics read before and after, with
Prometheus' own text parser, and the difference of its counters and histograms."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from ..catalog import vllm


@dataclass(frozen=True)
class Snapshot:
    """Every sample of one /metrics read, summed over its label sets (engine, model, finish
    reason). Histogram buckets and `_created` timestamps are left out: only sums and counts add."""

    values: dict[str, float]

    @classmethod
    def parse(cls, text: str) -> Snapshot:
        values: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name.endswith(("_bucket", "_created")):
                    continue
                values[sample.name] = values.get(sample.name, 0.0) + sample.value
        return cls(values)

    def get(self, name: str) -> float:
        return self.values.get(name, 0.0)

    @property
    def requests(self) -> int:
        """Requests the server has finished (any finish reason)."""
        return round(self.get(vllm.REQUESTS_FINISHED))


@dataclass(frozen=True)
class Window:
    """What the server counted between two snapshots; a mean is None where nothing was observed."""

    requests: int
    prompt_tokens: int
    generation_tokens: int
    ttft_mean_s: float | None
    itl_mean_s: float | None
    e2e_mean_s: float | None


def window(before: Snapshot, after: Snapshot) -> Window:
    def grew(name: str) -> float:
        return after.get(name) - before.get(name)

    def mean(histogram: str) -> float | None:
        count = grew(f"{histogram}_count")
        return grew(f"{histogram}_sum") / count if count > 0 else None

    return Window(requests=after.requests - before.requests, prompt_tokens=round(grew(vllm.PROMPT_TOKENS)),
                  generation_tokens=round(grew(vllm.GENERATION_TOKENS)), ttft_mean_s=mean(vllm.TTFT_HISTOGRAM),
                  itl_mean_s=mean(vllm.ITL_HISTOGRAM), e2e_mean_s=mean(vllm.E2E_HISTOGRAM))
