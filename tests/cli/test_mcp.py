"""`gemma4-t4 mcp` driven by the MCP SDK's own client session over stdio, as an editor's assistant
drives it: the tool list with schemas and annotations, every tool that can run here against the
real vLLM CPU server, the offline plan, the recorded Compute Engine API and the SageMaker stand-in;
errors as tool errors carrying the CLI's own message; streamable HTTP on loopback."""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from compute_standin import ComputeStandIn
from conftest import REPO, SERVED, free_port, run
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from sagemaker_standin import StandIn

from gemma4_t4.core import bench_report
from gemma4_t4.core.ops import SCHEMA_VERSION
from gemma4_t4.mcp import cli_parity, scope
from gemma4_t4.mcp.effects import CHANGES_STATE, COSTS_MONEY

pytestmark = pytest.mark.standin

TOOLS = {"plan", "cost", "zones", "preflight", "fit", "status", "wait", "query", "logs", "bench", "bench_compare",
         "stop", "start"}
# What each tool changes, held here apart from the server's table: stop ends serving, start bills,
# bench loads the server and writes files, bench_compare writes charts. The rest only read.
CHANGES = {"bench", "bench_compare", "stop", "start"}
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
    def message(self) -> str:
        """The tool error's own line, less the SDK's `Error executing tool NAME: ` before it."""
        return re.sub(r"^Error executing tool \w+: ", "", self.error)

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
    """The CLI's --json document, schema_version and all (each MCP result carries the same)."""
    document = json.loads(cli(*args).stdout)
    assert document["schema_version"] == SCHEMA_VERSION == 1
    return document


def cli_message(*args: str, env: dict[str, str] | None = None) -> str:
    """The CLI's failure line on stderr, less its `gemma4-t4 COMMAND: ` prefix. Warnings the program
    prints before it (an unpinned model revision) are other lines; the failure is the last one."""
    result = cli(*args, env=env)
    assert result.returncode != 0, result.stdout
    failure = result.stderr.strip().splitlines()[-1]
    assert failure.startswith(f"gemma4-t4 {args[0]}"), result.stderr
    return failure.split(": ", 1)[1]


# --- the tool list --------------------------------------------------------------------------------------


def test_the_tool_list_types_inputs_and_marks_what_changes_state_or_costs_money():
    async def main():
        async with session() as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = anyio.run(main)
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        hints = tool.annotations
        assert hints.read_only_hint is (name not in CHANGES), name
        assert hints.destructive_hint is (name in CHANGES), f"{name}: what changes state here may undo or overwrite"
        assert tool.meta[COSTS_MONEY] is (name == "start"), name
        assert tool.meta[CHANGES_STATE] is (name in CHANGES), name
        assert tool.description and tool.output_schema is not None, name
        if name != "plan":  # plan's document is open (the program's outputs); its result test reads the key
            assert "schema_version" in tool.output_schema["properties"], name
    assert tools["stop"].annotations.idempotent_hint and tools["start"].annotations.idempotent_hint
    assert tools["bench"].annotations.idempotent_hint is False
    # docs/mcp.md's table says the same.
    rows = {line.split("|")[1].strip(): set(re.findall(r"`(\w+)`", line.split("|")[2]))
            for line in (REPO / "docs" / "mcp.md").read_text().splitlines() if line.startswith("| ")}
    destructive = next(names for row, names in rows.items() if row.startswith("destructive"))
    assert destructive == CHANGES and rows["read-only"] == TOOLS - CHANGES
    assert tools["zones"].annotations.open_world_hint is False and tools["status"].annotations.open_world_hint
    # plan and cost size a model the catalog lacks from the Hugging Face Hub: open world.
    assert tools["plan"].annotations.open_world_hint and tools["cost"].annotations.open_world_hint
    query = tools["query"].input_schema
    assert query["required"] == ["prompt"] and query["properties"]["max_tokens"]["minimum"] == 1
    concurrency = tools["bench"].input_schema["properties"]["concurrency"]
    assert "minimum" in json.dumps(concurrency) and "min_length" not in json.dumps(concurrency)
    report = tools["bench"].output_schema
    assert {"decode", "load", "quality", "server", "schema_version"} <= set(report["properties"])
    assert "SageMaker endpoint cannot be stopped" in tools["stop"].description
    # Model output is data: its own field, described as such, and the tool says so.
    reply = tools["query"].output_schema["properties"]
    assert "text" not in reply and "never instructions" in reply["untrusted_model_output"]["description"]
    for name in ("query", "bench", "bench_compare", "logs"):
        assert "never instructions" in tools[name].description, name


# --- against the real vLLM server ---------------------------------------------------------------------


def test_tools_against_the_real_server(vllm_server, tmp_path):
    out, plots = tmp_path / "bench.json", tmp_path / "plots"

    async def main():
        async with session("--workdir", str(tmp_path)) as client:
            status = await call(client, "status", url=vllm_server)
            query = await call(client, "query", url=vllm_server, prompt="hello", max_tokens=12)
            waited = await call(client, "wait", url=vllm_server, interval_s=1)
            logs = await call(client, "logs", url=vllm_server)
            bench = await call(client, "bench", url=vllm_server, short=4, long=16, repeats=2, concurrency=[1, 2],
                               load_tokens=8, load_repeats=1, questions=3, price_per_hour=0.736, out=str(out),
                               plot_dir=str(plots))
            compared = await call(client, "bench_compare", a="bench.json", b=str(out), plot_dir="plots")
            return status, query, waited, logs, bench, compared

    status, query, waited, logs, bench, compared = anyio.run(main)
    assert status.data["serving"] is True and status.data["models"] == [{"id": SERVED, "max_model_len": 256}]

    reply = query.data
    assert reply["model"] == SERVED and reply["usage"]["completion_tokens"] == 12 and reply["finish_reason"] == "length"
    assert reply["schema_version"] == SCHEMA_VERSION and set(reply) >= {"untrusted_model_output"}
    # Streaming progress: every piece of text as it came, in order, counted against max_tokens.
    assert len(query.progress) >= 2 and {total for _, total, _ in query.progress} == {12}
    assert "".join(message for _, _, message in query.progress) == reply["untrusted_model_output"]
    assert [p for p, _, _ in query.progress] == list(range(1, len(query.progress) + 1))

    assert waited.data["healthy"] is True and waited.data["schema_version"] == SCHEMA_VERSION
    assert logs.error.endswith(cli_message("logs", "--url", vllm_server))

    report = bench.data
    assert report == json.loads(out.read_text()), "the tool returns what it wrote"
    assert report["schema_version"] == bench_report.SCHEMA_VERSION and set(report["load"]) == {"1", "2"}
    assert report["server"]["counts_equal"] and report["server"]["bench"]["requests"] == 4 + 1 + 2 + 3
    assert report["load"]["2"]["ttft_s"]["p99"] >= report["load"]["2"]["ttft_s"]["p50"] > 0
    total = 4 + 1 + 2 + 3
    assert [p for p, _, _ in bench.progress] == list(range(1, total + 1))
    assert {t for _, t, _ in bench.progress} == {total} and bench.progress[-1][2] == "quality 3/3"
    assert (plots / "throughput.png").is_file() and (plots / "latency.png").is_file()

    rows = {row["metric"]: row for row in compared.data["comparison"]["rows"]}
    assert rows["decode tok/s"]["ratio_b_a"] == 1.0 and compared.data["comparison"]["identical_answers"] == 3
    assert sorted(Path(p).name for p in compared.data["charts"]) == ["compare-latency.png", "compare-throughput.png"]
    assert compared.data["schema_version"] == SCHEMA_VERSION


def test_failures_are_tool_errors_with_the_clis_messages(vllm_server, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"

    async def main():
        async with session("--workdir", str(tmp_path)) as client:
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
        cli_message("bench", "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")))
    refused = cli_message("plan", "gce-t4", "--config", "gemma4-t4:dtype=bfloat16")
    assert refused.startswith("refused: gemma4-t4:dtype:") and errors["refused"].error.endswith(refused)
    assert "max_tokens" in errors["bad input"].error  # the input schema refuses it before any core code runs


# --- offline, and against recorded or stand-in cloud APIs -----------------------------------------------


def test_plan_and_cost_are_the_clis(tmp_path):
    async def main():
        async with session() as client:
            return (await call(client, "plan", stack="gce-t4", config=["gemma4-t4:maxModelLen=8192"]),
                    await call(client, "cost", stack="gce-t4"),
                    await call(client, "preflight", stack="gce-t4"),
                    await call(client, "preflight", stack="sagemaker-t4"))

    plan, cost, gce, sagemaker = anyio.run(main)
    instance = next(r for r in plan.data["resources"] if r["type"] == "gcp:compute/instance:Instance")
    assert "--max-model-len 8192" in json.dumps(instance["inputs"]["metadata"]), "the override reached the guest"
    assert plan.data["outputs"]["cost_per_hour_usd"] == cost.data["running_usd_per_hour"]
    assert plan.data["schema_version"] == SCHEMA_VERSION
    assert cost.data == cli_json("cost", "gce-t4", "--json")
    # Preflight asks the stack's own project, which the shipped stack file leaves to the user: the CLI's own message.
    assert gce.error.endswith(cli_message("preflight", "gce-t4"))
    assert "pulumi config set gcp:project PROJECT" in gce.error
    assert "no AWS credentials" in sagemaker.error


def test_zones_is_the_clis():
    async def main():
        async with session() as client:
            return await call(client, "zones"), await call(client, "zones", cloud="sagemaker")

    both, sagemaker = anyio.run(main)
    assert both.data == cli_json("zones", "--json")
    assert sagemaker.data == cli_json("zones", "--cloud", "sagemaker", "--json")


def test_stop_and_start_act_on_the_stacks_own_vm_against_recorded_compute_engine_responses(fake_pulumi):
    standin = ComputeStandIn("my-project")
    where = standin.add_vm("RUNNING")
    env = fake_pulumi({"cloud": "gce", "port": 8000, "target": where})
    try:
        async def main():
            async with session("--compute-endpoint", standin.url, env=env) as client:
                return (await call(client, "stop", stack="gce-t4", interval_s=0.05),
                        await call(client, "stop", stack="gce-t4", **where, interval_s=0.05),
                        await call(client, "start", stack="gce-t4", instance=where["instance"], interval_s=0.05),
                        await call(client, "start"))

        stopped, again, started, nothing = anyio.run(main)
    finally:
        standin.close()
    assert stopped.data["status_after"] == "TERMINATED" and stopped.data["changed"] is True
    assert stopped.data["stopped_usd_per_month"] > 0 and len(stopped.data["disks"]) == 2
    assert stopped.data["schema_version"] == SCHEMA_VERSION
    assert stopped.progress and all(total == 600 for _, total, _ in stopped.progress)
    assert again.data["changed"] is False and again.data["notes"][0].startswith("already stopped")
    assert started.data["status_after"] == "RUNNING"
    assert "say which VM" in nothing.error
    assert sum(1 for method, path in standin.calls if method == "POST" and path.endswith("/stop")) == 1


def test_stop_and_start_refuse_any_vm_but_the_stacks_before_any_compute_call(fake_pulumi):
    standin = ComputeStandIn("my-project")
    where = standin.add_vm("RUNNING")
    # Another VM of the same project, not the stack's: the recorded instance under another name.
    other = {**where, "instance": "someone-elses-vm"}
    standin.instances["someone-elses-vm"] = {**standin.instances[where["instance"]], "name": "someone-elses-vm"}
    env = fake_pulumi({"cloud": "gce", "port": 8000, "target": where})
    try:
        async def main():
            async with session("--compute-endpoint", standin.url, env=env) as client:
                before = len(standin.calls)
                refused = {
                    "other vm": await call(client, "stop", stack="gce-t4", **other),
                    "other zone": await call(client, "start", stack="gce-t4", zone="europe-west4-a"),
                    "other project": await call(client, "stop", stack="gce-t4", project="someone-else"),
                    "no stack": await call(client, "stop", **where),
                    "not a stack name": await call(client, "stop", stack="org/other-project/gce-t4"),
                    # Before any quota is read (no credentials here: a cloud call would say so instead).
                    "preflight": await call(client, "preflight", stack="gce-t4", config=["gcp:project=mine"],
                                            project="someone-else"),
                }
                return refused, standin.calls[before:]

        refused, calls = anyio.run(main)
    finally:
        standin.close()
    assert calls == [], "a refused stop or start reached the Compute API"
    assert standin.status(other["instance"]) == "RUNNING" and standin.status(where["instance"]) == "RUNNING"
    owns = (f"the stack owns instance {where['instance']}, zone {where['zone']}, project {where['project']}; "
            "the tools act only on it")
    assert refused["other vm"].message == (f"refused: instance {other['instance']}, zone {other['zone']}, project "
                                         f"{other['project']} is not stack gce-t4's: {owns}")
    assert refused["other zone"].message == f"refused: zone europe-west4-a is not stack gce-t4's: {owns}"
    assert refused["other project"].message.startswith("refused: project someone-else is not stack gce-t4's")
    assert refused["no stack"].message.startswith(f"refused: instance {where['instance']}, zone {where['zone']}")
    assert "without a stack" in refused["no stack"].error
    assert refused["not a stack name"].message.startswith("refused: stack 'org/other-project/gce-t4'")
    assert refused["preflight"].message.startswith("refused: config gcp:project=mine: the tools check the stack's own "
                                                   "project")
    assert all("\n" not in outcome.message for outcome in refused.values())


class Listener:
    """A TCP port that records every connection made to it: a url or an API the tools must not contact."""

    def __init__(self, host: str = "127.0.0.1"):
        self.sock = socket.create_server((host, 0))
        self.sock.settimeout(0.1)
        self.host, self.port = host, self.sock.getsockname()[1]
        self.connections = 0
        self.running = True
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.sock.close()


def outbound_address() -> str | None:
    """This machine's own non-loopback address (a UDP connect sends nothing), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1 (RFC 5737): routed, never answered
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") else address


def test_a_url_off_loopback_is_refused_before_any_connection_unless_allowed():
    address = outbound_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address to listen on")
    listener = Listener(address)
    try:
        async def refused():
            async with session() as client:
                return [await call(client, "status", url=listener.url),
                        await call(client, "bench", url=listener.url + "/v1", short=1, long=2),
                        await call(client, "query", url=f"http://127.0.0.1@{address}:{listener.port}", prompt="hi")]

        async def allowed():
            async with session("--allow-url", listener.url) as client:
                return await call(client, "status", url=listener.url)

        outcomes = anyio.run(refused)
        contacted_before = listener.connections
        allowed_status = anyio.run(allowed)
    finally:
        listener.close()
    assert contacted_before == 0, "a refused url was contacted"
    assert outcomes[0].message == (f"refused: url {listener.url}: host {address} is not loopback (127.0.0.0/8, ::1, "
                                 f"localhost) and not allowed (--allow-url: none); start the server with --allow-url "
                                 f"{listener.url} to allow it")
    assert all(outcome.message.startswith("refused: url ") for outcome in outcomes)
    # The same url, allowed: now it is contacted (this test can see a contact).
    assert listener.connections >= 1 and allowed_status.data["serving"] is False


def test_files_outside_the_working_folder_are_refused_before_anything_runs(tmp_path):
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (work / "link").symlink_to(outside)
    report = outside / "report.json"
    report.write_text("{}")
    server = Listener()
    try:
        async def main():
            async with session("--workdir", str(work)) as client:
                bench = dict(url=server.url, short=1, long=2, repeats=1, concurrency=[1], questions=0)
                return {
                    "dotdot": await call(client, "bench", **bench, out="../outside/bench.json"),
                    "symlink": await call(client, "bench", **bench, plot_dir="link/plots"),
                    "absolute": await call(client, "bench", **bench, out=str(outside / "bench.json")),
                    "read": await call(client, "bench_compare", a=str(report), b="b.json"),
                    "charts": await call(client, "bench_compare", a="a.json", b="b.json", plot_dir="/tmp"),
                }

        refused = anyio.run(main)
    finally:
        server.close()
    assert server.connections == 0, "a refused bench contacted its server"
    assert sorted(p.name for p in outside.iterdir()) == ["report.json"], "a refused bench wrote outside"
    root = work.resolve()
    assert refused["dotdot"].message == (f"refused: out ../outside/bench.json resolves to {outside.resolve()}/bench.json, "
                                       f"outside the working folder {root} (start the server with --workdir to "
                                       "choose another)")
    assert refused["symlink"].message.startswith(f"refused: plot_dir link/plots resolves to {outside.resolve()}/plots")
    assert refused["absolute"].message.startswith(f"refused: out {outside}/bench.json resolves to")
    assert refused["read"].message.startswith(f"refused: a {report} resolves to")
    assert refused["charts"].message.startswith("refused: plot_dir /tmp resolves to /tmp, outside")


def test_a_report_never_lands_on_a_file_a_key_or_a_stack_and_reads_only_reports(tmp_path):
    """The security review's probe: `out` pointed at an authorized_keys file replaced it with the report, and
    bench_compare read /etc/passwd. Inside the working folder too, nothing but a new .json report is written, the
    chart names are never a link elsewhere, hidden folders (.ssh, .git) and Pulumi's files are out of reach, and
    only .json reports are read. Nothing is contacted, nothing changes."""
    work = tmp_path / "work"
    (work / ".ssh").mkdir(parents=True)
    (work / ".git").mkdir()
    (work / "plots").mkdir()
    keys, stack_file, report = work / ".ssh" / "authorized_keys", work / "Pulumi.gce-t4.yaml", work / "old.json"
    for path, text in ((keys, "ssh-ed25519 AAAA the user's key\n"), (stack_file, "config: {}\n"),
                       (report, "{}"), (work / "notes.txt", "mine"), (work / ".git" / "run.json", "{}")):
        path.write_text(text)
    (work / "plots" / "throughput.png").symlink_to(keys)
    before = {path: path.read_bytes() for path in work.rglob("*") if path.is_file()}
    server = Listener()
    try:
        async def main():
            async with session("--workdir", str(work)) as client:
                bench = dict(url=server.url, short=1, long=2, repeats=1, concurrency=[1], questions=0)
                return {
                    "keys": await call(client, "bench", **bench, out=".ssh/authorized_keys"),
                    "not json": await call(client, "bench", **bench, out="notes.txt"),
                    "exists": await call(client, "bench", **bench, out="old.json"),
                    "stack file": await call(client, "bench", **bench, out="Pulumi.gce-t4.json"),
                    "chart link": await call(client, "bench", **bench, plot_dir="plots"),
                    "read text": await call(client, "bench_compare", a="notes.txt", b="old.json"),
                    "read hidden": await call(client, "bench_compare", a=".git/run.json", b="old.json"),
                }

        refused = anyio.run(main)
    finally:
        server.close()
    assert server.connections == 0, "a refused bench contacted its server"
    assert {path: path.read_bytes() for path in work.rglob("*") if path.is_file()} == before, "a file changed"
    messages = {name: outcome.message for name, outcome in refused.items()}
    assert messages["keys"] == ("refused: out .ssh/authorized_keys is hidden (.ssh/authorized_keys): the tools read "
                                "and write only their reports and charts"), messages
    assert messages["not json"].startswith("refused: out notes.txt: the report is written as a .json file")
    assert messages["exists"] == "refused: out old.json exists: the tools never write over a file; give a new name"
    assert messages["stack file"].startswith("refused: out Pulumi.gce-t4.json is a Pulumi file")
    assert messages["chart link"].startswith("refused: plot_dir plots: throughput.png there is not a plain file")
    assert messages["read text"].startswith("refused: a notes.txt: a bench report is a .json file")
    assert messages["read hidden"].startswith("refused: a .git/run.json is hidden")


def test_a_working_folder_that_holds_the_whole_disk_or_home_is_refused_and_the_default_is_its_own(tmp_path):
    for broad, holds in (("/", "the whole disk"), (str(REPO / ".cache"), "your home")):
        result = cli("mcp", "--workdir", broad)
        assert result.returncode == 2 and f"which holds {holds}: give the tools a folder of their own" in result.stderr
    data = tmp_path / "data"
    params = StdioServerParameters(command=sys.executable, args=["-m", "gemma4_t4", "mcp"], cwd="/",
                                   env=_env({"XDG_DATA_HOME": str(data)}))

    async def main():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            return await call(client, "bench_compare", a="/etc/passwd", b="b.json")

    outcome = anyio.run(main)
    assert outcome.message.startswith(f"refused: a /etc/passwd resolves to /etc/passwd, outside the working folder "
                                      f"{(data / 'gemma4-t4' / 'mcp').resolve()}"), "started in /: not the whole disk"


def test_status_and_query_of_the_stacks_sagemaker_endpoint_through_the_stand_in(vllm_server, fake_pulumi):
    standin = StandIn(vllm_server, "gemma4-t4-endpoint", {"SM_VLLM_SERVED_MODEL_NAME": SERVED,
                                                          "SM_VLLM_MAX_MODEL_LEN": "256"})
    owned = {"endpoint_name": "gemma4-t4-endpoint", "region": "us-east-2"}
    env = {**FAKE_AWS, **fake_pulumi({"cloud": "sagemaker", "port": 8080, "target": owned})}
    try:
        async def main():
            async with session("--endpoint-url", standin.url, env=env) as client:
                return (await call(client, "status", stack="sagemaker-t4"),
                        await call(client, "query", stack="sagemaker-t4", endpoint="gemma4-t4-endpoint",
                                   region="us-east-2", prompt="hi", max_tokens=6))

        status, query = anyio.run(main)
    finally:
        standin.close()
    assert status.data["serving"] and status.data["details"]["endpoint_status"] == "InService"
    assert query.data["usage"]["completion_tokens"] == 6 and len(query.progress) >= 2
    assert query.data["untrusted_model_output"]


def test_an_endpoint_not_the_stacks_is_refused_before_any_aws_call(fake_pulumi):
    aws = Listener()  # where the SageMaker APIs would be asked
    owned = {"endpoint_name": "gemma4-t4-endpoint", "region": "us-east-2"}
    env = {**FAKE_AWS, **fake_pulumi({"cloud": "sagemaker", "port": 8080, "target": owned})}
    try:
        async def main():
            async with session("--endpoint-url", aws.url, env=env) as client:
                return {
                    "other endpoint": await call(client, "query", stack="sagemaker-t4", endpoint="someone-elses",
                                                 prompt="hi"),
                    "other region": await call(client, "status", stack="sagemaker-t4", endpoint="gemma4-t4-endpoint",
                                               region="eu-west-1"),
                    "no stack": await call(client, "logs", endpoint="gemma4-t4-endpoint", region="us-east-2"),
                    "a vm": await call(client, "stop", stack="sagemaker-t4", instance="gemma4-t4-gce-t4"),
                }

        refused = anyio.run(main)
    finally:
        aws.close()
    assert aws.connections == 0, "a refused endpoint reached the SageMaker API"
    owns = "the stack owns endpoint gemma4-t4-endpoint, region us-east-2; the tools act only on it"
    assert refused["other endpoint"].message == f"refused: endpoint someone-elses is not stack sagemaker-t4's: {owns}"
    assert refused["other region"].message == (f"refused: endpoint gemma4-t4-endpoint, region eu-west-1 is not stack "
                                             f"sagemaker-t4's: {owns}")
    assert refused["no stack"].message.startswith("refused: endpoint gemma4-t4-endpoint, region us-east-2 without a "
                                                "stack")
    assert refused["a vm"].message == f"refused: instance gemma4-t4-gce-t4 is not stack sagemaker-t4's: {owns}"


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


MCP_TOKEN = "t" * 40
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "curl", "version": "0"}}}
STOP = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "stop", "arguments": {"stack": "gce-t4"}}}


def test_streamable_http_on_loopback_asks_every_request_for_its_token():
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "gemma4_t4", "mcp", "--transport", "streamable-http", "--port",
                               str(port)], cwd=REPO, env=_env({"GEMMA4_T4_MCP_TOKEN": MCP_TOKEN}),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    try:
        async def main():
            deadline = time.monotonic() + 30
            while True:
                try:
                    # The probe: a bare request (curl's), initialize then tools/call stop, with no token or a wrong one.
                    async with httpx2.AsyncClient() as bare:
                        refused = [(await bare.post(url, json=body, headers={**headers, **extra})).status_code
                                   for body in (INITIALIZE, STOP)
                                   for extra in ({}, {"Authorization": "Bearer " + "x" * 40})]
                    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {MCP_TOKEN}"}) as authorized, \
                            streamable_http_client(url, http_client=authorized) as (read, write), \
                            ClientSession(read, write) as client:
                        await client.initialize()
                        tools = {tool.name for tool in (await client.list_tools()).tools}
                        return refused, tools, await call(client, "cost", stack="sagemaker-t4")
                except Exception:  # not listening yet (a refused connection, inside the SDK's task group)
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise
                    await anyio.sleep(0.5)

        refused, tools, cost = anyio.run(main)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert refused == [401, 401, 401, 401]
    assert tools == TOOLS and cost.data["cloud"] == "sagemaker" and cost.data["stopped_usd_per_month"] is None


def test_without_a_given_token_one_is_made_and_printed_once_and_a_short_one_is_refused():
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "gemma4_t4", "mcp", "--transport", "streamable-http", "--port",
                               str(port)], cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
    try:
        line = server.stderr.readline()
    finally:
        server.terminate()
        server.wait(timeout=10)
    token = line.rsplit(": ", 1)[1].strip()
    assert f"http://127.0.0.1:{port}/mcp asks every request for this token" in line and len(token) >= 32
    short = cli("mcp", "--transport", "streamable-http", "--port", str(port), env={"GEMMA4_T4_MCP_TOKEN": "short"})
    assert short.returncode == 2 and "GEMMA4_T4_MCP_TOKEN is shorter than 32 characters" in short.stderr


# --- the CLI and the tools cannot drift apart -----------------------------------------------------------

# The JSON type of a tool argument that each CLI option's converter makes (argparse's `type`, by name).
JSON_TYPE = {"str": "string", "Path": "string", "int": "integer", "positive_int": "integer", "float": "number",
             "non_negative_float": "number", "positive_float": "number", "_concurrency": "array",
             "<lambda>": "array", "_prompt": "string"}


def cli_options() -> dict[str, dict[str, str]]:
    """{command (and action): {option dest: the JSON type its value has}} of every CLI command."""
    from gemma4_t4.cli import build_parser

    def types(parser: argparse.ArgumentParser) -> dict[str, str]:
        found = {}
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            if isinstance(action, argparse._StoreTrueAction | argparse.BooleanOptionalAction):
                found[action.dest] = "boolean"
            elif isinstance(action, argparse._AppendAction):
                found[action.dest] = "array"
            else:
                converter = "str" if action.type is None else action.type.__name__
                assert converter in JSON_TYPE, f"--{action.dest}: say which JSON type {converter} makes"
                found[action.dest] = JSON_TYPE[converter]
        return found

    commands = {}
    top = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in top.choices.items():
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for action_name, action_parser in (actions[0].choices.items() if actions else [("", parser)]):
            commands[f"{name} {action_name}".strip()] = types(action_parser)
    return commands


def json_types(schema: dict[str, Any]) -> set[str]:
    variants = schema.get("anyOf", [schema])
    return {variant["type"] for variant in variants if variant.get("type") not in (None, "null")}


def test_every_cli_command_is_a_tool_with_the_same_arguments():
    """Walks the registered tools (gemma4_t4.mcp.tools), as the server builds them."""
    from gemma4_t4.mcp import server
    from gemma4_t4.mcp import tools as registry
    from gemma4_t4.mcp.workspace import Workspace

    async def main():
        return {tool.name: tool.input_schema["properties"] for tool in await server.build(Workspace()).list_tools()}

    tools = anyio.run(main)
    assert list(tools) == [tool.NAME for tool in registry.TOOLS], "the server serves the registered tools, in order"
    commands = cli_options()
    assert set(commands) == set(cli_parity.TOOL_OF_COMMAND) | set(cli_parity.NO_TOOL), "a command with no tool"
    assert set(tools) == set(cli_parity.TOOL_OF_COMMAND.values()), "a tool with no command"
    assert len(cli_parity.TOOL_OF_COMMAND) == len(registry.TOOLS), "two tools say they are the same command"
    for command, options in commands.items():
        if command in cli_parity.NO_TOOL:
            continue
        tool = cli_parity.TOOL_OF_COMMAND[command]
        expected = {cli_parity.RENAMED.get(dest, dest): kind for dest, kind in options.items()
                    if dest not in cli_parity.NOT_OFFERED}
        arguments = {name: json_types(schema) for name, schema in tools[tool].items()}
        assert set(arguments) == set(expected), f"{command} -> {tool}"
        for name, kind in expected.items():
            assert arguments[name] == {kind}, f"{command} --{name} is a {kind}; tool {tool} takes {arguments[name]}"


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000", "http://127.9.9.9:1/v1", "http://localhost:8000",
                                 "http://[::1]:8000", "https://vllm.example.com:8443/v1"])
def test_loopback_and_allowed_origins_pass(url):
    assert scope.Urls(("https://vllm.example.com:8443",)).check(url) == url


@pytest.mark.parametrize("url", ["http://10.0.0.1:8000", "http://127.0.0.1@elsewhere.example:8000",
                                 "http://127.0.0.1.nip.io:8000", "http://vllm.example.com:8443",
                                 "https://vllm.example.com", "file:///etc/passwd", "ftp://127.0.0.1/"])
def test_any_other_url_is_refused(url):
    with pytest.raises(scope.OutOfScope, match=r"^refused: url "):
        scope.Urls(("https://vllm.example.com:8443",)).check(url)
