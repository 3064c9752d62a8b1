"""A third cloud proven, not counted. tests/third_cloud/ is the whole of it (its
component, Settings, HTTP target, one preflight check and stack file); it is registered exactly as docs/new-cloud.md
says (the page's own code blocks run here, and its checklist is checked against the shipped clouds), the offline
plan, cost, preflight, status, a refused stop and the MCP tools' plan, status and zones then work through it, and
`unregister` leaves the registry as it was."""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import anyio
import pytest
from third_cloud.cloud import LOOPBACK, Loopback

from gemma4_t4 import clouds
from gemma4_t4.cli import main
from gemma4_t4.clouds.base import Feature
from gemma4_t4.clouds.stack_config import CLOUD_DESCRIPTION
from gemma4_t4.core.failures import Failure
from gemma4_t4.core.lifecycle import Machine, NotStoppable
from gemma4_t4.core.offers import Offer
from gemma4_t4.errors import STACK_CONFIG, ConfigError, Set
from gemma4_t4.mcp import server as mcp_server  # imported before any test registers the third cloud
from gemma4_t4.mcp.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "tests" / "third_cloud"
PAGE = REPO / "docs" / "new-cloud.md"
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


def page_blocks() -> list[str]:
    """docs/new-cloud.md's Python blocks: registering the stand-in, then taking it back."""
    return re.findall(r"```py\n(.*?)```", PAGE.read_text(), re.DOTALL)


def registry_state() -> tuple:
    return ([*clouds.CLOUDS], clouds.REGISTRY.provider_keys(), clouds.REGISTRY.explainers(), STACK_CONFIG.key("region"))


@pytest.fixture
def registered():
    """The stand-in registered as docs/new-cloud.md says (its blocks run as they stand), for this test only; taken
    back by the page's unregister block, which leaves the registry as it was."""
    before = registry_state()
    register, unregister = page_blocks()
    names: dict = {}
    exec(register, names)
    assert names["LOOPBACK"] is LOOPBACK and clouds.CLOUDS[LOOPBACK.name] is LOOPBACK
    yield LOOPBACK
    exec(unregister, names)
    assert registry_state() == before


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


# --- the page's checklist: each touch, as the shipped clouds have it -----------------------------------------------

SHIPPED = ("gce", "sagemaker")
PYPROJECT = (REPO / "pyproject.toml").read_text()


def _text(path: str) -> str:
    return (REPO / path).read_text()


def _every_cloud_named_in(path: str, *words: str) -> bool:
    text = _text(path)
    return all(word in text for word in words)


CHECKS = {
    "operator-folder": lambda: all((REPO / "gemma4_t4" / "clouds" / name / f"{part}.py").is_file() for name in SHIPPED
                                   for part in ("cloud", "target", "preflight", "capacity", "lifecycle", "standins",
                                                "failures")),
    "registry": lambda: all(f"register({name.upper()})" in _text("gemma4_t4/clouds/__init__.py") for name in SHIPPED),
    "component-folder": lambda: all((REPO / "components" / name / f"{part}.py").is_file() for name in SHIPPED
                                    for part in ("component", "settings", "provider_answers")),
    "settings-export": lambda: all(cloud.settings.__name__ in _text("components/config/__init__.py")
                                   for cloud in clouds.CLOUDS.values()),
    "component-export": lambda: all(cloud.component.rsplit(":", 1)[1] in _text(path) for cloud in clouds.CLOUDS.values()
                                    for path in ("components/__init__.py", "components/package.py")),
    "catalog": lambda: all((REPO / "gemma4_t4" / "catalog" / f"{module}.py").is_file() for module in ("gce", "aws")),
    "stack-file": lambda: all((REPO / f"Pulumi.{cloud.stack}.yaml").is_file() for cloud in clouds.CLOUDS.values()),
    "cloud-key": lambda: all(name in CLOUD_DESCRIPTION for name in SHIPPED),
    "generated": lambda: all(f"  {key}:" in _text("Pulumi.yaml") for cloud in clouds.CLOUDS.values()
                             for key in clouds.config_keys(cloud.settings)),
    "standins": lambda: all(cloud.mock_states() for cloud in clouds.CLOUDS.values())
    and _every_cloud_named_in("gemma4_t4/testing.py", "GceWorld", "AwsWorld"),
    "dependencies": lambda: all(f'"pulumi-{sdk}' in PYPROJECT for sdk in ("gcp", "aws")),
    "packages": lambda: all(f'"gemma4_t4.{layer}.{name}"' in PYPROJECT for layer in ("clouds", "components")
                            for name in SHIPPED),
    "contracts": lambda: all(f'"gemma4_t4.clouds.{name}"' in PYPROJECT and f'"gemma4_t4.components.{name}.component"'
                             in PYPROJECT for name in SHIPPED),
    "rooms": lambda: all(name in _text("tests/tree/test_rooms.py").split("CLOUD_WORDS", 1)[1].splitlines()[0]
                         for name in SHIPPED),
    "tests": lambda: all(any(REPO.glob(f"tests/**/{name}/test_*.py")) for name in SHIPPED),
    "docs": lambda: all(_every_cloud_named_in(path, "GCE", "SageMaker") for path in
                        ("README.md", "docs/architecture.md", "docs/operations.md", "CHANGELOG.md")),
}
ROW = re.compile(r"^\| `([a-z-]+)` \|(.*)\|(.*)\|(.*)\|$")


def checklist() -> dict[str, str]:
    """{touch: what the stand-in has for it} from the page's table."""
    return {m[1]: m[4].strip() for line in PAGE.read_text().splitlines() if (m := ROW.match(line))}


def test_the_page_lists_every_touch_a_shipped_cloud_has():
    rows = checklist()
    assert set(rows) == set(CHECKS), "a row of docs/new-cloud.md without its check here, or a check without its row"
    assert [touch for touch, check in CHECKS.items() if not check()] == []


@pytest.mark.parametrize("touch", [*CHECKS])
def test_the_stand_in_has_each_touch_it_needs(touch):
    has = checklist()[touch]
    paths = re.findall(r"`(tests/[^`]+)`", has)
    assert paths or has.startswith(("not needed: ", "the call below")), has
    assert [path for path in paths if not (REPO / path).exists()] == []


def test_architecture_links_the_page():
    assert "(new-cloud.md)" in (REPO / "docs" / "architecture.md").read_text()


# --- the registry: one object, and unregister takes back everything ------------------------------------------------


class LoopbackDown(ConnectionError):
    """What the keyed stand-in's client raises (its own error, for its explainer)."""


class Keyed(Loopback):
    """A stand-in that adds a provider key and reads its own client's errors."""

    name = "keyed"
    provider_keys: ClassVar[Mapping[str, str]] = {"url": "loopback:url"}

    def explain(self, err: BaseException) -> Failure | None:
        return Failure("the loopback server is down: start it") if isinstance(err, LoopbackDown) else None


def test_unregister_takes_back_its_provider_keys_and_explainer():
    before = registry_state()
    keyed = clouds.register(Keyed())
    try:
        assert STACK_CONFIG.key("url") == "loopback:url"
        assert "fix: pulumi config set loopback:url x" in str(ConfigError("url", "bad", Set("url", "x")))
        assert clouds.explain(LoopbackDown()).message == "the loopback server is down: start it"
        with pytest.raises(ValueError, match="url is loopback:url already, not other:url"):
            clouds.register(type("Other", (Keyed,), {"name": "other", "provider_keys": {"url": "other:url"}})())
    finally:
        assert clouds.unregister("keyed") is keyed
    assert registry_state() == before
    assert STACK_CONFIG.key("url") == "gemma4-t4:url"
    assert clouds.explain(LoopbackDown()).kind == "bug", "its explainer went with it"
    with pytest.raises(KeyError, match="no cloud named 'keyed'"):
        clouds.unregister("keyed")


@pytest.mark.parametrize("vm_name", ["resource-group", "class", "stack", "timeout_s"])
def test_a_vm_name_the_stop_and_start_tools_cannot_take_is_refused_at_register(vm_name):
    """Each of vm_names becomes --NAME and an MCP input of stop and start: a name that is no identifier, or one the
    tools take already, would break those tools for every cloud when they are built; refused, and nothing added."""
    before = registry_state()
    odd = type("Odd", (Loopback,), {"name": "odd", "vm_names": {vm_name: "its name", "shelf": "where"}})()
    with pytest.raises(ValueError, match=f"vm_names has {vm_name!r}"):
        clouds.register(odd)
    assert registry_state() == before


def test_the_registry_is_read_through_a_view():
    with pytest.raises(TypeError):
        clouds.CLOUDS["loopback"] = LOOPBACK  # type: ignore[index]
    assert clouds.CLOUDS is clouds.REGISTRY.clouds


def test_no_module_of_the_clouds_imports_itself_back():
    """The registry (clouds/registry.py) imports no cloud's folder, and a cloud's folder no registry: no cycle."""
    import grimp

    graph = grimp.build_graph("gemma4_t4")
    modules = sorted(m for m in graph.modules if m.startswith("gemma4_t4.clouds"))
    cycles = [(a, b) for a in modules for b in graph.find_modules_directly_imported_by(a)
              if b.startswith("gemma4_t4.clouds") and graph.chain_exists(importer=b, imported=a)]
    assert cycles == []
    assert not any(graph.chain_exists(importer=f"gemma4_t4.clouds.{name}.cloud", imported="gemma4_t4.clouds.registry")
                   for name in SHIPPED)


# --- capabilities: every one a Feature ------------------------------------------------------------------------------


class Spotless(Loopback):
    """The stand-in, selling one T4 with a Spot price it cannot sell (Feature.SPOT), comparing no chosen regions."""

    unsupported: ClassVar[Mapping[Feature, str]] = {
        **Loopback.unsupported, Feature.REGION_CHOICE: "one check covers the one place it has"}

    def offers(self) -> list[Offer]:
        return [Offer(self.name, "here", "t4-box", 0.5, 0.1, "a test's own offer")]


def test_spot_and_region_choice_are_features(project, capsys):
    assert Feature.SPOT in LOOPBACK.unsupported and not clouds.GCE.supports(Feature.REGION_CHOICE)
    assert clouds.GCE.supports(Feature.SPOT) and not clouds.SAGEMAKER.supports(Feature.SPOT)
    clouds.unregister(LOOPBACK.name)
    spotless = clouds.register(Spotless())
    try:
        assert main(["zones", "--cloud", "loopback"]) == 0
        assert re.search(r"loopback +here +t4-box +0\.5000 +no Spot", capsys.readouterr().out)
        assert main(["preflight", STACK, "--project-dir", str(project), "--all-regions", "--regions", "x"]) == 2
        assert "--regions on loopback: one check covers the one place it has" in capsys.readouterr().err
    finally:
        clouds.unregister(spotless.name)
        clouds.register(LOOPBACK)


# --- front ends name a VM through its cloud's vm_names ------------------------------------------------------------


async def _vm_inputs() -> dict[str, list[str]]:
    """The stop and start tools' inputs, as a server built now serves them."""
    from mcp import Client

    async with Client(mcp_server.build(Workspace())) as client:
        return {t.name: [*t.input_schema["properties"]] for t in (await client.list_tools()).tools
                if t.name in ("stop", "start")}


class Boxed(Loopback):
    """A cloud whose VMs are named by box and shelf, and stop (its named_vm says what reached it)."""

    name = "boxed"
    vm_names: ClassVar[Mapping[str, str]] = {"box": "the box's name", "shelf": "the shelf it sits on"}
    unsupported: ClassVar[Mapping[Feature, str]] = {
        k: v for k, v in Loopback.unsupported.items() if k is not Feature.STOP_START}

    def named_vm(self, names: Mapping[str, str], api_endpoint: str | None = None) -> Machine:
        raise NotStoppable(f"boxed: asked for box {names['box']} on shelf {names['shelf']}")


def test_stop_and_start_take_the_names_a_cloud_gives_its_vms(capsys):
    boxed = clouds.register(Boxed())
    try:
        assert main(["stop", "--box", "b1", "--shelf", "s2"]) == 2
        assert "boxed: asked for box b1 on shelf s2" in capsys.readouterr().err
        assert main(["start", "--box", "b1"]) == 2
        assert "--box needs --shelf" in capsys.readouterr().err
        with pytest.raises(SystemExit):
            main(["stop", "--help"])
        usage = capsys.readouterr().out
        assert "exactly one of --stack, --instance, --box" in usage and "the shelf it sits on (only with --box)" in usage
        inputs = anyio.run(_vm_inputs)
        assert inputs["stop"] == inputs["start"] == ["stack", "instance", "zone", "project", "box", "shelf",
                                                     "timeout_s", "interval_s"]
    finally:
        clouds.unregister(boxed.name)
    assert main(["stop", "--stack", "gce-t4", "--box", "b1"]) == 2  # gone with its cloud: an unknown option
    assert anyio.run(_vm_inputs)["stop"] == ["stack", "instance", "zone", "project", "timeout_s", "interval_s"]
