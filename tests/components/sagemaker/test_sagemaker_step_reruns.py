"""The steps the first `pulumi up` after an upgrade from 0.3.0 runs once more (tests/components/test_upgrade_from_030.py,
BY_NAME; CHANGELOG.md's upgrade note), each run as that `up` runs it: the `create` and `environment` the plan records,
by the command provider (tests/command_standin.py) on a teammate's machine whose virtualenv is Poetry's, outside the
project, against moto with the account as the deployed stack left it. Each changes nothing in the account.
Budget: ~15 s (one moto server; each step a Python process of ~1 s)."""

from __future__ import annotations

import json
import time

import pytest
from aws_standin import ACCOUNT, add_codebuild_quota, add_sagemaker_quotas, manifest
from command_standin import cli_environment, fake_tool, fake_venv, provider_environment, ran_by, run_command

from gemma4_t4 import catalog
from gemma4_t4.components.sagemaker.scope import StackScope

pytestmark = pytest.mark.standin

COMMAND = "command:local:Command"
G4DN = "ml.g4dn.xlarge for endpoint usage"


@pytest.fixture
def account(moto):
    moto.reset()
    return moto


@pytest.fixture
def teammate(tmp_path, account):
    """`pulumi up` from Bob's clone: Pulumi.yaml's toolchain is Poetry, whose virtualenv is in Bob's cache; his shell
    has his AWS settings and no virtualenv activated. Returns (run the recorded step, the interpreters that ran)."""
    project, venv, tools, log = tmp_path / "bob" / "src", tmp_path / "bob" / "cache" / "env", tmp_path / "bin", \
        tmp_path / "ran"
    project.mkdir(parents=True)
    python = fake_venv(venv, log)
    fake_tool(tools, "poetry", str(venv))
    provider = provider_environment(cli_environment(**account.env()), {"toolchain": "poetry"})
    provider["PATH"] = f"{tools}:{provider['PATH']}"

    def run(step):
        started = time.monotonic()
        done = run_command(step.inputs["create"], project, provider, step.inputs["environment"])
        assert ran_by(log) == {str(python)}, "the step runs with the project's Python, found as Pulumi finds it"
        return done, time.monotonic() - started

    return run


def inventory(moto) -> dict:
    """What the account holds that a step could change."""
    sagemaker, ecr = moto.client("sagemaker"), moto.client("ecr")
    repositories = [r["repositoryName"] for r in ecr.describe_repositories()["repositories"]]
    return {
        "endpoints": {e["EndpointName"]: e["EndpointStatus"] for e in sagemaker.list_endpoints()["Endpoints"]},
        "configs": sorted(c["EndpointConfigName"] for c in sagemaker.list_endpoint_configs()["EndpointConfigs"]),
        "models": sorted(m["ModelName"] for m in sagemaker.list_models()["Models"]),
        "images": {r: sorted(i["imageDigest"] for i in ecr.describe_images(repositoryName=r)["imageDetails"])
                   for r in repositories},
        "builds": moto.client("codebuild").list_builds()["ids"],
        "buckets": [b["Name"] for b in moto.client("s3").list_buckets()["Buckets"]],
    }


def _request(step, variable: str) -> dict:
    return json.loads(step.inputs["environment"][variable])


def _endpoint(moto, name: str, config: str, tags: list[dict] | None = None) -> None:
    """The endpoint the deployed stack serves from CONFIG (InService: moto's status for a created endpoint)."""
    sagemaker = moto.client("sagemaker")
    sagemaker.create_model(ModelName=f"{config}-model", ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/x",
                           PrimaryContainer={"Image": f"{ACCOUNT}.dkr.ecr.us-east-2.amazonaws.com/r@sha256:{'0' * 64}"})
    sagemaker.create_endpoint_config(EndpointConfigName=config, ProductionVariants=[
        {"VariantName": "AllTraffic", "ModelName": f"{config}-model", "InstanceType": "ml.g4dn.xlarge",
         "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=config, Tags=tags or [])
    assert sagemaker.describe_endpoint(EndpointName=name)["EndpointStatus"] == "InService"


def test_the_account_check_only_reads(run_stack, account, teammate, monkeypatch):
    step = run_stack("sagemaker-t4").one(COMMAND, "gemma4-t4-account-check")
    request = _request(step, "GEMMA4_T4_ACCOUNT_CHECK")
    add_codebuild_quota(monkeypatch, default=1.0, applied=None)
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 2.0})
    scope = StackScope(request["stack"], request["project"], request["organization"])
    _endpoint(account, "sagemaker-t4-endpoint-b1279b20", "gemma4-t4-config-71c52ee",
              [*({"Key": k, "Value": v} for k, v in scope.tags().items()),
               {"Key": catalog.SAGEMAKER_FLEET_TAG, "Value": request["fleet"]}])
    before = inventory(account)
    done, _ = teammate(step)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr
    assert inventory(account) == before


@pytest.mark.parametrize("builder", ["codebuild", "local"])
def test_the_build_finds_its_image_and_prints_the_same_digest(run_stack, account, teammate, builder):
    name = "gemma4-t4-image-codebuild-run" if builder == "codebuild" else "gemma4-t4-image-local-build"
    step = run_stack("sagemaker-t4", f"imageBuilder={builder}").one(COMMAND, name)
    request = _request(step, "GEMMA4_T4_BUILD" if builder == "codebuild" else "GEMMA4_T4_LOCAL_BUILD")
    ecr = account.client("ecr")
    ecr.create_repository(repositoryName=request["repository"], imageTagMutability="IMMUTABLE")
    pushed = ecr.put_image(repositoryName=request["repository"], imageManifest=manifest(request["tag"]),
                           imageTag=request["tag"])["image"]["imageId"]["imageDigest"]
    before = inventory(account)
    done, _ = teammate(step)  # Bob's PATH has no buildah, podman or docker: none is needed
    assert done.returncode == 0 and done.stdout == f"{pushed}\n", done.stderr
    assert "already built" in done.stderr and inventory(account) == before


def test_the_endpoint_watch_finds_the_endpoint_in_service_and_returns_at_once(run_stack, account, teammate):
    step = run_stack("sagemaker-t4").one(COMMAND, "gemma4-t4-endpoint-watch")
    request = _request(step, "GEMMA4_T4_ENDPOINT_WATCH")
    _endpoint(account, f"{request['name_prefix']}b1279b20", request["config_name"])
    before = inventory(account)
    done, took = teammate(step)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert took < 15 and inventory(account) == before


def test_the_ttl_check_finds_the_deadline_ahead(run_stack, account, teammate):
    step = run_stack("sagemaker-t4").one(COMMAND, "gemma4-t4-ttl-passed")
    request = _request(step, "GEMMA4_T4_TTL_PASSED")
    _endpoint(account, request["endpoint_name"], "gemma4-t4-config-71c52ee")
    before = inventory(account)
    done, _ = teammate(step)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert inventory(account) == before
