"""`gemma4-t4 mcp` driven by the MCP SDK's own client session over stdio, as an editor's assistant
drives it: the tool list with schemas and annotations, every tool that can run here against the
real vLLM CPU server, the offline plan, the recorded Compute Engine API and the SageMaker stand-in;
errors as tool errors carrying the CLI's own message; streamable HTTP on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from compute_standin import ComputeStandIn
from conftest import REPO, SERVED, free_port, run
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from sagemaker_standin import StandIn

from gemma4_t4.core import bench as core_bench
from gemma4_t4.mcp.server import CHANGES_STATE, COSTS_MONEY

pytestmark = [pytest.mark.cli, pytest.mark.standin]

TOOLS = {"plan", "cost", "zones", "preflight", "fit", "status", "wait", "query", "logs", "bench", "bench_compare",
         "stop", "start"}
READ_ONLY = {"plan", "cost", "zones", "preflight", "fit", "status", "wait", "query", "logs"}
# No cloud credentials of the machine running the tests may leak into a tool call.
NO_CLOUD = {"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
            "AWS_EC2_METADATA_DISABLED": "true", "NO_GCE_CHECK": "True", "GOOGLE_APPLICATION_CREDENTIALS": "",
            "CLOUDSDK_CONFIG": "/nonexistent"}
FAKE_AWS = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_DEFAULT_REGION": "us-east-2"}


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GOOGLE_", "CLOUDSDK_"))}
    return {**base, **NO_CLOUD, "HOME": str(REPO / ".cache" / "mcp-home"), **(extra or {})}


@asynccontextmanager
async def session(*server_args: str, env: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    """The SDK's client session on `gemma4-t4 mcp` launched over stdio, as MCP clients launch it."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "gemma4_t4", "mcp", *server_args],
                                   cwd=str(REPO), env=_env(env))
    (REPO / ".cache" / "mcp-home").mkdir(parents=True, exist_ok=True)
    with (REPO / ".cache" / "mcp-server.log").open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            yield client


class Call:
    """One tool call's outcome, with the progress notifications it sent."""

    def __init__(self) -> None:
        self.progress: list[tuple[float, float | None, str | None]] = []
        self.result: Any = None

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))

    @property
    def error(self) -> str:
        assert self.result.is_error, f"expected a tool error, got {self.result.structured_content}"
        return self.result.content[0].text

    @property
    def data(self) -> dict[str, Any]:
        assert not self.result.is_error, self.result.content[0].text if self.result.content else self.result
        return self.result.structured_content


async def call(client: ClientSession, tool: str, **arguments: Any) -> Call:
    outcome = Call()
    outcome.result = await client.call_tool(tool, arguments, progress_callback=outcome.on_progress)
    return outcome


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "gemma4_t4", *args], cwd=REPO, env=_env(env))


def cli_json(*args: str) -> dict[str, Any]:
    """The CLI's --json document less its schema_version (the MCP tools' results are typed instead)."""
    document = json.loads(cli(*args).stdout)
    assert document.pop("schema_version") == 1
    return document


def cli_message(*args: str, env: dict[str, str] | None = None) -> str:
    """What the CLI says on stderr for a failing command, less its `gemma4-t4 COMMAND: ` prefix."""
    result = cli(*args, env=env)
    assert result.returncode != 0, result.stdout
    return result.stderr.strip().split(": ", 1)[1]


# --- the tool list --------------------------------------------------------------------------------------


def test_the_tool_list_types_inputs_and_marks_what_changes_state_or_costs_money():
    async def main():
        async with session() as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = anyio.run(main)
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        hints = tool.annotations
        assert hints.read_only_hint is (name in READ_ONLY), name
        if not hints.read_only_hint:
            assert hints.destructive_hint is False, f"{name}: nothing here deletes anything"
        assert tool.meta[COSTS_MONEY] is (name == "start"), name
        assert tool.meta[CHANGES_STATE] is (name not in READ_ONLY), name
        assert tool.description and tool.output_schema is not None, name
    assert tools["stop"].annotations.idempotent_hint and tools["start"].annotations.idempotent_hint
    assert tools["plan"].annotations.open_world_hint is False and tools["status"].annotations.open_world_hint
    query = tools["query"].input_schema
    assert query["required"] == ["prompt"] and query["properties"]["max_tokens"]["minimum"] == 1
    concurrency = tools["bench"].input_schema["properties"]["concurrency"]
    assert "minimum" in json.dumps(concurrency) and "min_length" not in json.dumps(concurrency)
    report = tools["bench"].output_schema
    assert {"decode", "load", "quality", "server", "schema_version"} <= set(report["properties"])
    assert "SageMaker endpoint cannot be stopped" in tools["stop"].description


# --- against the real vLLM server ---------------------------------------------------------------------


def test_tools_against_the_real_server(vllm_server, tmp_path):
    out, plots = tmp_path / "bench.json", tmp_path / "plots"

    async def main():
        async with session() as client:
            status = await call(client, "status", url=vllm_server)
            query = await call(client, "query", url=vllm_server, prompt="hello", max_tokens=12)
            waited = await call(client, "wait", url=vllm_server, interval_s=1)
            logs = await call(client, "logs", url=vllm_server)
            bench = await call(client, "bench", url=vllm_server, short=4, long=16, repeats=2, concurrency=[1, 2],
                               load_tokens=8, load_repeats=1, questions=3, price_per_hour=0.736, out=str(out),
                               plot_dir=str(plots))
            compared = await call(client, "bench_compare", a=str(out), b=str(out), plot_dir=str(plots))
            return status, query, waited, logs, bench, compared

    status, query, waited, logs, bench, compared = anyio.run(main)
    assert status.data["serving"] is True and status.data["models"] == [{"id": SERVED, "max_model_len": 256}]

    reply = query.data
    assert reply["model"] == SERVED and reply["usage"]["completion_tokens"] == 12 and reply["finish_reason"] == "length"
    # Streaming progress: every piece of text as it came, in order, counted against max_tokens.
    assert len(query.progress) >= 2 and {total for _, total, _ in query.progress} == {12}
    assert "".join(message for _, _, message in query.progress) == reply["text"]
    assert [p for p, _, _ in query.progress] == list(range(1, len(query.progress) + 1))

    assert waited.data["healthy"] is True
    assert logs.error.endswith(cli_message("logs", "--url", vllm_server))

    report = bench.data
    assert report == json.loads(out.read_text()), "the tool returns what it wrote"
    assert report["schema_version"] == core_bench.SCHEMA_VERSION and set(report["load"]) == {"1", "2"}
    assert report["server"]["counts_equal"] and report["server"]["bench"]["requests"] == 4 + 1 + 2 + 3
    assert report["load"]["2"]["ttft_s"]["p99"] >= report["load"]["2"]["ttft_s"]["p50"] > 0
    total = 4 + 1 + 2 + 3
    assert [p for p, _, _ in bench.progress] == list(range(1, total + 1))
    assert {t for _, t, _ in bench.progress} == {total} and bench.progress[-1][2] == "quality 3/3"
    assert (plots / "throughput.png").is_file() and (plots / "latency.png").is_file()

    rows = {row["metric"]: row for row in compared.data["comparison"]["rows"]}
    assert rows["decode tok/s"]["ratio_b_a"] == 1.0 and compared.data["comparison"]["identical_answers"] == 3
    assert sorted(Path(p).name for p in compared.data["charts"]) == ["compare-latency.png", "compare-throughput.png"]


def test_failures_are_tool_errors_with_the_clis_messages(vllm_server, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"

    async def main():
        async with session() as client:
            return {
                "no target": await call(client, "status"),
                "dead": await call(client, "query", url=dead, prompt="hi"),
                "not serving": await call(client, "status", url=dead),
                "wrong model": await call(client, "query", url=vllm_server, prompt="hi", model="google/gemma-4-E2B-it"),
                "timeout": await call(client, "wait", url=dead, timeout_s=1, interval_s=0.5),
                "missing report": await call(client, "bench_compare", a=str(tmp_path / "a.json"), b="b.json"),
                "refused": await call(client, "plan", stack="gce-t4", config=["gemma4-t4:dtype=bfloat16"]),
                "bad input": await call(client, "query", url=vllm_server, prompt="hi", max_tokens=0),
            }

    errors = anyio.run(main)
    assert errors["no target"].error.endswith("say where: --url URL, --stack STACK, or --endpoint NAME --region REGION")
    assert errors["dead"].error.endswith(cli_message("query", "hi", "--url", dead))
    # Not serving is an answer, as `gemma4-t4 status --json` gives it (exit 1, but a status).
    assert errors["not serving"].data == cli_json("status", "--url", dead, "--json")
    assert errors["wrong model"].error.endswith(
        cli_message("query", "hi", "--url", vllm_server, "--model", "google/gemma-4-E2B-it"))
    assert "not healthy after 1s: " + dead in errors["timeout"].error
    assert errors["missing report"].error.endswith(
        cli_message("bench", "compare", str(tmp_path / "a.json"), "b.json"))
    refused = cli_message("plan", "gce-t4", "--config", "gemma4-t4:dtype=bfloat16")
    assert refused.startswith("refused: gemma4-t4:dtype:") and errors["refused"].error.endswith(refused)
    assert "max_tokens" in errors["bad input"].error  # the input schema refuses it before any core code runs


# --- offline, and against recorded or stand-in cloud APIs -----------------------------------------------


def test_plan_and_cost_are_the_clis(tmp_path):
    async def main():
        async with session() as client:
            return (await call(client, "plan", stack="gce-t4", config=["gemma4-t4:maxModelLen=8192"]),
                    await call(client, "cost", stack="gce-t4"),
                    await call(client, "preflight", stack="gce-t4", project="my-project"),
                    await call(client, "preflight", stack="sagemaker-t4"))

    plan, cost, gce, sagemaker = anyio.run(main)
    instance = next(r for r in plan.data["resources"] if r["type"] == "gcp:compute/instance:Instance")
    assert "--max-model-len 8192" in json.dumps(instance["inputs"]["metadata"]), "the override reached the guest"
    assert plan.data["outputs"]["cost_per_hour_usd"] == cost.data["running_usd_per_hour"]
    assert cost.data == cli_json("cost", "gce-t4", "--json")
    # Preflight needs the user's cloud credentials; without them, the CLI's own message.
    assert gce.error.endswith(cli_message("preflight", "gce-t4", "--project", "my-project"))
    assert "gcloud auth application-default login" in gce.error
    assert "no AWS credentials" in sagemaker.error


def test_zones_is_the_clis():
    async def main():
        async with session() as client:
            return await call(client, "zones"), await call(client, "zones", cloud="sagemaker")

    both, sagemaker = anyio.run(main)
    assert both.data == cli_json("zones", "--json")
    assert sagemaker.data == cli_json("zones", "--cloud", "sagemaker", "--json")


def test_stop_and_start_against_recorded_compute_engine_responses():
    standin = ComputeStandIn("my-project")
    where = standin.add_vm("RUNNING")
    try:
        async def main():
            async with session("--compute-endpoint", standin.url) as client:
                return (await call(client, "stop", **where, interval_s=0.05),
                        await call(client, "stop", **where, interval_s=0.05),
                        await call(client, "start", **where, interval_s=0.05),
                        await call(client, "stop", instance="gone", zone="us-west2-b", project="my-project"),
                        await call(client, "start", stack="gce-t4", instance="both"))

        stopped, again, started, missing, both = anyio.run(main)
        missing_cli = cli_message("stop", "--instance", "gone", "--zone", "us-west2-b", "--project", "my-project",
                                  "--compute-endpoint", standin.url)
    finally:
        standin.close()
    assert stopped.data["status_after"] == "TERMINATED" and stopped.data["changed"] is True
    assert stopped.data["stopped_usd_per_month"] > 0 and len(stopped.data["disks"]) == 2
    assert stopped.progress and all(total == 600 for _, total, _ in stopped.progress)
    assert again.data["changed"] is False and again.data["notes"][0].startswith("already stopped")
    assert started.data["status_after"] == "RUNNING"
    assert missing.error.endswith(missing_cli) and "not found" in missing_cli
    assert "say which VM" in both.error
    assert sum(1 for method, path in standin.calls if method == "POST" and path.endswith("/stop")) == 1


def test_status_and_query_of_a_sagemaker_endpoint_through_the_stand_in(vllm_server):
    standin = StandIn(vllm_server, "gemma4-t4-endpoint", {"SM_VLLM_SERVED_MODEL_NAME": SERVED,
                                                          "SM_VLLM_MAX_MODEL_LEN": "256"})
    try:
        async def main():
            async with session("--sagemaker-endpoint-url", standin.url, env=FAKE_AWS) as client:
                where = {"endpoint": "gemma4-t4-endpoint", "region": "us-east-2"}
                return (await call(client, "status", **where),
                        await call(client, "query", **where, prompt="hi", max_tokens=6),
                        await call(client, "status", endpoint="nope", region="us-east-2"))

        status, query, missing = anyio.run(main)
    finally:
        standin.close()
    assert status.data["serving"] and status.data["details"] == {"endpoint_status": "InService"}
    assert query.data["usage"]["completion_tokens"] == 6 and len(query.progress) >= 2
    assert "endpoint nope not found in us-east-2" in missing.error


@pytest.fixture
def fit_environments():
    found = sorted(REPO.glob(".fit/vllm-*/bin/python"))
    if not found:
        message = "no fit environment: run `make fit-env`"
        if os.environ.get("GEMMA4_T4_REQUIRE_FIT") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return found


def test_fit_runs_the_checker_in_every_fit_environment(fit_environments):
    async def main():
        async with session() as client:
            return await call(client, "fit", strict=True)

    fit = anyio.run(main)
    versions = sorted(report["vllm"] for report in fit.data["reports"])
    assert len(versions) == len(fit_environments) and fit.data["ok"] is True
    assert all(report["target"] == "sm_75" and report["fits"] for report in fit.data["reports"])


def test_streamable_http_on_loopback():
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "gemma4_t4", "mcp", "--transport", "streamable-http", "--port",
                               str(port)], cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        async def main():
            deadline = time.monotonic() + 30
            while True:
                try:
                    async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write), \
                            ClientSession(read, write) as client:
                        await client.initialize()
                        tools = {tool.name for tool in (await client.list_tools()).tools}
                        return tools, await call(client, "cost", stack="sagemaker-t4")
                except Exception:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise
                    await anyio.sleep(0.5)

        tools, cost = anyio.run(main)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert tools == TOOLS and cost.data["cloud"] == "sagemaker" and cost.data["stopped_usd_per_month"] is None
