"""The benchmark: its figures from streamed responses, checked against the real vLLM server's own
/metrics (counters equal, mean TTFT within the tolerance on a sequential run), its charts, the
comparison of two runs; and the pure parts (percentiles, /metrics parsing, the tolerance) on
recorded data."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import numpy
import pytest
from conftest import REPO, run

from gemma4_t4.catalog import vllm as names
from gemma4_t4.core import bench, bench_report, charts, metrics
from gemma4_t4.core.targets import HttpTarget

RECORDED_METRICS = (REPO / "tests" / "fixtures" / "vllm_metrics.txt").read_text()
PNG = b"\x89PNG\r\n\x1a\n"


def cli(*args: str):
    return run([sys.executable, "-m", "gemma4_t4", *args], cwd=REPO, env=dict(os.environ))


def _is_png(path: Path) -> bool:
    return path.is_file() and path.read_bytes()[:8] == PNG and path.stat().st_size > 10_000


def test_reduced_bench_counts_what_the_server_counts_and_charts_it(vllm_server, tmp_path):
    out, plots = tmp_path / "bench.json", tmp_path / "plots"
    result = cli("bench", "run", "--url", vllm_server, "--short", "4", "--long", "32", "--repeats", "3",
                 "--concurrency", "1,4", "--load-tokens", "24", "--load-repeats", "2", "--questions", "6",
                 "--price-per-hour", "0.736", "--out", str(out), "--plot", str(plots))
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["schema_version"] == bench_report.SCHEMA_VERSION == 3
    assert report["decode"]["tok_s"] > 0 and len(report["decode"]["walls_s"]["32"]) == 3
    for concurrency, load in report["load"].items():
        assert len(load["batches"]) == 2
        for batch in load["batches"]:
            assert len(batch["requests"]) == int(concurrency)
            assert batch["completion_tokens"] == int(concurrency) * 24
            # The server's own counter grew by exactly what the bench counted, batch by batch.
            assert batch["metrics_generation_tokens"] == batch["completion_tokens"]
            assert batch["requests_per_s"] == pytest.approx(int(concurrency) / batch["wall_s"])
            for request in batch["requests"]:
                assert 0 < request["ttft_s"] <= request["last_token_s"] <= request["e2e_s"] <= batch["wall_s"]
                assert request["completion_tokens"] == 24 and request["chunks"] >= 2
        for key in ("ttft_s", "itl_s", "e2e_s", "tpot_s"):
            cuts = load[key]
            assert 0 <= cuts["p50"] <= cuts["p90"] <= cuts["p99"], (concurrency, key, cuts)
        every = [r for b in load["batches"] for r in b["requests"]]
        assert load["ttft_s"]["mean"] == pytest.approx(sum(r["ttft_s"] for r in every) / len(every))
        assert load["e2e_s"]["p99"] <= max(r["e2e_s"] for r in every)
        # Every window's requests and tokens equal the server's counters.
        check = load["server"]
        assert check["counts_equal"], check
        assert check["server"]["requests"] == 2 * int(concurrency)
        assert check["server"]["generation_tokens"] == 2 * int(concurrency) * 24
        assert check["server"]["ttft_mean_s"] > 0 and check["server"]["itl_mean_s"] > 0
    whole = report["server"]
    assert whole["counts_equal"] and whole["bench"]["requests"] == 6 + 2 + 8 + 6, whole
    assert whole["bench"]["prompt_tokens"] == whole["server"]["prompt_tokens"] > 0
    assert report["quality"]["total"] == 6 and len(report["quality"]["answers"]) == 6
    assert report["usd_per_mtok"] == pytest.approx(0.736 / (report["load"]["4"]["tok_s"] * 3600) * 1e6)

    assert "TTFT p99" in result.stdout and "checked against the server's /metrics" in result.stdout
    # Not a terminal: one plain line per finished phase, not one per request.
    assert "load c=4: 8/8 done" in result.stderr and "quality: 6/6 done" in result.stderr
    assert "load c=4: 1/8" not in result.stderr
    assert _is_png(plots / "throughput.png") and _is_png(plots / "latency.png")

    compared = cli("bench", "compare", str(out), str(out), "--plot", str(plots), "--json")
    assert compared.returncode == 0, compared.stderr
    rows = {row["metric"]: row for row in json.loads(compared.stdout)["rows"]}
    assert rows["load c4 TTFT p99 ms"]["a"] == pytest.approx(report["load"]["4"]["ttft_s"]["p99"] * 1000)
    assert rows["load c1 req/s"]["ratio_b_a"] == 1.0
    assert _is_png(plots / "compare-throughput.png") and _is_png(plots / "compare-latency.png")


def test_sequential_run_ttft_is_checked_against_the_servers_histogram(vllm_server, tmp_path, capsys):
    """Over a whole run at concurrency 1 the bench's mean TTFT is compared with vLLM's histogram
    sum/count, and the report says whether they agree within 10 % (or 5 ms). How close they come is
    a figure of the machine, not a property of the code: the client's clock also holds the HTTP front
    end, which on 2 busy cores is tens of ms (measured here: 8 vs 59 ms while another job loaded the
    machine; 7.9 vs 10.4 ms on a quiet one). So the test holds what must be true on any machine: the
    counts equal, the client's interval contains the server's, and the verdict matches the numbers;
    the figures are printed."""
    out = tmp_path / "sequential.json"
    result = cli("bench", "run", "--url", vllm_server, "--short", "4", "--long", "24", "--repeats", "4",
                 "--concurrency", "1", "--load-tokens", "16", "--load-repeats", "4", "--questions", "8",
                 "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    whole = json.loads(out.read_text())["server"]
    bench_ttft, server_ttft = whole["bench"]["ttft_mean_s"], whole["server"]["ttft_mean_s"]
    assert whole["counts_equal"] and whole["server"]["requests"] == 8 + 4 + 8
    assert bench_ttft >= 0.9 * server_ttft, "the client's clock starts before and stops after the server's"
    assert whole["ttft_within_tolerance"] == (abs(bench_ttft - server_ttft) <= max(0.10 * server_ttft, 0.005))
    # The client's own part is out of the figure, and small: building the request, taking the pooled connection.
    client = whole["bench"]["client_mean_s"]
    assert whole["server"]["client_mean_s"] is None and 0 < client < 0.005, client
    # Both means side by side in the one run's output, with their difference and the client's own time.
    table = result.stdout[result.stdout.index("checked against the server's /metrics"):]
    rows = [[cell.strip() for cell in row.split("│")[1:-1]] for row in table.splitlines() if row.count("│") > 2]
    at = next(i for i, row in enumerate(rows) if row[0] == "TTFT mean ms")
    shown = {row[0]: row[1:] for row in rows[at:at + 5]}  # the TTFT section: the run's column is the last
    assert shown["TTFT mean ms"][-1] == _ms(bench_ttft) and shown["server's"][-1] == _ms(server_ttft), shown
    assert shown["client, before sending"][-1] == _ms(client), shown
    headers = whole["bench"]["headers_mean_s"]
    assert 0 < headers < bench_ttft and shown["sent → response headers"][-1] == _ms(headers), shown
    with capsys.disabled():
        print(f"\n[bench] c=1 mean TTFT: bench {bench_ttft * 1000:.1f} ms, vLLM histogram {server_ttft * 1000:.1f} ms, "
              f"sent to response headers {headers * 1000:.1f} ms, the client before sending {client * 1000:.2f} ms")


def _ms(seconds: float) -> str:
    from gemma4_t4.cli.bench import _ms as shown

    return shown(seconds)


class _SlowToSend:
    """A target whose request leaves LAG s after the bench asks (a client busy building it, a tunnel's new
    connection), and whose server answers 10 ms after it arrives."""

    label, cloud = "slow-to-send", ""

    def __init__(self, lag: float):
        self.lag = lag

    def chat_stream(self, body, on_wire=None):
        time.sleep(self.lag)
        if on_wire is not None:
            on_wire("sent")
        time.sleep(0.010)
        yield {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}
        yield {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}

    def metrics(self):
        return None


def test_latencies_start_as_the_request_leaves_and_the_clients_own_time_is_kept_apart():
    call = bench.Bench(_SlowToSend(0.2), "m", bench.BenchPlan())._stream("hi", 1, True)
    assert 0.010 <= call.timing["ttft_s"] < 0.1 and call.timing["e2e_s"] < 0.1, call.timing
    assert call.timing["client_s"] >= 0.2 and call.timing["headers_s"] is None  # this target does not say


def test_the_http_target_says_when_its_request_leaves_and_its_answer_comes(tmp_path):
    """"sent" once, after the connection is made and before the server has the request; "answered" once, after."""
    import http.server
    import threading

    received: list[float] = []

    class Sse(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            received.append(time.perf_counter())
            self.rfile.read(int(self.headers["Content-Length"]))
            body = (b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
                    b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}\n\ndata: [DONE]\n\n')
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    target = HttpTarget(f"http://127.0.0.1:{server.server_address[1]}")
    try:
        for _ in (1, 2):  # a new connection, then the pooled one
            said: list[tuple[str, float]] = []
            chunks = list(target.chat_stream({"model": "m", "messages": []},
                                             on_wire=lambda event, said=said: said.append((event, time.perf_counter()))))
            assert [event for event, _ in said] == ["sent", "answered"] and len(chunks) == 2
            assert said[0][1] <= received[-1] <= said[1][1]
    finally:
        target.close()
        server.shutdown()


# --- the pure parts, on recorded data -------------------------------------------------------------------


def test_percentiles_interpolate_as_numpy_and_vllm_bench_do():
    data = [0.031, 0.004, 0.52, 0.12, 0.07, 0.009, 0.3, 0.011, 0.25, 0.05, 0.8]
    cuts = bench.percentiles(data)
    for cut in (50, 90, 99):
        assert cuts[f"p{cut}"] == pytest.approx(float(numpy.percentile(data, cut)))
    assert cuts["mean"] == pytest.approx(float(numpy.mean(data)))
    assert bench.percentiles([0.2]) == {"mean": 0.2, "p50": 0.2, "p90": 0.2, "p99": 0.2}
    assert bench.percentiles([]) is None


def test_metrics_snapshot_sums_label_sets_and_skips_buckets():
    snapshot = metrics.Snapshot.parse(RECORDED_METRICS)
    assert snapshot.requests == 174  # request_success_total over its five finish reasons
    assert snapshot.get(names.GENERATION_TOKENS) == 5664 and snapshot.get(names.PROMPT_TOKENS) == 11084
    assert snapshot.get(f"{names.TTFT_HISTOGRAM}_count") == 174
    assert not any(name.endswith(("_bucket", "_created")) for name in snapshot.values)
    empty = metrics.Snapshot({})
    window = metrics.window(empty, snapshot)
    assert window.requests == 174 and window.generation_tokens == 5664
    assert window.ttft_mean_s == pytest.approx(2.3128912448883057 / 174)
    assert window.itl_mean_s == pytest.approx(13.636135484004171 / 5490)
    assert metrics.window(snapshot, snapshot).ttft_mean_s is None  # nothing observed: no mean


def _timing(ttft: float, tokens: int = 9, prompt: int = 5) -> bench_report.RequestTiming:
    return bench_report.RequestTiming(ttft_s=ttft, last_token_s=ttft + 0.008 * (tokens - 1), e2e_s=ttft + 0.1, chunks=tokens,
                               prompt_tokens=prompt, completion_tokens=tokens, client_s=0.0003,
                               headers_s=None)


def _window(ttft: float, requests: int = 2, tokens: int = 18, prompt: int = 10) -> metrics.Window:
    return metrics.Window(requests=requests, prompt_tokens=prompt, generation_tokens=tokens, ttft_mean_s=ttft,
                          itl_mean_s=0.008, e2e_mean_s=0.11)


@pytest.mark.parametrize(("bench_ttft", "server_ttft", "within"), [
    (0.104, 0.100, True),    # 4 % apart
    (0.111, 0.100, False),   # 11 % apart, and more than 5 ms
    (0.0149, 0.010, True),   # 49 % apart but within 5 ms
    (0.0151, 0.010, False),  # more than 5 ms and more than 10 %
    (0.160, 0.150, True),    # 10 ms is within 10 % of 150 ms
])
def test_ttft_tolerance_is_ten_percent_or_five_ms_whichever_is_larger(bench_ttft, server_ttft, within):
    check = bench.server_check([_timing(bench_ttft), _timing(bench_ttft)], _window(server_ttft))
    assert check["ttft_within_tolerance"] is within
    assert check["counts_equal"]
    assert check["bench"]["itl_mean_s"] == pytest.approx(0.008)  # per token: (last - first) / (tokens - 1)


def test_a_token_the_server_did_not_count_is_a_mismatch():
    check = bench.server_check([_timing(0.1), _timing(0.1)], _window(0.1, tokens=17))
    assert not check["counts_equal"]


def _report(target: str, scale: float) -> dict:
    def load(c: int) -> dict:
        cuts = {key: {"mean": scale * c * base, "p50": scale * c * base, "p90": 2 * scale * c * base,
                      "p99": 3 * scale * c * base} for key, base in (("ttft_s", 0.01), ("itl_s", 0.002),
                                                                      ("e2e_s", 0.2), ("tpot_s", 0.003))}
        return {"tok_s": 100.0 * c / scale, "requests_per_s": 2.0 * c / scale, **cuts}

    return {"target": target, "load": {str(c): load(c) for c in (1, 4, 16)}}


def test_charts_plot_the_reports_numbers():
    a, b = _report("A", 1.0), _report("B", 2.0)
    tokens, requests = charts.throughput([("a", a), ("b", b)]).axes
    assert list(tokens.lines[0].get_xdata()) == [1, 4, 16]
    assert list(tokens.lines[1].get_ydata()) == [b["load"][c]["tok_s"] for c in ("1", "4", "16")]
    assert list(requests.lines[0].get_ydata()) == [a["load"][c]["requests_per_s"] for c in ("1", "4", "16")]
    ttft = charts.latency([("a", a)]).axes[0]
    assert [line.get_label() for line in ttft.lines] == ["p50", "p90", "p99"]
    assert list(ttft.lines[2].get_ydata()) == pytest.approx([a["load"][c]["ttft_s"]["p99"] * 1000
                                                             for c in ("1", "4", "16")])
    ab = charts.latency([("a", a), ("b", b)]).axes[1]  # ITL: p50 and p99 of each run
    assert [line.get_label() for line in ab.lines] == ["a p50", "a p99", "b p50", "b p99"]


def test_a_schema_1_report_gets_no_latency_chart(tmp_path):
    old = {"target": "old", "load": {"1": {"tok_s": 50.0}, "16": {"tok_s": 200.0}}}
    written = charts.plot_run(old, tmp_path)
    assert written == [tmp_path / "throughput.png"] and _is_png(written[0])


def test_compare_gives_ratios_latency_rows_and_disagreements():
    def report(decode, answers, scale):
        return {"target": "x", "decode": {"tok_s": decode, "fixed_cost_s": 0.5},
                "load": {"16": _report("x", scale)["load"]["16"]},
                "quality": {"correct": 1, "answers": [{"prompt": str(i), "answer": a} for i, a in enumerate(answers)]},
                "usd_per_mtok": 1.0}

    combined = bench_report.compare(report(100.0, ["1", "2"], 1.0), report(141.7, ["1", "3"], 2.0))
    rows = {r["metric"]: r for r in combined["rows"]}
    assert rows["decode tok/s"]["ratio_b_a"] == 1.42
    assert rows["load c16 TTFT p50 ms"]["a"] == pytest.approx(160.0) and rows["load c16 TTFT p50 ms"]["ratio_b_a"] == 2.0
    assert rows["load c16 req/s"]["ratio_b_a"] == 0.5
    assert combined["identical_answers"] == 1 and combined["disagreements"][0]["b"] == "3"
    # A schema-1 report has no latencies: the rows it cannot fill are left out, not failed.
    old = report(100.0, ["1"], 1.0)
    old["load"]["16"] = {"tok_s": 1600.0}
    assert "load c16 TTFT p50 ms" not in {r["metric"] for r in bench_report.compare(old, old)["rows"]}


def test_bench_compare_refuses_a_missing_or_foreign_file_without_a_traceback(tmp_path):
    missing = cli("bench", "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert missing.returncode == 2 and "no such file" in missing.stderr and "Traceback" not in missing.stderr
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "other.json").write_text('{"hello": 1}')
    for name, why in (("bad.json", "not JSON"), ("other.json", "not a gemma4-t4 bench report")):
        result = cli("bench", "compare", str(tmp_path / name), str(tmp_path / name))
        assert result.returncode == 2 and why in result.stderr and "Traceback" not in result.stderr


def test_questions_are_deterministic_and_scored_by_regex():
    first, second = bench.questions(), bench.questions()
    assert first == second and len(first) == 40
    assert [q["kind"] for q in first].count("capital") == 10
    product = first[0]
    assert bench.is_correct(product, f"The answer is {int(product['expected']):,}.")
    assert not bench.is_correct(product, f"{product['expected']}0")
    assert bench.is_correct({"kind": "capital", "expected": "Canberra", "prompt": ""}, "canberra")


def test_the_docs_document_every_field_of_the_report():
    """docs/benchmark.md "The benchmark's JSON" names every key the report's types declare, so the
    schema documented is the schema written."""
    from dataclasses import fields
    from typing import get_type_hints

    page = (REPO / "docs" / "benchmark.md").read_text()
    section = page.split("## The benchmark's JSON", 1)[1].split("\n## ", 1)[0]
    assert f"(schema {bench_report.SCHEMA_VERSION})" in section.splitlines()[0]
    documented = {word for span in re.findall(r"`([^`]+)`", section) for word in re.findall(r"[a-z_][a-z_0-9]*", span)}
    types = (bench_report.Report, bench_report.Decode, bench_report.Load, bench_report.Batch, bench_report.RequestTiming, bench_report.Percentiles,
             bench_report.ServerCheck, bench_report.Figures, bench_report.Quality, bench_report.Answer)
    declared = {key for kind in types for key in get_type_hints(kind)} | {f.name for f in fields(bench.BenchPlan)}
    assert declared - documented == set()


class _ClockedServer:
    """A server that answers each streamed request in vLLM's chunk shape with exactly max_tokens tokens (as vLLM does
    under ignore_eos), each request taking CLOCK 1000 s."""

    label, cloud = "clocked", ""

    def __init__(self, clock: list[float]):
        self.clock, self.requests = clock, 0

    def chat_stream(self, body, on_wire=None):
        self.requests += 1
        self.clock[0] += 1000
        yield {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}
        yield {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": body["max_tokens"]}}

    def metrics(self):
        return None


def test_a_bench_sends_no_request_past_its_limit_so_the_idle_stop_can_fire(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(bench.time, "monotonic", lambda: clock[0])
    server = _ClockedServer(clock)
    with pytest.raises(bench.TargetError, match=r"ran past its limit of 60 min \(core.limits.BENCH_MAX_S\)"):
        bench.Bench(server, "m", bench.BenchPlan()).run(None)
    assert server.requests == 4, "requests started at 0, 1000, 2000 and 3000 s; none at 4000 s, past 3600"
