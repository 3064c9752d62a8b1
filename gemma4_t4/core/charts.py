"""PNG charts of bench reports (matplotlib, no display needed): throughput and latency against
concurrency for one run, and the same two for an A/B pair. Each chart is built as a Figure first
(so what it plots can be checked), then written.

A report of schema 1 has no latencies: its latency chart is left out, never drawn empty.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

LATENCIES = (("ttft_s", "time to first token"), ("itl_s", "inter-token latency"), ("e2e_s", "end-to-end latency"))
CUTS = ("p50", "p90", "p99")


def _concurrencies(report: dict[str, Any]) -> list[int]:
    return sorted(int(c) for c in report["load"])


def _series(report: dict[str, Any], pick) -> tuple[list[int], list[float]]:
    """(concurrency, value) for every concurrency where ``pick(load)`` has a value."""
    points = [(c, pick(report["load"][str(c)])) for c in _concurrencies(report)]
    kept = [(c, v) for c, v in points if v is not None]
    return [c for c, _ in kept], [v for _, v in kept]


def _latency_ms(key: str, cut: str):
    return lambda load: None if not load.get(key) else load[key][cut] * 1000


def _has_latency(report: dict[str, Any]) -> bool:
    return all("ttft_s" in load for load in report["load"].values())


def _axes_for_concurrency(ax, concurrencies: list[int], ylabel: str, title: str) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(concurrencies, [str(c) for c in concurrencies])
    ax.minorticks_off()
    ax.set_xlabel("concurrent requests")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)


def _figure(columns: int, title: str) -> Figure:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.2 * columns, 4.2), layout="constrained")
    fig.suptitle(title)
    return fig


def throughput(runs: list[tuple[str, dict[str, Any]]]) -> Figure:
    """Output tok/s and requests/s against concurrency, one line per run."""
    fig = _figure(2, "throughput")
    tokens, requests = fig.subplots(1, 2)
    for label, report in runs:
        tokens.plot(*_series(report, lambda load: load["tok_s"]), marker="o", label=label)
        requests.plot(*_series(report, lambda load: load.get("requests_per_s")), marker="o", label=label)
    for ax, unit, what in ((tokens, "output tokens/s", "output tokens"), (requests, "requests/s", "requests")):
        _axes_for_concurrency(ax, _concurrencies(runs[0][1]), unit, what)
        ax.set_ylim(bottom=0)
        ax.legend()
    return fig


def latency(runs: list[tuple[str, dict[str, Any]]]) -> Figure:
    """TTFT, ITL and E2E against concurrency: p50/p90/p99 of one run, or p50 and p99 of each of two."""
    from matplotlib.ticker import LogFormatter

    fig = _figure(3, "latency")
    cuts = CUTS if len(runs) == 1 else ("p50", "p99")
    for ax, (key, what) in zip(fig.subplots(1, 3), LATENCIES, strict=True):
        for label, report in runs:
            for cut in cuts:
                name = cut if len(runs) == 1 else f"{label} {cut}"
                ax.plot(*_series(report, _latency_ms(key, cut)), marker="o", label=name,
                        linestyle="-" if cut == "p50" else "--")
        _axes_for_concurrency(ax, _concurrencies(runs[0][1]), "ms (log scale)", what)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(LogFormatter())  # 300, not 3 x 10^2
        ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False))
        ax.legend(fontsize="small")
    return fig


RUN_CHARTS = ("throughput.png", "latency.png")
COMPARE_CHARTS = ("compare-throughput.png", "compare-latency.png")


def write(fig: Figure, path: Path) -> Path:
    """The chart written beside PATH, then renamed over it: a PATH that is a symlink is replaced, never followed."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    fig.savefig(partial, dpi=110, format="png")
    os.replace(partial, path)
    return path


def plot_run(report: dict[str, Any], directory: Path) -> list[Path]:
    """throughput.png and latency.png for one run; the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    runs = [(report["target"], report)]
    written = [write(throughput(runs), directory / RUN_CHARTS[0])]
    if _has_latency(report):
        written.append(write(latency(runs), directory / RUN_CHARTS[1]))
    return written


def plot_compare(a: dict[str, Any], b: dict[str, Any], directory: Path) -> list[Path]:
    """compare-throughput.png and compare-latency.png: run A against run B."""
    directory.mkdir(parents=True, exist_ok=True)
    runs = [(f"A {a['target']}", a), (f"B {b['target']}", b)]
    written = [write(throughput(runs), directory / COMPARE_CHARTS[0])]
    if _has_latency(a) and _has_latency(b):
        written.append(write(latency(runs), directory / COMPARE_CHARTS[1]))
    return written
