"""Who reaches the GCE VM, on any network: IAP's SSH above a deny-all for the VM's tag, vLLM beyond loopback only
with a key and source ranges, no external IP with Cloud NAT, and per-instance grants for the operators."""

from __future__ import annotations

import asyncio
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pulumi
import pytest
import yaml
from conftest import REPO, send_json
from pulumi.runtime import settings

from gemma4_t4 import catalog, clouds
from gemma4_t4.clouds.gce.standins import MOCK_GCP_PROJECT
from gemma4_t4.clouds.gce.target import GceTarget
from gemma4_t4.components import GceT4Server, InvalidArgs
from gemma4_t4.components.gce.guest import render_serving_env
from gemma4_t4.core import plan as offline
from gemma4_t4.core.cost import CostEstimate
from gemma4_t4.core.targets import HttpTarget, TargetError
from gemma4_t4.errors import ConfigError
from gemma4_t4.testing import ProviderMocks

INSTANCE = "gcp:compute/instance:Instance"
FIREWALL = "gcp:compute/firewall:Firewall"
ROUTER = "gcp:compute/router:Router"
NAT = "gcp:compute/routerNat:RouterNat"
TUNNEL_MEMBER = "gcp:iap/tunnelInstanceIAMMember:TunnelInstanceIAMMember"
LOGIN_MEMBER = "gcp:compute/instanceIAMMember:InstanceIAMMember"
PROJECT_SERVICE = "gcp:projects/service:Service"
CUSTOM_ROLE = "gcp:projects/iAMCustomRole:IAMCustomRole"
THEIR_NETWORK = "projects/p/global/networks/shared"
THEIR_SUBNET = "projects/p/regions/us-west2/subnetworks/shared"
KEY = "k" * 40
EXPOSED = ("host=0.0.0.0", "allowNonLoopbackHost=true", "apiSourceRanges=10.0.0.0/8,192.168.4.0/24")


def component_plan(outputs=None, **args) -> offline.Plan:
    """GceT4Server in a program of its own (how a caller brings a network), under the clouds' stand-ins; OUTPUTS()
    gives the arguments that are Outputs, made inside the program."""
    handlers = {}
    for cloud in clouds.CLOUDS.values():
        handlers.update(cloud.mock_invokes(None))
    return offline.run_program("dev", {}, invokes=handlers, standins=clouds.standins(),
                               program=lambda: GceT4Server("llm", {**args, **(outputs() if outputs else {})}))


def on_their_network(**args) -> offline.Plan:
    return component_plan(lambda: {"network": pulumi.Output.from_input(THEIR_NETWORK)}, subnetwork=THEIR_SUBNET,
                          **args)


def exposed_stack(run_stack, *overrides: str) -> offline.Plan:
    config = clouds.stack_config("gce-t4", (*EXPOSED, *overrides), REPO)
    config["gemma4-t4:apiKey"] = {"secure": "AAABAGVuY3J5cHRlZA=="}  # as `pulumi config set --secret` stores it
    return clouds.offline_plan("gce-t4", config)


def rules_of(plan: offline.Plan) -> dict[str, dict]:
    return {rule.name.removeprefix("gemma4-t4-").removeprefix("llm-"): rule.inputs for rule in plan.find(FIREWALL)}


def assert_only_iap_gets_in(plan: offline.Plan, network: str) -> None:
    tags = plan.one(INSTANCE).inputs["tags"]
    rules = rules_of(plan)
    assert set(rules) == {"allow-iap-ssh", "deny-other-ingress"}
    allow, deny = rules["allow-iap-ssh"], rules["deny-other-ingress"]
    assert all(rule["network"] == network and rule["direction"] == "INGRESS" and rule["targetTags"] == tags
               for rule in (allow, deny))
    assert allow["sourceRanges"] == ["35.235.240.0/20"] and allow["allows"] == [{"protocol": "tcp", "ports": ["22"]}]
    assert deny["sourceRanges"] == ["0.0.0.0/0"] and deny["denies"] == [{"protocol": "all"}]
    assert "allows" not in deny
    # Lower is first: IAP's allow, then the deny-all, then any rule made without a priority and the default
    # network's default-allow-ssh / default-allow-internal.
    assert allow["priority"] < deny["priority"] < catalog.FIREWALL_DEFAULT_PRIORITY \
        < catalog.DEFAULT_NETWORK_RULE_PRIORITY


def test_on_its_own_network_only_iap_ssh_gets_in_and_nothing_opens_the_vllm_port(run_stack):
    plan = run_stack("gce-t4")
    network = plan.one("gcp:compute/network:Network")
    assert network.inputs["autoCreateSubnetworks"] is False, "a default-style network would bring its own open rules"
    assert_only_iap_gets_in(plan, f"projects/{MOCK_GCP_PROJECT}/global/networks/{network.state['name']}")


def test_on_a_callers_network_the_deny_all_outranks_whatever_that_network_allows():
    plan = on_their_network()
    assert not plan.find("gcp:compute/network:Network") and not plan.find("gcp:compute/subnetwork:Subnetwork")
    assert_only_iap_gets_in(plan, THEIR_NETWORK)
    assert plan.one(INSTANCE).inputs["networkInterfaces"][0]["subnetwork"] == THEIR_SUBNET


def test_the_vm_has_no_service_account_so_operators_need_no_service_account_user():
    """roles/iam.serviceAccountUser is needed to act as a VM's service account; this VM runs as none."""
    vm = on_their_network().one(INSTANCE).inputs
    assert "serviceAccount" not in vm


# --- vLLM beyond loopback --------------------------------------------------------------------------


@pytest.mark.parametrize("overrides,key,fix", [
    (("host=0.0.0.0", "allowNonLoopbackHost=true"), "gemma4-t4:allowNonLoopbackHost",
     "pulumi config set --secret gemma4-t4:apiKey"),
    (("allowNonLoopbackHost=true",), "gemma4-t4:allowNonLoopbackHost", "pulumi config set --secret gemma4-t4:apiKey"),
    (("apiSourceRanges=10.0.0.0/8",), "gemma4-t4:apiSourceRanges", "pulumi config rm gemma4-t4:apiSourceRanges"),
    (("apiSourceRanges=10.0.0.9/8",), "gemma4-t4:apiSourceRanges", "apiSourceRanges 10.0.0.0/8"),
    (("apiSourceRanges=0.0.0.0/0",), "gemma4-t4:apiSourceRanges", "apiSourceRanges CIDR"),
    (("apiSourceRanges=2001:db8::/32",), "gemma4-t4:apiSourceRanges", "apiSourceRanges 10.0.0.0/8"),
    (("apiSourceRanges=office",), "gemma4-t4:apiSourceRanges", "apiSourceRanges 10.0.0.0/8"),
    (("cloudNat=true",), "gemma4-t4:cloudNat", "externalIp false"),
    (("operators=alice@example.com",), "gemma4-t4:operators", "operators user:alice@example.com"),
    (("operators=allUsers",), "gemma4-t4:operators", "operators user:YOU@example.com"),
    (("operators=user:a@example.com,user:a@example.com",), "gemma4-t4:operators", "operators user:a@example.com"),
], ids=lambda value: value[0] if isinstance(value, tuple) else None)
def test_refused_at_preview_with_the_key_and_the_fix(refused_stack, overrides, key, fix):
    error, partial = refused_stack("gce-t4", *overrides)
    assert error.key == key
    assert fix in error.fix
    assert partial.resources == [], "a refused config must create no resource"


def refused_exposed(monkeypatch, *overrides: str, key_value: str = KEY) -> tuple[ConfigError, offline.Plan]:
    """The exposed stack under `pulumi preview`, which decrypts the `secure:` apiKey and hands the program its value
    marked secret (the offline plan, which cannot decrypt, hands a placeholder): the engine's decryption stood in
    for by the value the test gives."""
    config = clouds.stack_config("gce-t4", (*EXPOSED, *overrides), REPO)
    config["gemma4-t4:apiKey"] = {"secure": "AAABAGVuY3J5cHRlZA=="}
    as_string = offline._as_config_string
    monkeypatch.setattr(offline, "_as_config_string",
                        lambda value: key_value if value == config["gemma4-t4:apiKey"] else as_string(value))
    partial = offline.Plan("gce-t4")
    with pytest.raises(ConfigError) as caught:
        clouds.offline_plan("gce-t4", config, plan=partial)
    return caught.value, partial


@pytest.mark.parametrize("overrides,key_value,key,fix", [
    # The stack passes apiKey as a secret Output: its value is checked all the same, before anything exists.
    ((), "short-key", "gemma4-t4:apiKey", "pulumi config set --secret gemma4-t4:apiKey"),
    # Two halves of the internet are the internet: nothing wider than a /8 is admitted.
    (("apiSourceRanges=0.0.0.0/1,128.0.0.0/1",), KEY, "gemma4-t4:apiSourceRanges",
     "(the networks that call vLLM, each /8 or narrower)"),
    (("apiSourceRanges=10.0.0.0/7",), KEY, "gemma4-t4:apiSourceRanges", "apiSourceRanges CIDR"),
], ids=["short-secret-key", "two-halves", "slash-7"])
def test_exposure_refused_at_preview_naming_the_key_and_the_fix(monkeypatch, overrides, key_value, key, fix):
    error, partial = refused_exposed(monkeypatch, *overrides, key_value=key_value)
    assert error.key == key and fix in error.fix
    assert "short-key" not in str(error), "a credential is never shown"
    assert partial.resources == [], "a refused config must create no resource"


def test_a_short_secret_key_is_refused_in_a_python_program_too():
    with pytest.raises(InvalidArgs) as caught:
        component_plan(lambda: {"api_key": pulumi.Output.secret("short-key")}, host="0.0.0.0",
                       allow_non_loopback_host=True, api_source_ranges=["10.0.0.0/8"])
    assert caught.value.key == "api_key" and "short-key" not in str(caught.value)


def test_a_slash_8_is_the_widest_range_admitted(run_stack):
    plan = exposed_stack(run_stack, "apiSourceRanges=10.0.0.0/8")
    assert rules_of(plan)["allow-api"]["sourceRanges"] == ["10.0.0.0/8"]


def test_non_loopback_without_source_ranges_is_refused_even_with_a_key():
    with pytest.raises(InvalidArgs) as caught:
        component_plan(lambda: {"api_key": pulumi.Output.secret(KEY)}, host="0.0.0.0", allow_non_loopback_host=True)
    assert caught.value.key == "allow_non_loopback_host" and "without apiSourceRanges" in caught.value.problem
    assert "api_source_ranges" in caught.value.fix


def test_a_short_key_is_refused_without_showing_it():
    with pytest.raises(InvalidArgs) as caught:
        component_plan(host="0.0.0.0", allow_non_loopback_host=True, api_key="short-key",
                       api_source_ranges=["10.0.0.0/8"])
    assert caught.value.key == "api_key" and "short-key" not in str(caught.value)


def test_with_key_and_ranges_the_port_is_admitted_from_those_ranges_only_and_the_key_stays_secret(run_stack):
    plan = exposed_stack(run_stack)
    rules = rules_of(plan)
    assert set(rules) == {"allow-iap-ssh", "allow-api", "deny-other-ingress"}
    api = rules["allow-api"]
    assert api["sourceRanges"] == ["10.0.0.0/8", "192.168.4.0/24"]
    assert api["allows"] == [{"protocol": "tcp", "ports": ["8000"]}]
    assert api["priority"] < rules["deny-other-ingress"]["priority"]
    assert api["targetTags"] == plan.one(INSTANCE).inputs["tags"]
    # The SDK sends a map holding a secret as a secret: the metadata is kept encrypted in the state, whole.
    assert plan.one(INSTANCE).inputs["metadata"] == offline.SECRET_PLACEHOLDER
    assert isinstance(run_stack("gce-t4").one(INSTANCE).inputs["metadata"], dict), "no secret without a key"


def test_the_key_reaches_vllm_as_its_environment_variable_not_a_flag():
    env = render_serving_env(["--model", "m", "--host", "0.0.0.0"], 8000, 0, api_key=KEY)
    assert f"\nVLLM_API_KEY={KEY}\n" in env
    assert KEY not in next(line for line in env.splitlines() if line.startswith("VLLM_ARGS="))
    with pytest.raises(ValueError, match="whitespace") as caught:
        render_serving_env(["--model", "m"], api_key="two\nlines" + KEY)
    assert KEY not in str(caught.value)


# --- no external IP --------------------------------------------------------------------------------


def test_without_an_external_ip_the_vm_has_no_access_config_and_its_network_gets_cloud_nat(run_stack):
    plan = run_stack("gce-t4", "externalIp=false")
    assert plan.one(INSTANCE).inputs["networkInterfaces"][0]["accessConfigs"] == []
    router, nat = plan.one(ROUTER), plan.one(NAT)
    assert router.inputs["region"] == nat.inputs["region"] == "us-west2"
    assert router.inputs["network"] == plan.one(FIREWALL, "gemma4-t4-allow-iap-ssh").inputs["network"]
    assert nat.inputs["router"] == router.state["name"]
    assert nat.inputs["sourceSubnetworkIpRangesToNat"] == "ALL_SUBNETWORKS_ALL_IP_RANGES"
    assert nat.inputs["natIpAllocateOption"] == "AUTO_ONLY"
    assert f"{NAT}::gemma4-t4-nat" in plan.one(INSTANCE).options["dependsOn"], "the first boot's downloads need it"
    assert_only_iap_gets_in(plan, router.inputs["network"])


def test_by_default_the_vm_keeps_its_external_ip_and_no_nat_is_made(run_stack):
    plan = run_stack("gce-t4")
    assert plan.one(INSTANCE).inputs["networkInterfaces"][0]["accessConfigs"] == [{}]
    assert not plan.find(ROUTER) and not plan.find(NAT)
    assert "first_boot_nat_usd" not in plan.outputs


def test_on_a_callers_network_nat_is_opt_in_and_covers_the_vms_subnetwork_only():
    assert not on_their_network(external_ip=False).find(NAT), "their network may route out already"
    nat = on_their_network(external_ip=False, cloud_nat=True).one(NAT).inputs
    assert nat["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS"
    assert nat["subnetworks"] == [{"name": THEIR_SUBNET, "sourceIpRangesToNats": ["ALL_IP_RANGES"]}]


def test_nat_costs_per_first_boot_and_per_hour_are_stated(run_stack):
    with_ip, with_nat = run_stack("gce-t4"), run_stack("gce-t4", "externalIp=false")
    prices = catalog.CLOUD_NAT_PRICES
    hourly = prices["nat:vm-hour"].usd_per_hour + prices["nat:ip-hour"].usd_per_hour
    ip = catalog.GCE_PRICES["us-west2"]["ip:external-in-use"].usd_per_hour
    assert with_nat.outputs["cost_per_hour_usd"] == pytest.approx(with_ip.outputs["cost_per_hour_usd"] - ip + hourly,
                                                                 abs=1e-4)
    checkpoint = int(next(line for line in with_nat.one(INSTANCE).inputs["metadata"]["gemma4-t4-serving"].splitlines()
                          if line.startswith("CHECKPOINT_BYTES=")).split("=")[1])
    gib = (checkpoint + catalog.FIRST_BOOT_VLLM_ENV_BYTES) / catalog.GIB
    assert 14 < gib < 17, "the QAT checkpoint (8.3 GB) and the vLLM environment (~8 GB)"
    usd = round(gib * prices["nat:gib-processed"].usd_per_hour, 2)
    assert with_nat.outputs["first_boot_nat_usd"] == usd
    estimate = CostEstimate.from_outputs("gce-t4", with_nat.outputs)
    clouds.plan_cloud(with_nat).cost(with_nat, estimate)
    item = next(item for item in estimate.extras if item.per == "first boot")
    assert item.usd == usd and "cloud.google.com/nat/pricing" in item.source
    assert clouds.extra_costs(with_ip) == [], "an external IP processes nothing"


# --- operators -------------------------------------------------------------------------------------


def test_operators_get_the_tunnel_and_os_login_on_this_instance_only(run_stack):
    plan = run_stack("gce-t4", "operators=user:alice@example.com, group:oncall@example.com")
    vm = plan.one(INSTANCE).state
    tunnels, logins = plan.find(TUNNEL_MEMBER), plan.find(LOGIN_MEMBER)
    assert sorted(m.inputs["member"] for m in tunnels) == ["group:oncall@example.com", "user:alice@example.com"]
    assert sorted(m.inputs["member"] for m in logins if "-login-" in m.name) == ["group:oncall@example.com",
                                                                                 "user:alice@example.com"]
    for member in tunnels:
        assert member.inputs["role"] == "roles/iap.tunnelResourceAccessor"
        assert (member.inputs["instance"], member.inputs["zone"]) == (vm["name"], "us-west2-b")
    logins_only = [m for m in logins if m.name.startswith("gemma4-t4-login-") or "-login-" in m.name]
    for member in logins_only:
        assert member.inputs["role"] == "roles/compute.osLogin", "no sudo: osAdminLogin is the user's choice"
        assert (member.inputs["instanceName"], member.inputs["zone"]) == (vm["name"], "us-west2-b")
    # The tunnel grant is an IAP API call: the API is enabled first, and left on when the stack goes.
    api = plan.one(PROJECT_SERVICE)
    assert api.inputs["service"] == "iap.googleapis.com" and api.inputs["disableOnDestroy"] is False
    assert all(api.urn.split("::")[-1] in " ".join(m.options["dependsOn"]) for m in tunnels), \
        [m.options["dependsOn"] for m in tunnels]
    assert not run_stack("gce-t4").find(PROJECT_SERVICE), "no API enabled without operators"
    # Read, stop and start: a custom role of those permissions alone, bound on this instance (never a project-wide
    # instanceAdmin, whose compute.instances.setMetadata is root on every VM of the project).
    role = plan.one(CUSTOM_ROLE)
    assert role.inputs["permissions"] == ["compute.instances.get", "compute.instances.getGuestAttributes",
                                          "compute.instances.start", "compute.instances.stop"]
    assert not any("setMetadata" in p or "setIamPolicy" in p for p in role.inputs["permissions"])
    operate = [m for m in logins if m.inputs["role"] == role.state["name"]]
    assert sorted(m.inputs["member"] for m in operate) == ["group:oncall@example.com", "user:alice@example.com"]
    assert all((m.inputs["instanceName"], m.inputs["zone"]) == (vm["name"], "us-west2-b") for m in operate)
    assert role.state["name"] == f"projects/{MOCK_GCP_PROJECT}/roles/{role.inputs['roleId']}"
    assert not run_stack("gce-t4").find(TUNNEL_MEMBER), "none without operators"
    assert not run_stack("gce-t4").find(CUSTOM_ROLE)
    # Named by member: dropping alice leaves the on-call group's grants as they are (no replacement).
    kept = run_stack("gce-t4", "operators=group:oncall@example.com")
    assert [m.name for m in kept.find(LOGIN_MEMBER)] == [m.name for m in logins if "oncall" in m.inputs["member"]]
    assert kept.one(CUSTOM_ROLE).name == role.name, "one role per stack, whoever the operators are"


def test_two_long_prefixes_alike_in_their_first_characters_get_two_operator_roles():
    """IAM's role ids stop at 64 characters: two stacks whose namePrefix differ only past that must not share
    (and fight over) one custom role."""
    from gemma4_t4.components.gce.access import operator_role_id

    common = "team-inference-experiments-gemma4-serving-west-"
    first, second = operator_role_id(common + "alpha-one"), operator_role_id(common + "alpha-two")
    assert first != second and len(first) == len(second) == 64
    assert re.fullmatch(r"[A-Za-z0-9_.]{3,64}", first)
    assert operator_role_id("gemma4-t4") == "gemma4t4Operator_gemma4_t4", "a short id is kept as it was"


def test_operators_as_a_list_from_the_stack_file():
    """`pulumi config set --path 'gemma4-t4:operators[0]' ...` stores a list: Pulumi hands it as a JSON array."""
    config = clouds.stack_config("gce-t4", (), REPO)
    config["gemma4-t4:operators"] = yaml.safe_load("[user:alice@example.com]")
    plan = clouds.offline_plan("gce-t4", config)
    assert [m.inputs["member"] for m in plan.find(LOGIN_MEMBER)] == ["user:alice@example.com"] * 2


# --- the operator tools with a key -----------------------------------------------------------------


class _KeyedVllm(BaseHTTPRequestHandler):
    """vLLM with an API key, as its middleware answers (0.30.0 vllm/entrypoints/serve/middleware/authenticate.py:
    a path under /v1 without `Authorization: Bearer KEY` gets 401 {"error": "Unauthorized"}; /health is not
    guarded)."""

    def do_GET(self):
        guarded = self.path.startswith(catalog.vllm.API_KEY_GUARDED_PREFIXES)
        if guarded and self.headers.get("Authorization") != f"Bearer {KEY}":
            send_json(self, 401, {"error": "Unauthorized"})
        else:
            send_json(self, 200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

    def log_message(self, *args):
        pass


@pytest.fixture
def keyed_vllm():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _KeyedVllm)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_stacks_target_sends_the_key_from_the_environment_and_a_named_url_never(keyed_vllm, monkeypatch):
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    with pytest.raises(TargetError, match="HTTP 401"):
        GceTarget(keyed_vllm)._request("GET", "/v1/models")
    assert HttpTarget(keyed_vllm).health(), "/health answers without the key"
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    # The stack's own VM (its tunnel's local port; here the keyed server stands in for it): the key goes.
    assert GceTarget(keyed_vllm)._request("GET", "/v1/models").json()["data"][0]["id"] == "m"
    # A url a caller names, loopback or not, is not the stack's: the key never goes there.
    with pytest.raises(TargetError, match="HTTP 401"):
        clouds.resolve_target(url=keyed_vllm)._request("GET", "/v1/models")


def test_preview_warns_who_reads_the_key_in_the_metadata(run_stack, caplog):
    exposed_stack(run_stack)
    assert any("apiKey is in the VM's metadata" in r.message and r.levelname == "WARNING" for r in caplog.records)
    caplog.clear()
    run_stack("gce-t4")
    assert not any("apiKey" in r.message for r in caplog.records), "no key, no warning"


def _under_users_mocks_at_preview(api_key) -> None:
    """GceT4Server in a user's unit test: pulumi's own mocks (gemma4_t4.testing.ProviderMocks) at preview."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        pulumi.runtime.set_mocks(ProviderMocks(), preview=True)
        GceT4Server("llm", {"host": "0.0.0.0", "allow_non_loopback_host": True, "api_source_ranges": ["10.0.0.0/8"],
                            "api_key": api_key()})
    finally:
        asyncio.set_event_loop(None)
        loop.close()
        settings.reset_options()


async def _value(value):
    return value


def test_at_preview_under_mocks_a_known_secret_key_is_checked_and_an_unknown_one_passes():
    with pytest.raises(InvalidArgs) as caught:
        _under_users_mocks_at_preview(lambda: pulumi.Output.secret("short-key"))
    assert caught.value.key == "api_key"
    # Another resource's output, not known at preview (Output(resources, value, is_known=False, is_secret=True)).
    _under_users_mocks_at_preview(lambda: pulumi.Output(set(), _value(None), _value(False), _value(True)))
