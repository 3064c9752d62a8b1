"""Day two of a SageMaker stack: a failed change keeps the old fleet whole, a quota of one fleet can change
explicitly with fleetChange single, and one fleet rule (components/sagemaker/fleet.py) names every new fleet and
re-runs the account check for it. The sequences run `pulumi up` after `pulumi up` as the engine would, against
moto's server (tests/pulumi_engine_standin.py). Budget: ~60 s."""

from __future__ import annotations

import pytest
from aws_standin import add_codebuild_quota, add_sagemaker_quotas, enforce_endpoint_quota
from pulumi_engine_standin import ENDPOINT, FORCE_NEW, Engine

from gemma4_t4 import catalog
from gemma4_t4.components import SageMakerT4Endpoint
from gemma4_t4.components.sagemaker import fleet
from gemma4_t4.components.sagemaker.settings import SageMakerT4EndpointSettings
from gemma4_t4.core import plan as offline
from gemma4_t4.testing import ProviderMocks

pytestmark = pytest.mark.standin

G4DN = "ml.g4dn.xlarge for endpoint usage"


@pytest.fixture
def account(moto, monkeypatch):
    moto.reset()
    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    add_codebuild_quota(monkeypatch, default=1.0, applied=None)
    return moto


def endpoints(moto) -> dict[str, str]:
    return {e["EndpointName"]: e["EndpointStatus"] for e in moto.client("sagemaker").list_endpoints()["Endpoints"]}


def problems(moto, must_serve: bool) -> list[str]:
    """What is wrong with the account now: an endpoint in service without its configuration, its model or its log
    group with a retention; and (MUST_SERVE) no endpoint in service."""
    sagemaker, logs, found = moto.client("sagemaker"), moto.client("logs"), []
    serving = [name for name, status in endpoints(moto).items() if status == "InService"]
    if must_serve and not serving:
        found.append("no endpoint serves")
    for name in serving:
        config = sagemaker.describe_endpoint(EndpointName=name)["EndpointConfigName"]
        try:
            variants = sagemaker.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"]
        except sagemaker.exceptions.ClientError:
            found.append(f"{name} serves, but its configuration {config} is gone")
            continue
        for variant in variants:
            try:
                sagemaker.describe_model(ModelName=variant["ModelName"])
            except sagemaker.exceptions.ClientError:
                found.append(f"{name} serves, but its model {variant['ModelName']} is gone")
        group = f"/aws/sagemaker/Endpoints/{name}"
        groups = logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]
        if not any(g["logGroupName"] == group and g.get("retentionInDays") for g in groups):
            found.append(f"{name} serves, but its log group {group} is gone or never expires")
    return found


def fleet_resources(moto) -> tuple[set[str], set[str], set[str]]:
    """(models, configurations, the endpoints' log groups) in the account."""
    sagemaker = moto.client("sagemaker")
    groups = moto.client("logs").describe_log_groups(logGroupNamePrefix="/aws/sagemaker/Endpoints/")["logGroups"]
    return ({m["ModelName"] for m in sagemaker.list_models()["Models"]},
            {c["EndpointConfigName"] for c in sagemaker.list_endpoint_configs()["EndpointConfigs"]},
            {g["logGroupName"] for g in groups})


def serving_fleet(moto, name: str) -> tuple[set[str], set[str], set[str]]:
    """What endpoint NAME runs on: ({its model}, {its configuration}, {its log group})."""
    sagemaker = moto.client("sagemaker")
    config = sagemaker.describe_endpoint(EndpointName=name)["EndpointConfigName"]
    models = {v["ModelName"] for v in sagemaker.describe_endpoint_config(EndpointConfigName=config)[
        "ProductionVariants"]}
    return models, {config}, {f"/aws/sagemaker/Endpoints/{name}"}


def step_lines(engine: Engine, step: str) -> list[str]:
    return [line for line in engine.log if line.startswith(f"gemma4-t4-{step}:")]


# --- a failed change keeps the old fleet whole ------------------------------------------------------------


def test_a_failed_change_keeps_the_old_fleet_whole_through_the_next_ups(account, monkeypatch):
    """up; a change whose new endpoint fails; an up that works; a third. The old endpoint serves until the new one
    is InService, with its configuration, model and log group (retention kept) after every step of every `up`; once
    it is gone, so is what it ran on. (Before: the failed change left the old model, configuration and log group
    pending deletion, and the next `up` deleted them first, pulumi/pulumi#9979, under the serving endpoint.)"""
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 2.0})
    enforce_endpoint_quota(monkeypatch, {"ml.g4dn.xlarge": 2})
    broken: list[str] = []
    engine = Engine(account, check=lambda step: broken.extend(f"{step}: {p}" for p in problems(account, bool(first))))
    first: dict[str, str] = {}
    assert engine.up(), engine.log
    first.update(endpoints(account))
    (old,) = first
    assert first == {old: "InService"} and broken == []

    def new_endpoint_fails(typ: str, inputs: dict) -> bool:
        return typ == ENDPOINT and inputs["name"] != old

    assert not engine.up("maxModelLen=4096", fail=new_endpoint_fails), "the new endpoint fails, so the up does"
    assert endpoints(account) == {old: "InService"} and broken == []
    # The account check ran for the new fleet (its key changed) and counted the old one.
    assert "this stack's endpoint holds 1" in step_lines(engine, "account-check")[-1]

    assert engine.up("maxModelLen=2048"), engine.log
    (new,) = endpoints(account)
    assert new != old and endpoints(account) == {new: "InService"}
    assert "in use 1" in step_lines(engine, "account-check")[-1], "the old fleet counted: its configuration is there"
    assert broken == [], broken
    # Once the old endpoint is gone, so is what it ran on, and what the failed change made.
    assert fleet_resources(account) == serving_fleet(account, new)

    checks = len(step_lines(engine, "account-check"))
    assert engine.up("maxModelLen=2048", "logRetentionDays=30", "endpointTtl=8h"), engine.log
    assert endpoints(account) == {new: "InService"} and broken == []
    assert fleet_resources(account) == serving_fleet(account, new)
    assert len(step_lines(engine, "account-check")) == checks, "no new fleet: no new check"
    group = account.client("logs").describe_log_groups(logGroupNamePrefix=f"/aws/sagemaker/Endpoints/{new}")
    assert group["logGroups"][0]["retentionInDays"] == 30, "updated in place"


# --- a quota of one fleet ---------------------------------------------------------------------------------


def test_a_quota_of_one_fleet_changes_only_with_fleet_change_single(account, monkeypatch):
    """Blue/green on a quota of 1 is refused before anything bills, with what to request and why, and the choice;
    fleetChange single deletes the old endpoint first, then creates the new one (the downtime said at preview)."""
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 1.0})
    enforce_endpoint_quota(monkeypatch, {"ml.g4dn.xlarge": 1})
    engine = Engine(account, check=lambda step: None)
    assert engine.up(), engine.log
    (old,) = endpoints(account)
    # Said at the first `up`: every later change needs 2 (or fleetChange single).
    first = step_lines(engine, "account-check")[-1]
    assert "note: later changes of this stack's endpoint" in first and f'request "{G4DN}" = 2' in first

    assert not engine.up("maxModelLen=4096")
    refused = step_lines(engine, "account-check")[-1]
    assert "refused: update of this stack's endpoint" in refused and f'request "{G4DN}" = 2' in refused
    assert "for the new fleet that every change needing one" in refused and "set fleetChange single" in refused
    assert endpoints(account) == {old: "InService"}

    assert engine.up("maxModelLen=4096", "fleetChange=single"), engine.log
    (new,) = endpoints(account)
    assert new != old and endpoints(account) == {new: "InService"}
    assert f"deleting {old} before {new} is created" in " ".join(step_lines(engine, "single-fleet"))
    assert fleet_resources(account) == serving_fleet(account, new)
    assert problems(account, must_serve=True) == []


def test_fleet_change_single_says_the_downtime_at_preview(run_stack):
    plan = run_stack("sagemaker-t4", "fleetChange=single")
    step = plan.one("command:local:Command", "gemma4-t4-single-fleet")
    endpoint = plan.one(ENDPOINT)
    assert f"command:local:Command::{step.name}" in endpoint.options["dependsOn"]
    assert endpoint.options["deleteBeforeReplace"] is True
    assert not run_stack("sagemaker-t4").find("command:local:Command", "gemma4-t4-single-fleet")


# --- one fleet rule ---------------------------------------------------------------------------------------

CUDA_124 = "763104351884.dkr.ecr.us-east-2.amazonaws.com/vllm:0.9.0-gpu-py312-cu124-ubuntu22.04-sagemaker"
# {setting: (what both plans share, the other value)}: each setting changed alone.
ALTERNATES: dict[str, tuple[dict, dict]] = {
    "name_prefix": ({}, {"name_prefix": "other"}),
    "labels": ({}, {"labels": {"team": "ml"}}),
    "model": ({}, {"model": "google/gemma-4-E2B-it"}),
    "served_model_name": ({}, {"served_model_name": "gemma"}),
    "dtype": ({"model": "google/gemma-4-E2B-it", "allow_model_overflow": True}, {"dtype": "float32"}),
    "max_model_len": ({}, {"max_model_len": 8192}),
    "gpu_memory_utilization": ({}, {"gpu_memory_utilization": 0.85}),
    "max_num_seqs": ({}, {"max_num_seqs": 4}),
    "language_model_only": ({}, {"language_model_only": False}),
    "model_revision": ({}, {"model_revision": "0123456789abcdef0123456789abcdef01234567"}),
    "tensor_parallel_size": ({}, {"tensor_parallel_size": 2}),
    "allow_model_overflow": ({}, {"allow_model_overflow": True}),
    "allow_unsized_model": ({}, {"allow_unsized_model": True}),
    "size_from_hub": ({}, {"size_from_hub": False}),
    "region": ({}, {"region": "us-west-2"}),
    "profile": ({}, {"profile": "other"}),
    "execution_role_arn": ({}, {"execution_role_arn": "arn:aws:iam::123456789012:role/mine"}),
    "image_build_environment": ({}, {"image_build_environment": {"AWS_CONFIG_FILE": "/tmp/config"}}),
    "instance_type": ({}, {"instance_type": "ml.g4dn.2xlarge"}),
    "instance_count": ({}, {"instance_count": 2}),
    "min_instance_count": ({"max_instance_count": 3}, {"min_instance_count": 1}),
    "max_instance_count": ({}, {"max_instance_count": 3}),
    "scaling_metric": ({"max_instance_count": 3, "scaling_target": 5.0}, {"scaling_metric": "invocations"}),
    "scaling_target": ({"max_instance_count": 3}, {"scaling_target": 5.0}),
    "allow_non_t4_instance": ({}, {"allow_non_t4_instance": True}),
    "inference_ami_version": ({"base_image": CUDA_124}, {"inference_ami_version": "al2-ami-sagemaker-inference-gpu-3-1"}),
    "base_image": ({}, {"base_image": catalog.PINS["sagemaker.base_image"] + "x"}),
    "base_image_cuda": ({}, {"base_image_cuda": "13.0"}),
    "startup_health_check_timeout_seconds": ({}, {"startup_health_check_timeout_seconds": 1200}),
    "model_data_download_timeout_seconds": ({}, {"model_data_download_timeout_seconds": 1200}),
    "keep_images": ({}, {"keep_images": True}),
    "image_builder": ({}, {"image_builder": "local"}),
    "fleet_change": ({}, {"fleet_change": "single"}),
    "endpoint_ttl": ({}, {"endpoint_ttl": "8h"}),
    "log_retention_days": ({}, {"log_retention_days": 30}),
    "ttl_alarm_email": ({}, {"ttl_alarm_email": "ops@example.com"}),
    "hf_token": ({}, {"hf_token": "hf_x"}),
}
FLEET_TYPES = ("aws:sagemaker/model:Model", "aws:sagemaker/endpointConfiguration:EndpointConfiguration",
               ENDPOINT, "aws:cloudwatch/logGroup:LogGroup")


def fleet_made(args: dict) -> tuple[str, dict]:
    """(the account check's request, {type: (name, the inputs that would replace it)} of the fleet's resources)
    for the component built with ARGS."""
    plan = offline.run_program("sagemaker-t4", {}, program=lambda: SageMakerT4Endpoint(
        "gemma4-t4", {"region": "us-east-2", **args}), mocks=ProviderMocks())
    check = plan.one("command:local:Command", "gemma4-t4-account-check").inputs["environment"]
    made = {}
    for typ in FLEET_TYPES:
        (resource,) = [r for r in plan.find(typ) if not r.name.startswith("gemma4-t4-image")]
        keys = FORCE_NEW[typ]  # the inputs a change of which replaces the resource (None: all but tags)
        made[typ] = (resource.name, {k: v for k, v in resource.inputs.items()
                                     if (k != "tags" if keys is None else k in keys)})
    return check["GEMMA4_T4_ACCOUNT_CHECK"], made


def test_every_setting_is_a_fleet_setting_or_says_why_not():
    settings = set(SageMakerT4EndpointSettings.model_fields)
    assert not fleet.FLEET & set(fleet.NOT_FLEET), "one rule per setting"
    assert fleet.FLEET | set(fleet.NOT_FLEET) == settings, f"sort into fleet.py: {settings ^ (fleet.FLEET | set(fleet.NOT_FLEET))}"
    assert set(ALTERNATES) == settings, "every setting has a value to change it to here"


@pytest.mark.parametrize("setting", sorted(ALTERNATES))
def test_a_setting_makes_a_new_fleet_exactly_when_it_changes_what_the_fleet_runs(setting):
    """Walks every setting: changed alone, a fleet setting gives a new key (a new check, new resources), and any
    other leaves the fleet's resources as they are, their names and every input but tags (a Model or an
    EndpointConfiguration changed otherwise would be replaced under the serving endpoint). A value the settings
    take as the same (dtype half is float16) is no change."""
    shared, other = ALTERNATES[setting]
    key, made = fleet_made(shared)
    new_key, new_made = fleet_made({**shared, **other})
    if setting in fleet.FLEET:
        assert new_key != key, f"{setting} is a fleet setting: a new key, so a new check"
        assert all(new_made[t][0] != made[t][0] for t in FLEET_TYPES), f"{setting}: a new fleet, new names"
    else:
        assert new_made == made, f"{setting} ({fleet.NOT_FLEET[setting]}) changed the fleet's resources"


def test_what_the_container_serves_is_in_the_fleet_key():
    """The container's values follow the catalog as well as the settings (a model's pinned revision, the Hub's
    spelling of its id): a new one is a new fleet, never a new model under the serving fleet's names."""
    settings = SageMakerT4EndpointSettings.model_validate({})
    served = {"SM_VLLM_MODEL": "google/gemma-4-E2B-it", "SM_VLLM_REVISION": "a" * 40}
    key = fleet.fleet_key(settings, "gemma4-t4", served)
    assert key == fleet.fleet_key(settings, "gemma4-t4", dict(reversed(list(served.items()))))
    assert key != fleet.fleet_key(settings, "gemma4-t4", {**served, "SM_VLLM_REVISION": "b" * 40})
