"""A third cloud proven, not counted. tests/third_cloud/ is the whole of it (its
component, Settings, HTTP target, one preflight check and stack file); registering it is the one registry
call, and the offline plan, cost, preflight, status and the MCP tools' plan, status and zones then work through it."""

from __future__ import annotations

import json
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import pytest
from third_cloud.cloud import LOOPBACK

from gemma4_t4 import clouds
from gemma4_t4.cli import main
from gemma4_t4.core import failures
from gemma4_t4.core.lifecycle import NotStoppable
from gemma4_t4.mcp import server as mcp_server  # imported before any test registers the third cloud
from gemma4_t4.mcp.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "tests" / "third_cloud"
STACK = "loopback-t4"
MODEL = "google/gemma-4-E2B-it-qat-w4a16-ct"


class VllmLike(BaseHTTPRequestHandler):
    """Answers as vLLM's OpenAI server does on the two routes status reads (vllm/entrypoints/openai/api_server.py:
    /health is 200 with an empty body once the engine runs; /v1/models a ModelList of ModelCards, protocol.py)."""

    def do_GET(self) -> None:
        if self.path == "/health":
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/v1/models":
            body = json.dumps({"object": "list", "data": [{
                "id": MODEL, "object": "model", "created": int(time.time()), "owned_by": "vllm", "root": MODEL,
                "parent": None, "max_model_len": 8192, "permission": []}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_error(404)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), VllmLike)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def registered():
    """The one registry line, for this test only."""
    clouds.register(LOOPBACK)
    yield LOOPBACK
    del clouds.CLOUDS[LOOPBACK.name]
    failures.CLIENT_EXPLAINERS.remove(LOOPBACK.explain)


@pytest.fixture
def project(tmp_path, registered):
    """The project's Pulumi.yaml beside the third cloud's own stack file."""
    shutil.copy(REPO / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copy(FOLDER / f"Pulumi.{STACK}.yaml", tmp_path)
    return tmp_path


def test_a_name_taken_is_refused(registered):
    with pytest.raises(ValueError, match="'loopback' is registered already"):
        clouds.register(LOOPBACK)


def test_the_offline_plan_builds_its_component_and_one_child(project, server):
    _, plan = clouds.plan_stack(STACK, [f"url={server}"], project)
    (component,) = [r for r in plan.resources if not r.custom]
    assert component.type == "gemma4-t4:index:LoopbackServer"
    (child,) = [r for r in plan.resources if r.custom]
    assert child.type == "command:local:Command" and child.parent == f"{component.type}::{component.name}"
    assert plan.outputs["cloud"] == "loopback" and plan.outputs["target"] == {"url": server}


def test_a_bad_setting_of_the_third_cloud_is_refused_like_any_other(project):
    assert main(["plan", STACK, "--project-dir", str(project), "--config", "maxModelLen=-1"]) == 2


def test_cost_and_preflight_through_the_cli(project, capsys):
    assert main(["cost", STACK, "--project-dir", str(project), "--json"]) == 0
    estimate = json.loads(capsys.readouterr().out)
    assert estimate["cloud"] == "loopback" and estimate["running_usd_per_hour"] == 0.0
    assert "a server on this machine: no cloud bill" in estimate["notes"]
    assert main(["preflight", STACK, "--project-dir", str(project), "--json"]) == 0
    checks = json.loads(capsys.readouterr().out)["checks"]
    assert [(c["name"], c["ok"]) for c in checks] == [("loopback interface", True)]


def test_status_reads_the_stack_and_asks_its_server(project, server, fake_pulumi, monkeypatch, capsys):
    _, plan = clouds.plan_stack(STACK, [f"url={server}"], project)
    monkeypatch.setenv("PATH", fake_pulumi(plan.outputs)["PATH"])
    assert main(["status", "--stack", STACK, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["serving"] is True and [m["id"] for m in status["models"]] == [MODEL]


def test_what_it_cannot_do_is_refused_with_its_reason(project, server, fake_pulumi, monkeypatch, capsys):
    _, plan = clouds.plan_stack(STACK, [f"url={server}"], project)
    monkeypatch.setenv("PATH", fake_pulumi(plan.outputs)["PATH"])
    assert main(["stop", "--stack", STACK]) == 2
    assert "a loopback server is stopped where it runs" in capsys.readouterr().err
    with pytest.raises(NotStoppable, match="no cloud names a VM by"):
        clouds.named_vm({"url": server})


def test_the_mcp_tools_plan_and_status(project, server, fake_pulumi, monkeypatch):
    from mcp import Client

    _, deployed = clouds.plan_stack(STACK, [f"url={server}"], project)
    monkeypatch.setenv("PATH", fake_pulumi(deployed.outputs)["PATH"])
    server_ = mcp_server.build(Workspace(project_dir=project))

    async def call(tool: str, **arguments):
        # The SDK's client connected in-process: the stand-in cloud is registered in this process only.
        async with Client(server_) as client:
            result = await client.call_tool(tool, arguments)
        assert not result.is_error, result.content
        return result.structured_content

    plan = anyio.run(lambda: call("plan", stack=STACK, config=[f"url={server}"]))
    assert plan["outputs"]["cloud"] == "loopback"
    status = anyio.run(lambda: call("status", stack=STACK))
    assert status["serving"] is True and status["models"][0]["id"] == MODEL


def test_the_mcp_zones_tool_offers_a_cloud_registered_after_import(registered):
    """The `cloud` enum is read when the server is built, as the CLI's --cloud choices are when its parser is (the
    tools were imported before the third cloud was registered, as a program that registers its own cloud does)."""
    from mcp import Client

    async def zones(**arguments):
        async with Client(mcp_server.build(Workspace())) as client:
            schema = next(t.input_schema for t in (await client.list_tools()).tools if t.name == "zones")
            return schema, await client.call_tool("zones", arguments)

    schema, offered = anyio.run(lambda: zones(cloud=LOOPBACK.name))
    assert schema["properties"]["cloud"]["anyOf"][0]["enum"] == [*clouds.CLOUDS]
    assert LOOPBACK.name in clouds.CLOUDS and not offered.is_error
    assert offered.structured_content["offers"] == []  # it sells nothing: Cloud.offers() is empty unless declared
    _, unknown = anyio.run(lambda: zones(cloud="azure"))
    assert unknown.is_error and f"'azure' is not one of gce, sagemaker, {LOOPBACK.name}" in unknown.content[0].text
