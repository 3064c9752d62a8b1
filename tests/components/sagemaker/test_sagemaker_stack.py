"""The sagemaker-t4 stack's graph under Pulumi mocks, its bad input, and the image build files."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import sys
import types

import pytest
import yaml
from conftest import REPO, require_tool, run

from gemma4_t4 import catalog, clouds
from gemma4_t4.clouds.sagemaker import World as SageMakerWorld
from gemma4_t4.components import clamp
from gemma4_t4.components.provider_answers import engine_failure
from gemma4_t4.components.sagemaker import build_context
from gemma4_t4.components.sagemaker import provider_answers as answers
from gemma4_t4.components.sagemaker.scope import StackScope
from gemma4_t4.components.sagemaker.steps import build as codebuild_run
from gemma4_t4.components.step import step_command
from gemma4_t4.core.plan import SECRET_PLACEHOLDER

MODEL = "aws:sagemaker/model:Model"
CONFIG = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
COMMAND = "command:local:Command"
POLICY = "aws:iam/rolePolicy:RolePolicy"


def _policy(plan, name: str) -> dict:
    return json.loads(plan.find(POLICY, name)[0].inputs["policy"])


def test_variant_pins_the_driver_580_host_image_on_one_g4dn_xlarge(run_stack):
    plan = run_stack("sagemaker-t4")
    variant = plan.one(CONFIG).inputs["productionVariants"]
    assert variant == [{
        "variantName": "AllTraffic", "modelName": plan.one(MODEL).state["name"], "instanceType": "ml.g4dn.xlarge",
        "initialInstanceCount": 1.0, "inferenceAmiVersion": "al2023-ami-sagemaker-inference-gpu-4-1",
        "containerStartupHealthCheckTimeoutInSeconds": float(catalog.SAGEMAKER_DEFAULT_STARTUP_HEALTH_CHECK_S),
        "modelDataDownloadTimeoutInSeconds": 1800.0}]


def test_model_runs_the_built_image_by_digest_after_the_build(run_stack):
    plan = run_stack("sagemaker-t4")
    model = plan.one(MODEL)
    assert f"{COMMAND}::gemma4-t4-image-codebuild-run" in model.options["dependsOn"]
    image = model.inputs["primaryContainer"]["image"]
    repository = plan.one("aws:ecr/repository:Repository").state
    assert image == f"{repository['repositoryUrl']}@sha256:{'0' * 64}"
    assert plan.outputs["image_uri"] == image


def test_model_environment_is_the_serving_config_as_sm_vllm(run_stack):
    env = run_stack("sagemaker-t4").one(MODEL).inputs["primaryContainer"]["environment"]
    assert env == {
        "SM_VLLM_MODEL": "google/gemma-4-E2B-it-qat-w4a16-ct",
        "SM_VLLM_SERVED_MODEL_NAME": "google/gemma-4-E2B-it-qat-w4a16-ct",
        "SM_VLLM_DTYPE": "float16", "SM_VLLM_MAX_MODEL_LEN": "8192", "SM_VLLM_GPU_MEMORY_UTILIZATION": "0.9",
        "SM_VLLM_MAX_NUM_SEQS": "8", "SM_VLLM_TENSOR_PARALLEL_SIZE": "1", "SM_VLLM_LANGUAGE_MODEL_ONLY": "true"}


def test_execution_role_can_only_pull_this_repository_and_write_endpoint_logs(run_stack):
    plan = run_stack("sagemaker-t4")
    statements = {s["Sid"]: s for s in _policy(plan, "gemma4-t4-execution-policy")["Statement"]}
    assert set(statements) == {"EcrLogin", "PullImage", "EndpointLogs", "Metrics"}
    assert statements["PullImage"]["Resource"] == plan.one("aws:ecr/repository:Repository").state["arn"]
    # The groups of the names the stack gives its endpoints (sagemaker-t4-endpoint- and 8 hex digits), no other.
    group = "arn:aws:logs:us-east-2:123456789012:log-group:/aws/sagemaker/Endpoints/sagemaker-t4-endpoint-????????"
    assert statements["EndpointLogs"]["Resource"] == [group, f"{group}:*"], "the endpoint's own groups, no other"
    # IAM's ? and * as fnmatch reads them: the group the stack makes (and its streams) match, another does not.
    made = endpoint_logs(plan).inputs["name"]
    own = f"arn:aws:logs:us-east-2:123456789012:log-group:{made}"
    assert fnmatch.fnmatchcase(own, group) and fnmatch.fnmatchcase(f"{own}:log-stream:AllTraffic/i-0", f"{group}:*")
    other = "arn:aws:logs:us-east-2:123456789012:log-group:/aws/sagemaker/Endpoints/someone-elses-endpoint"
    assert not any(fnmatch.fnmatchcase(other, r) or fnmatch.fnmatchcase(f"{other}:x", r)
                   for r in statements["EndpointLogs"]["Resource"])
    actions = [a for s in statements.values() for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])]
    assert not any(a.startswith(("sagemaker:", "s3:", "iam:")) or a.endswith("*") for a in actions)
    assert not plan.find("aws:iam/rolePolicyAttachment:RolePolicyAttachment"), "no managed policy (FullAccess)"
    trust = json.loads(plan.find("aws:iam/role:Role", "gemma4-t4-execution")[0].inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "sagemaker.amazonaws.com"}


ROLE = "aws:iam/role:Role"
ACCOUNT = "123456789012"  # the account in the plan's mock ARNs (clouds/sagemaker/standins.py MOCK_ACCOUNT)


def _trusts(plan) -> dict[str, dict]:
    """Each role's one trust statement, by the service it trusts."""
    found = {}
    for role in plan.find(ROLE):
        (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
        assert statement["Action"] == "sts:AssumeRole" and statement["Effect"] == "Allow"
        found[statement["Principal"]["Service"]] = statement
    return found


def test_every_role_trusts_its_service_only_for_this_accounts_resources(run_stack):
    """Against the cross-service confused deputy, each as the service's own page documents it (catalog)."""
    plan = run_stack("sagemaker-t4", "endpointTtl=8h")
    trusts = _trusts(plan)
    assert set(trusts) == {"sagemaker.amazonaws.com", "codebuild.amazonaws.com", "scheduler.amazonaws.com"}
    assert len(plan.find(ROLE)) == 3, "one role per service, each with its condition"
    # SageMaker inference: only the ARN pattern its page gives (no SourceAccount, nothing narrower).
    assert trusts["sagemaker.amazonaws.com"]["Condition"] == {
        "ArnLike": {"aws:SourceArn": f"arn:aws:sagemaker:us-east-2:{ACCOUNT}:*"}}
    # CodeBuild: this account, and this stack's build project (auto-named after the role: a pattern that the
    # project's name as the provider makes it matches).
    codebuild = trusts["codebuild.amazonaws.com"]["Condition"]
    assert codebuild["StringEquals"] == {"aws:SourceAccount": ACCOUNT}
    pattern = codebuild["ArnLike"]["aws:SourceArn"]
    assert pattern == f"arn:aws:codebuild:us-east-2:{ACCOUNT}:project/gemma4-t4-image-build*"
    project = plan.one("aws:codebuild/project:Project").state["name"]
    assert fnmatch.fnmatchcase(f"arn:aws:codebuild:us-east-2:{ACCOUNT}:project/{project}", pattern)
    assert not fnmatch.fnmatchcase(f"arn:aws:codebuild:us-east-2:{ACCOUNT}:project/other-build", pattern)
    # Scheduler: this account and the schedule group the stack's schedules are in (they name none: default).
    assert trusts["scheduler.amazonaws.com"]["Condition"] == {"StringEquals": {
        "aws:SourceAccount": ACCOUNT, "aws:SourceArn": f"arn:aws:scheduler:us-east-2:{ACCOUNT}:schedule-group/default"}}
    assert all("groupName" not in s.inputs for s in plan.find("aws:scheduler/schedule:Schedule"))


def test_the_roles_conditions_name_the_account_the_provider_makes_the_resources_in(run_stack):
    """The account is read from the stack's own repository, so it is the provider's, whichever account that is."""
    plan = run_stack("sagemaker-t4", "endpointTtl=8h", "aws:region=eu-west-1")
    repository = plan.one("aws:ecr/repository:Repository").state["arn"]
    assert repository.split(":")[4] == ACCOUNT
    conditions = json.dumps([t["Condition"] for t in _trusts(plan).values()])
    assert conditions.count(ACCOUNT) == 5 and "*:" not in conditions.replace(":*", "")
    ttl = _policy(plan, "gemma4-t4-ttl-policy")["Statement"][0]
    assert ttl["Resource"].startswith(f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:endpoint/"), "no account wildcard"


def test_build_role_reads_the_context_pulls_the_base_and_pushes_only_our_repository(run_stack):
    plan = run_stack("sagemaker-t4")
    statements = {s["Sid"]: s for s in _policy(plan, "gemma4-t4-image-build-role-policy")["Statement"]}
    bucket = plan.one("aws:s3/bucket:Bucket").state["arn"]
    assert statements["Context"]["Resource"] == bucket + "/context/*"
    # Bucket-level reads, as AWS's reference CodeBuild role has them, on this bucket only.
    assert statements["ContextBucket"] == {"Sid": "ContextBucket", "Effect": "Allow",
                                           "Action": ["s3:GetBucketAcl", "s3:GetBucketLocation"], "Resource": bucket}
    actions = [a for st in statements.values() for a in ([st["Action"]] if isinstance(st["Action"], str)
                                                         else st["Action"])]
    assert not any(a.endswith("*") or a.startswith(("s3:Put", "s3:Delete", "iam:")) for a in actions)
    assert statements["PullBase"]["Resource"] == "arn:aws:ecr:us-east-2:763104351884:repository/vllm"
    assert statements["PushImage"]["Resource"] == plan.one("aws:ecr/repository:Repository").state["arn"]
    assert "ecr:PutImage" in statements["PushImage"]["Action"]
    build_logs = plan.one("aws:cloudwatch/logGroup:LogGroup", "gemma4-t4-image-build-logs")
    assert statements["Logs"]["Resource"] == build_logs.state["arn"] + ":*"


def test_source_bucket_is_private_and_encrypted(run_stack):
    plan = run_stack("sagemaker-t4")
    block = plan.one("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock").inputs
    assert all(block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls",
                                          "restrictPublicBuckets"))
    sse = plan.one("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    assert sse.inputs["rules"] == [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]
    assert plan.one("aws:s3/bucket:Bucket").inputs["forceDestroy"] is True


def test_source_bucket_refuses_every_request_not_made_over_tls(run_stack):
    plan = run_stack("sagemaker-t4")
    bucket = plan.one("aws:s3/bucket:Bucket").state
    tls = plan.one("aws:s3/bucketPolicy:BucketPolicy")
    assert tls.inputs["bucket"] == bucket["bucket"]
    (statement,) = json.loads(tls.inputs["policy"])["Statement"]
    assert statement == {"Sid": "TlsOnly", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
                         "Resource": [bucket["arn"], bucket["arn"] + "/*"],
                         "Condition": {"Bool": {"aws:SecureTransport": "false"}}}


@pytest.mark.parametrize("overrides", [(), ("keepImages=true",), ("imageBuilder=local",)])
def test_untagged_images_expire_and_no_rule_selects_a_tagged_one(run_stack, overrides):
    """Whoever builds, kept or not: the image the endpoint serves has its (immutable) tag, so it never expires."""
    plan = run_stack("sagemaker-t4", *overrides)
    repository = plan.one("aws:ecr/repository:Repository")
    lifecycle = plan.one("aws:ecr/lifecyclePolicy:LifecyclePolicy")
    assert lifecycle.inputs["repository"] == repository.state["name"]
    (rule,) = json.loads(lifecycle.inputs["policy"])["rules"]
    assert rule["selection"] == {"tagStatus": "untagged", "countType": "sinceImagePushed", "countUnit": "days",
                                 "countNumber": 1} and rule["action"] == {"type": "expire"}
    assert repository.inputs["imageTagMutability"] == "IMMUTABLE"


def test_repository_scans_on_push_has_immutable_tags_and_goes_with_destroy(run_stack):
    plan = run_stack("sagemaker-t4")
    repo = plan.one("aws:ecr/repository:Repository")
    assert repo.inputs["imageTagMutability"] == "IMMUTABLE"
    assert repo.inputs["imageScanningConfiguration"] == {"scanOnPush": True}
    assert repo.inputs["forceDelete"] is True and repo.options["retainOnDelete"] is False
    assert "name" not in repo.inputs and repo.options["importId"] == ""  # auto-named, never imported
    assert plan.outputs["billing_after_destroy_usd_per_month"] == 0.0
    kept = run_stack("sagemaker-t4", "keepImages=true")
    repo = kept.one("aws:ecr/repository:Repository")
    assert repo.inputs["forceDelete"] is False and repo.options["retainOnDelete"] is True
    assert kept.outputs["billing_after_destroy_usd_per_month"] > 0


def test_codebuild_builds_privileged_from_the_uploaded_context(run_stack):
    plan = run_stack("sagemaker-t4")
    project = plan.one("aws:codebuild/project:Project").inputs
    assert project["environment"]["privilegedMode"] is True
    variables = {v["name"]: v["value"] for v in project["environment"]["environmentVariables"]}
    tag = f"vllm-{catalog.PINS['vllm.sagemaker']}-sm75-{build_context.context_hash(catalog.PINS['sagemaker.base_image'])}"
    assert variables == {"BASE_IMAGE": catalog.PINS["sagemaker.base_image"],
                         "TARGET_REPO": plan.one("aws:ecr/repository:Repository").state["repositoryUrl"],
                         "TARGET_TAG": tag}
    archive = plan.one("aws:s3/bucketObjectv2:BucketObjectv2").inputs
    assert archive["key"] == f"context/{tag}.zip"
    bucket = plan.one("aws:s3/bucket:Bucket").state["bucket"]
    assert project["source"] == {"type": "S3", "location": f"{bucket}/context/{tag}.zip"}
    assert set(archive["source"]["archive"]) == {"Dockerfile", "buildspec.yml", "ecr-login.sh", "build-image.sh",
                                                 "pyproject.toml", "sm75_gate.py", "hf_token_entrypoint.py",
                                                 *[f"turing_clamp/{p.name}" for p in
                                                   (REPO / "turing" / "turing_clamp").glob("*.py")]}
    assert plan.one(COMMAND, "gemma4-t4-image-codebuild-run").inputs["triggers"] == [tag]


def test_a_changed_clamp_changes_the_tag_and_an_unchanged_one_does_not(tmp_path, monkeypatch):
    base = catalog.PINS["sagemaker.base_image"]
    before = build_context.context_hash(base)
    assert build_context.context_hash(base) == before
    copy = tmp_path / "turing"
    shutil.copytree(REPO / "turing", copy, ignore=shutil.ignore_patterns("results", "__pycache__", "*.egg-info"))
    monkeypatch.setattr(clamp, "CLAMP_DIR", copy)
    assert build_context.context_hash(base) == before
    (copy / "turing_clamp" / "policy.py").write_text((copy / "turing_clamp" / "policy.py").read_text() + "\n# edit\n")
    assert build_context.context_hash(base) != before
    assert build_context.context_hash(base.replace("v1.3", "v1.4")) != build_context.context_hash(base)


def test_outputs(run_stack):
    plan = run_stack("sagemaker-t4")
    out, endpoint = plan.outputs, plan.one("aws:sagemaker/endpoint:Endpoint").state["name"]
    assert out["target"] == {"endpoint_name": endpoint, "region": "us-east-2", "stack_tags": {
        catalog.SAGEMAKER_ORGANIZATION_TAG: "organization", catalog.SAGEMAKER_PROJECT_TAG: "gemma4-t4",
        catalog.SAGEMAKER_STACK_TAG: "sagemaker-t4"}}
    assert out["endpoint_name"] == endpoint and out["cloud"] == "sagemaker" and out["port"] == 8080
    assert out["cost_per_hour_usd"] == catalog.SAGEMAKER_PRICES["ml.g4dn.xlarge"].usd_per_hour
    assert out["connect_command"].startswith("aws sagemaker-runtime invoke-endpoint --region us-east-2 "
                                             f"--endpoint-name {endpoint} ")


def test_the_printed_request_is_one_shell_word_per_argument_whatever_the_served_name(run_stack):
    """A served name with a quote in it (one word, so vLLM takes it) still gives a command the shell runs as is."""
    plan = run_stack("sagemaker-t4", "servedModelName=team's-gemma")
    endpoint = plan.one("aws:sagemaker/endpoint:Endpoint").state["name"]
    argv = shlex.split(plan.outputs["connect_command"])
    assert argv[:12] == ["aws", "sagemaker-runtime", "invoke-endpoint", "--region", "us-east-2", "--endpoint-name",
                         endpoint, "--content-type", "application/json", "--cli-binary-format", "raw-in-base64-out",
                         "--body"]
    assert json.loads(argv[12])["model"] == "team's-gemma" and argv[13:] == ["/dev/stdout"]


def test_the_target_carries_the_stacks_aws_profile_to_the_operator_tools(run_stack, monkeypatch, tmp_path):
    from gemma4_t4.core.targets import TargetError

    assert "profile" not in run_stack("sagemaker-t4").outputs["target"]
    outputs = run_stack("sagemaker-t4", "aws:profile=ml-team").outputs
    assert outputs["target"]["profile"] == "ml-team"
    credentials = tmp_path / "credentials"
    credentials.write_text("[ml-team]\naws_access_key_id = testing\naws_secret_access_key = testing\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    for key in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    target = clouds.target_from_outputs("sagemaker-t4", outputs)
    assert target.profile == "ml-team" and target._session.profile_name == "ml-team"
    with pytest.raises(TargetError, match="'nobody-here'"):
        clouds.target_from_outputs("sagemaker-t4", {**outputs, "target": {**outputs["target"], "profile": "nobody-here"}})


def _with_token() -> dict:
    config = clouds.stack_config("sagemaker-t4", (), REPO)
    config["gemma4-t4:hfToken"] = {"secure": "AAABAGVuY3J5cHRlZA=="}
    return config


def test_hf_token_only_as_a_secret(run_stack, refused_stack, tmp_path):
    error, partial = refused_stack("sagemaker-t4", "hfToken=hf_plain")
    assert error.key == "gemma4-t4:hfToken" and "--secret" in str(error) and partial.resources == []
    plan = clouds.offline_plan("sagemaker-t4", _with_token())
    assert plan.one("aws:secretsmanager/secretVersion:SecretVersion").inputs["secretString"] == SECRET_PLACEHOLDER
    assert "AAABAGVuY3J5cHRlZA" not in json.dumps(plan.as_json())


def test_the_model_holds_the_tokens_secret_arn_and_the_role_reads_that_secret_only():
    """DescribeModel shows the container's environment: it holds the secret's ARN, never the token."""
    plan = clouds.offline_plan("sagemaker-t4", _with_token())
    secret = plan.one("aws:secretsmanager/secret:Secret")
    model = plan.one(MODEL)
    environment = model.inputs["primaryContainer"]["environment"]
    assert environment[catalog.HF_TOKEN_SECRET_ENV] == secret.state["arn"]
    assert "HF_TOKEN" not in environment and model.inputs["primaryContainer"] != SECRET_PLACEHOLDER
    version = plan.one("aws:secretsmanager/secretVersion:SecretVersion")
    assert version.inputs["secretId"] == secret.state["name"]  # the mock's id: the physical name
    # The value exists before the container that reads it starts; destroy leaves no secret in its recovery window.
    assert f"aws:secretsmanager/secretVersion:SecretVersion::{version.name}" in model.options["dependsOn"]
    assert secret.inputs["recoveryWindowInDays"] == 0
    statements = {s["Sid"]: s for s in _policy(plan, "gemma4-t4-execution-policy")["Statement"]}
    assert statements["HfToken"] == {"Sid": "HfToken", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue",
                                     "Resource": secret.state["arn"]}
    assert plan.outputs["hf_token_secret_arn"] == secret.state["arn"]
    without = clouds.offline_plan("sagemaker-t4", clouds.stack_config("sagemaker-t4", (), REPO))
    assert not without.find("aws:secretsmanager/secret:Secret") and "hf_token_secret_arn" not in without.outputs
    assert "HfToken" not in {s["Sid"] for s in _policy(without, "gemma4-t4-execution-policy")["Statement"]}


# --- what destroy leaves: the endpoint's log group is the stack's ---------------------------------------

LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"


def endpoint_logs(plan):
    """The endpoint's log group (named with its fleet's key: components/sagemaker/fleet.py)."""
    (group,) = [g for g in plan.find(LOG_GROUP) if g.name.startswith("gemma4-t4-endpoint-logs-")]
    return group


def test_the_endpoints_log_group_is_made_first_with_a_retention(run_stack):
    plan = run_stack("sagemaker-t4")
    endpoint = plan.one("aws:sagemaker/endpoint:Endpoint")
    group = endpoint_logs(plan)
    assert re.fullmatch(r"sagemaker-t4-endpoint-[0-9a-f]{8}", endpoint.inputs["name"])
    assert group.inputs["name"] == f"/aws/sagemaker/Endpoints/{endpoint.inputs['name']}"
    assert group.inputs["retentionInDays"] == 14.0
    assert f"{LOG_GROUP}::{group.name}" in endpoint.options["dependsOn"]
    assert group.options["retainOnDelete"] is False and "skipDestroy" not in group.inputs
    kept = endpoint_logs(run_stack("sagemaker-t4", "logRetentionDays=90"))
    assert kept.inputs["retentionInDays"] == 90.0


@pytest.mark.parametrize("overrides", [(), ("maxInstanceCount=2",)])
def test_an_endpoints_name_and_log_group_follow_its_configuration(run_stack, overrides):
    """Autoscaled or not (every new configuration is a new endpoint): one naming rule for the endpoint, its log
    group, the role's right to write there and the watch."""
    from gemma4_t4.components.sagemaker.names import endpoint_name

    plan = run_stack("sagemaker-t4", *overrides)
    config = plan.one(CONFIG).state["name"]
    name = plan.one("aws:sagemaker/endpoint:Endpoint").inputs["name"]
    assert name == endpoint_name("sagemaker-t4", config) and re.fullmatch(r"sagemaker-t4-endpoint-[0-9a-f]{8}", name)
    assert endpoint_logs(plan).inputs["name"] == f"/aws/sagemaker/Endpoints/{name}"
    logs = {s["Sid"]: s for s in _policy(plan, "gemma4-t4-execution-policy")["Statement"]}["EndpointLogs"]
    pattern = "arn:aws:logs:us-east-2:123456789012:log-group:/aws/sagemaker/Endpoints/sagemaker-t4-endpoint-????????"
    assert logs["Resource"] == [pattern, f"{pattern}:*"]
    assert endpoint_name("sagemaker-t4", config + "x") != name
    watch = plan.one(COMMAND, "gemma4-t4-endpoint-watch").inputs["environment"]["GEMMA4_T4_ENDPOINT_WATCH"]
    assert name.startswith(json.loads(watch)["name_prefix"]), "the watch lists the endpoint by its name's start"


@pytest.mark.parametrize("prefix", ["a" * 80, "team_a.sagemaker", "x--y-"])
def test_endpoint_names_are_names_sagemaker_takes(prefix):
    from gemma4_t4.components.sagemaker.names import endpoint_log_groups, endpoint_name, endpoint_name_start

    rule = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")  # CreateEndpoint's EndpointName pattern
    group = endpoint_log_groups(prefix).removeprefix("/aws/sagemaker/Endpoints/")
    names = {endpoint_name(prefix, config) for config in ("gemma4-t4-config-1234567", "a" * 80 + "-config")}
    assert len(names) == 2, "another configuration, another endpoint"
    for name in names:
        assert rule.fullmatch(name), name
        assert re.fullmatch(group.replace("?", "[0-9a-f]"), name) and name.startswith(
            endpoint_name_start(prefix))
        assert "-endpoint-" in name, "the stack's endpoints stay recognisable, however long the prefix"


REFUSED = [
    ("inferenceAmiVersion=al2-ami-sagemaker-inference-gpu-3-1", "gemma4-t4:inferenceAmiVersion",
     "inferenceAmiVersion al2023-ami-sagemaker-inference-gpu-4-1"),
    ("inferenceAmiVersion=al2-ami-sagemaker-inference-gpu-2", "gemma4-t4:inferenceAmiVersion", "gpu-4-1"),
    ("inferenceAmiVersion=some-ami", "gemma4-t4:inferenceAmiVersion", "gpu-4-1"),
    ("instanceType=ml.g6.xlarge", "gemma4-t4:instanceType", "allowNonT4Instance true"),
    ("startupHealthCheckTimeoutSeconds=30", "gemma4-t4:startupHealthCheckTimeoutSeconds", "1020"),
    ("startupHealthCheckTimeoutSeconds=4000", "gemma4-t4:startupHealthCheckTimeoutSeconds", "3600"),
    ("modelDataDownloadTimeoutSeconds=59", "gemma4-t4:modelDataDownloadTimeoutSeconds", "1800"),
    ("dtype=bfloat16", "gemma4-t4:dtype", "dtype float16"),
    ("model=google/gemma-4-26B-A4B-it-qat-w4a16-ct", "gemma4-t4:model", "allowModelOverflow true"),
    ("model=", "gemma4-t4:model", "gemma4-t4:model"),
    ("baseImage=", "gemma4-t4:baseImage", "baseImage 763104351884"),
    ("instanceCount=0", "gemma4-t4:instanceCount", "instanceCount 1"),
    # Configs that can never serve: a startup window shorter than a T4 needs ([sagemaker-t4-article]), a base whose
    # CUDA cannot be known, a region SageMaker does not have, a typo in the AWS provider's keys.
    ("startupHealthCheckTimeoutSeconds=120", "gemma4-t4:startupHealthCheckTimeoutSeconds", "1020"),
    # CloudWatch's retentions only (a retention it refuses would fail the `up` after the build).
    ("logRetentionDays=15", "gemma4-t4:logRetentionDays", "logRetentionDays 14"),
    ("logRetentionDays=0", "gemma4-t4:logRetentionDays", "logRetentionDays 1"),
    # An alarm address SNS would mail its confirmation to, refused before anything is made.
    ("ttlAlarmEmail=ops", "gemma4-t4:ttlAlarmEmail", "ttlAlarmEmail you@example.com"),
    # Partitions other than aws: the roles' ARNs are arn:aws:..., and the base lives in the aws partition.
    ("aws:region=cn-north-1", "aws:region", "aws:region us-east-2"),
    ("aws:region=us-gov-west-1", "aws:region", "aws:region us-east-2"),
    ("baseImage=763104351884.dkr.ecr.us-east-2.amazonaws.com/vllm@sha256:" + "a" * 64, "gemma4-t4:baseImageCuda",
     "baseImageCuda 13.0"),
    ("baseImage=763104351884.dkr.ecr.us-east-2.amazonaws.com/vllm:0.30.0-gpu-py312-cu130", "gemma4-t4:baseImageCuda",
     "baseImageCuda 13.0"),
    ("baseImageCuda=thirteen", "gemma4-t4:baseImageCuda", "baseImageCuda 13.0"),
    ("baseImageCuda=12.4", "gemma4-t4:baseImageCuda", "rm gemma4-t4:baseImageCuda"),
    ("aws:region=us-east-7", "aws:region", "aws:region us-east-2"),
    ("aws:region=eu-west", "aws:region", "aws:skipRegionValidation true"),
    ("aws:regoin=eu-west-1", "aws:regoin", "aws:region"),
    ("aws:assumeRols=[]", "aws:assumeRols", "aws:assumeRoles"),
]


@pytest.mark.parametrize("override,key,fix", REFUSED, ids=[r[0] for r in REFUSED])
def test_bad_input_is_refused_before_any_resource(refused_stack, override, key, fix):
    error, partial = refused_stack("sagemaker-t4", override)
    assert error.key == key and fix in str(error)
    assert partial.resources == []


def test_a_base_whose_cuda_is_stated_is_checked_against_the_host(run_stack, refused_stack):
    digest_only = "baseImage=763104351884.dkr.ecr.us-east-2.amazonaws.com/vllm@sha256:" + "a" * 64
    assert run_stack("sagemaker-t4", digest_only, "baseImageCuda=13.0").find(MODEL)
    error, _ = refused_stack("sagemaker-t4", digest_only, "baseImageCuda=13.0",
                             "inferenceAmiVersion=al2-ami-sagemaker-inference-gpu-3-1")
    assert error.key == "gemma4-t4:inferenceAmiVersion" and "needs CUDA 13.0" in str(error)


def test_every_region_sagemaker_has_plans_and_a_newer_one_may_skip_the_check(run_stack):
    assert run_stack("sagemaker-t4", "aws:region=eu-west-1").find(MODEL)
    assert run_stack("sagemaker-t4", "aws:region=xx-future-1", "aws:skipRegionValidation=true").find(MODEL)


def test_the_provider_keys_are_the_installed_providers():
    """The catalog's aws:* keys are exactly those the installed pulumi-aws reads (its config module)."""
    import importlib.util
    from pathlib import Path

    package = Path(importlib.util.find_spec("pulumi_aws").submodule_search_locations[0])
    text = (package / "config" / "vars.py").read_text()
    assert set(re.findall(r"__config__\.get\w*\('(\w+)'\)", text)) == catalog.PULUMI_AWS_CONFIG_KEYS


def test_cu130_image_on_a_driver_550_host_names_the_reason(refused_stack):
    error, _ = refused_stack("sagemaker-t4", "inferenceAmiVersion=al2-ami-sagemaker-inference-gpu-3-1")
    assert "driver 550 (CUDA 12.4)" in str(error) and "needs CUDA 13.0" in str(error)
    assert "CannotStartContainerError" in str(error)


def test_an_l4_instance_is_allowed_with_the_opt_in(run_stack):
    plan = run_stack("sagemaker-t4", "instanceType=ml.g6.xlarge", "allowNonT4Instance=true", "dtype=bfloat16")
    assert plan.outputs["cost_per_hour_usd"] == catalog.SAGEMAKER_PRICES["ml.g6.xlarge"].usd_per_hour


def test_project_defaults_match_the_catalog_pins():
    config = yaml.safe_load((REPO / "Pulumi.yaml").read_text())["config"]
    assert config["baseImage"]["default"] == catalog.PINS["sagemaker.base_image"]
    assert config["inferenceAmiVersion"]["default"] == catalog.PINS["sagemaker.ami"]
    assert f"vllm:{catalog.PINS['vllm.sagemaker']}-" in catalog.PINS["sagemaker.base_image"]


# --- the image build files -------------------------------------------------------------------


def test_dockerfile_is_hadolint_clean():
    result = run([require_tool("hadolint"), str(REPO / "turing" / "Dockerfile")])
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_keeps_the_entrypoint_and_gates_the_build():
    text = (REPO / "turing" / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    pinned = f"{catalog.PINS['sagemaker.base_image']}@{catalog.PINS['sagemaker.base_image_digest']}"
    assert lines[:2] == [f"ARG BASE_IMAGE={pinned}", "FROM ${BASE_IMAGE}"]
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", catalog.PINS["sagemaker.base_image_digest"]), "the full digest"
    # SM_VLLM_* need the base entrypoint: the token's wrapper execs it, with SageMaker's `serve`.
    assert [line for line in lines if line.startswith(("ENTRYPOINT", "CMD"))] == [
        f'ENTRYPOINT ["python3", "/opt/turing-clamp/hf_token_entrypoint.py", "{catalog.SAGEMAKER_BASE_ENTRYPOINT}"]',
        'CMD ["serve"]']
    assert f"RUN test -x {catalog.SAGEMAKER_BASE_ENTRYPOINT} && python3 -c \"import botocore\"" in lines
    for gate in ("-m turing_clamp check", "-m turing_clamp fit --strict", "sm75_gate.py ${SM75_GATE_ARGS}"):
        assert gate in text


def test_buildspec_has_the_phases_a_push_needs():
    spec = yaml.safe_load((REPO / "turing" / "buildspec.yml").read_text())
    assert spec["version"] == 0.2
    phases = spec["phases"]
    assert list(phases) == ["pre_build", "build", "post_build"]
    logins = [c for c in phases["pre_build"]["commands"] if "ecr-login.sh" in c]
    assert logins == ['bash ecr-login.sh "$base_region" "$base_registry"',
                      'bash ecr-login.sh "$AWS_REGION" "${TARGET_REPO%%/*}"']
    assert phases["build"]["commands"] == ['bash build-image.sh "$BASE_IMAGE" "$TARGET_REPO:$TARGET_TAG"']
    assert spec["env"]["variables"]["BUILDX_NO_DEFAULT_ATTESTATIONS"] == "1"
    assert {"ecr-login.sh", "build-image.sh"} <= set(build_context.build_context_files()), "in the build's archive"
    post = "\n".join(phases["post_build"]["commands"])
    assert 'docker push "$TARGET_REPO:$TARGET_TAG"' in post
    assert all(phases[p].get("on-failure") == "ABORT" for p in phases)


def fake_tools(tmp_path, aws_failures: list[str], buildx: bool = True) -> dict[str, str]:
    """`aws` answering each call with the next failure of AWS_FAILURES (then a password), and `docker`
    recording its arguments (with or without buildx)."""
    calls = tmp_path / "calls"
    (tmp_path / "failures").write_text("\n".join(aws_failures) + ("\n" if aws_failures else ""))
    (tmp_path / "aws").write_text(f"""#!/usr/bin/env bash
echo "aws $*" >> {calls}
failure=$(head -n 1 {tmp_path}/failures); sed -i 1d {tmp_path}/failures
if [ -n "$failure" ]; then echo "$failure" >&2; exit 254; fi
echo password
""")
    (tmp_path / "docker").write_text(f"""#!/usr/bin/env bash
echo "docker $*" >> {calls}
if [ "$1 $2" = "buildx version" ]; then exit {0 if buildx else 1}; fi
cat > /dev/null
""")
    for tool in ("aws", "docker"):
        (tmp_path / tool).chmod(0o755)
    return {"PATH": f"{tmp_path}:/usr/bin:/bin"}


# The AWS CLI's answer to a role refused the ECR token (botocore's ClientError text, as in a published
# CodeBuild log of 2024-02-19 whose build role lacked ecr:GetAuthorizationToken).
TOKEN_REFUSED = ("An error occurred (AccessDeniedException) when calling the GetAuthorizationToken operation: User: "
                 "arn:aws:sts::123456789012:assumed-role/build-role/AWSCodeBuild-1 is not authorized to perform: "
                 "ecr:GetAuthorizationToken on resource: * because no identity-based policy allows the "
                 "ecr:GetAuthorizationToken action")


def test_the_ecr_login_is_retried_while_the_role_propagates(tmp_path):
    env = fake_tools(tmp_path, [TOKEN_REFUSED, TOKEN_REFUSED])
    result = run(["bash", str(REPO / "turing" / "ecr-login.sh"), "us-east-2", "1.dkr.ecr.us-east-2.amazonaws.com",
                  "6", "0"], env=env)
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls.count("aws ecr get-login-password --region us-east-2") == 3
    assert calls[-1] == "docker login --username AWS --password-stdin 1.dkr.ecr.us-east-2.amazonaws.com"
    assert "refused (try 2 of 6)" in result.stderr


def test_the_ecr_login_gives_up_after_its_tries_and_at_once_on_another_error(tmp_path):
    env = fake_tools(tmp_path, [TOKEN_REFUSED] * 3)
    result = run(["bash", str(REPO / "turing" / "ecr-login.sh"), "us-east-2", "r", "3", "0"], env=env)
    # Its own status for "refused for permissions": the build step restarts the build only for that one.
    assert result.returncode == codebuild_run.LOGIN_DENIED_STATUS and "still refused after 3 tries" in result.stderr
    other = tmp_path / "other"
    other.mkdir()
    env = fake_tools(other, ["Could not connect to the endpoint URL: \"https://api.ecr.us-east-2.amazonaws.com/\""])
    result = run(["bash", str(REPO / "turing" / "ecr-login.sh"), "us-east-2", "r", "3", "0"], env=env)
    assert result.returncode == 1 and "not retried" in result.stderr
    assert (other / "calls").read_text().count("get-login-password") == 1


@pytest.mark.parametrize("buildx", [True, False])
def test_the_image_is_built_without_attestations(tmp_path, buildx):
    env = fake_tools(tmp_path, [], buildx=buildx)
    result = run(["bash", str(REPO / "turing" / "build-image.sh"), "base@sha256:1", "repo:tag"], env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    build = (tmp_path / "calls").read_text().splitlines()[-1]
    if buildx:
        assert build == ("docker buildx build --provenance=false --sbom=false --output type=docker "
                         "--build-arg BASE_IMAGE=base@sha256:1 --tag repo:tag .")
    else:
        assert build == "docker build --build-arg BASE_IMAGE=base@sha256:1 --tag repo:tag ."


# --- the build step as the stack wires it ---------------------------------------------------------


def _build_env(plan) -> dict:
    return plan.one(COMMAND, "gemma4-t4-image-codebuild-run").inputs["environment"]


def test_build_step_runs_by_its_name_after_the_role_policy(run_stack):
    plan = run_stack("sagemaker-t4")
    build = plan.one(COMMAND, "gemma4-t4-image-codebuild-run")
    # Run by its name, with the interpreter found when it runs (tests/components/test_steps.py).
    assert build.inputs["create"] == step_command(codebuild_run.NAME)
    assert f"{POLICY}::gemma4-t4-image-build-role-policy" in build.options["dependsOn"]
    request = json.loads(_build_env(plan)["GEMMA4_T4_BUILD"])
    policy = plan.find(POLICY, "gemma4-t4-image-build-role-policy")[0].state
    role = plan.find("aws:iam/role:Role", "gemma4-t4-image-build-role")[0].state
    assert request["policy_name"] == policy["name"] and request["role_name"] == role["name"]
    assert request["base_digest_pin"] == catalog.PINS["sagemaker.base_image_digest"]
    assert request["repository"] == plan.one("aws:ecr/repository:Repository").state["name"]


def test_build_step_gets_only_the_region_when_the_stack_sets_nothing_else(run_stack):
    env = _build_env(run_stack("sagemaker-t4"))
    assert {k: v for k, v in env.items() if k != "GEMMA4_T4_BUILD"} == {"AWS_REGION": "us-east-2"}


def test_build_step_gets_the_providers_profile_keys_role_and_endpoints(run_stack):
    settings = ("sagemaker-t4", "aws:region=eu-west-1", "aws:profile=gemma",
                'aws:assumeRoles=[{"roleArn": "arn:aws:iam::210987654321:role/deployer", "sessionName": "ci", '
                '"externalId": "x"}]', 'aws:endpoints=[{"ecr": "http://127.0.0.1:5000"}]',
                'aws:sharedCredentialsFiles=["/home/me/.aws/creds"]')
    env = _build_env(run_stack(*settings))
    assert env["AWS_REGION"] == "eu-west-1" and env["AWS_PROFILE"] == "gemma"
    assert "AWS_ACCESS_KEY_ID" not in env
    # Static keys make the environment a secret in the state, as the provider keeps them.
    assert _build_env(run_stack(*settings, "aws:accessKey=AKIA0", "aws:secretKey=s3cret")) == SECRET_PLACEHOLDER
    assert json.loads(env["GEMMA4_T4_ASSUME_ROLES"]) == [
        {"roleArn": "arn:aws:iam::210987654321:role/deployer", "sessionName": "ci", "externalId": "x"}]
    assert env["AWS_ENDPOINT_URL_ECR"] == "http://127.0.0.1:5000"
    assert env["AWS_SHARED_CREDENTIALS_FILE"] == "/home/me/.aws/creds"


def test_no_aws_cli_and_no_shell_script_left():
    assert not (REPO / "components" / "scripts" / "codebuild-run.sh").exists()
    step = (REPO / "components" / "sagemaker" / "steps" / "build.py").read_text()
    # No process is started at all (the AWS CLI included; a printed `aws ...` line for the user is only text).
    assert not any(call in step for call in ("subprocess", "os.system", "os.exec", "os.spawn", "os.popen"))


def test_digest_is_not_exported_from_the_buildspec():
    spec = yaml.safe_load((REPO / "turing" / "buildspec.yml").read_text())
    assert "exported-variables" not in spec["env"]


# --- keepImages: the kept repository is found again ---------------------------------------------------


def test_kept_images_live_in_a_fixed_repository_that_survives_destroy(run_stack):
    repo = run_stack("sagemaker-t4", "keepImages=true").one("aws:ecr/repository:Repository")
    assert repo.inputs["name"] == "gemma4-t4/sagemaker-t4"
    assert repo.options["retainOnDelete"] is True and repo.inputs["forceDelete"] is False


def test_the_next_up_adopts_the_kept_repository(run_stack):
    """After a destroy kept it, the repository exists but is not in the state: the program imports
    it (a no-op once it is in the state), so its image is found by tag and not rebuilt."""
    world = {"sagemaker": SageMakerWorld(repositories={"gemma4-t4/sagemaker-t4"})}
    plan = run_stack("sagemaker-t4", "keepImages=true", world=world)
    repo = plan.one("aws:ecr/repository:Repository")
    assert repo.options["importId"] == repo.state["name"] == "gemma4-t4/sagemaker-t4"
    request = json.loads(_build_env(plan)["GEMMA4_T4_BUILD"])
    assert request["repository"] == "gemma4-t4/sagemaker-t4"


def test_a_kept_repository_of_a_stack_of_the_same_name_in_another_project_is_refused(run_stack, refused_stack):
    """Two projects' stacks named sagemaker-t4 in one account: the kept repository gemma4-t4/sagemaker-t4 that the
    other one's tags name is not adopted (its destroy, keepImages and images would be shared); this stack's own is."""
    theirs = StackScope("sagemaker-t4", "another-project", "organization").tags()
    error, _ = refused_stack("sagemaker-t4", "keepImages=true", world={"sagemaker": SageMakerWorld(
        repositories={"gemma4-t4/sagemaker-t4": {"app": "gemma4-t4", **theirs}})})
    assert "keepImages" in str(error) and "organization/another-project/sagemaker-t4" in str(error)
    assert "namePrefix" in str(error)
    ours = StackScope("sagemaker-t4", "gemma4-t4", "organization").tags()
    repo = run_stack("sagemaker-t4", "keepImages=true", world={"sagemaker": SageMakerWorld(
        repositories={"gemma4-t4/sagemaker-t4": {"app": "gemma4-t4", **ours}})}).one("aws:ecr/repository:Repository")
    assert repo.options["importId"] == "gemma4-t4/sagemaker-t4" and ours.items() <= repo.inputs["tags"].items()


def test_a_missing_kept_repository_is_created(run_stack):
    """getRepository answers a missing repository with the provider's error (provider_answers cites it)."""
    repo = run_stack("sagemaker-t4", "keepImages=true").one("aws:ecr/repository:Repository")
    assert repo.inputs["name"] == "gemma4-t4/sagemaker-t4" and repo.options["importId"] == ""


def test_a_repository_lookup_denied_is_refused_not_read_as_absent(refused_stack):
    error, partial = refused_stack("sagemaker-t4", "keepImages=true", world={"sagemaker": SageMakerWorld(denied=True)})
    assert "could not read whether the kept ECR repository gemma4-t4/sagemaker-t4 exists" in error.problem
    assert "AccessDeniedException" in error.problem and "ecr:DescribeRepositories" in error.fix
    assert not any(r.type == "aws:ecr/repository:Repository" for r in partial.resources)


def test_the_providers_answer_for_a_missing_repository_is_read_as_absent():
    failure = engine_failure(answers.GET_REPOSITORY, answers.repository_not_found("gemma4-t4/x"))
    assert answers.is_repository_not_found(failure, "gemma4-t4/x")
    assert not answers.is_repository_not_found(failure, "gemma4-t4/y")
    denied = engine_failure(answers.GET_REPOSITORY,
                                    answers.repository_access_denied("gemma4-t4/x", "123456789012", "us-east-2"))
    assert not answers.is_repository_not_found(denied, "gemma4-t4/x")


# --- the gate's verdicts on the torch builds it can meet ------------------------------------------------


def _gate():
    sys.path.insert(0, str(REPO / "turing"))
    try:
        import sm75_gate
    finally:
        sys.path.pop(0)
    return sm75_gate


def _torch(version: str, cuda: str | None, arch: str = "") -> types.SimpleNamespace:
    return types.SimpleNamespace(__version__=version, version=types.SimpleNamespace(cuda=cuda),
                                 _C=types.SimpleNamespace(_cuda_getArchFlags=lambda: arch))


@pytest.mark.parametrize("torch,allow,ok,words", [
    (_torch("2.13.0+cu130", "13.0", "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"), False, True, "arch: sm_75 sm_80"),
    (_torch("2.13.0+cu130", "13.0", "sm_80 sm_86 sm_90"), False, False, "has no sm_75 kernels"),
    (_torch("2.13.0+cu130", "13.0", "sm_80 sm_86 sm_90"), True, False, "cannot run on a Tesla T4"),
    (_torch("2.13.0+cpu", None), False, False, "NOT CHECKED"),
    (_torch("2.13.0+cpu", None), True, True, "allowed: --allow-cpu-torch"),
])
def test_gate_verdicts(torch, allow, ok, words):
    verdict, message = _gate().verdict(torch, allow)
    assert verdict is ok and words in message


# --- cost beside the serving hours ---------------------------------------------------------------------


def test_cost_counts_each_build_and_the_image_in_ecr_while_up():
    """13 CodeBuild minutes per build ([sagemaker-t4-article]'s phase times, 780 s) and 8.34 GiB in ECR, at catalog prices."""
    items = {i.name: (i.usd, i.per) for i in clouds.estimate("sagemaker-t4", (), REPO).extras}
    assert items == {"image build (CodeBuild)": (0.13, "build"), "image in ECR while the stack is up": (0.9, "month")}


def test_cost_counts_the_base_pulled_from_another_region(run_stack):
    items = {i.name: (i.usd, i.per) for i in clouds.estimate("sagemaker-t4", ("aws:region=us-west-2",), REPO).extras}
    assert items["base image pulled from us-east-2 into us-west-2"] == (0.16, "build")
    assert len(items) == 3


# --- aws:endpoints reach the local steps' boto3 clients ---------------------------------------------------


def test_aws_endpoints_keys_are_the_providers_and_reach_the_botocore_client(monkeypatch):
    """Each mapped key is one the installed pulumi-aws takes under aws:endpoints, and the variable it becomes is
    the one botocore itself reads for that client (servicequotas is SERVICE_QUOTAS, logs CLOUDWATCH_LOGS)."""
    import importlib.util
    from pathlib import Path

    import boto3

    from gemma4_t4.clouds.sagemaker.cloud import build_environment

    package = Path(importlib.util.find_spec("pulumi_aws").submodule_search_locations[0])
    provider_keys = set(re.findall(r"def (\w+)\(self\) -> Optional\[_builtins\.str\]", (
        package / "config" / "outputs.py").read_text()))
    for key, client in catalog.PULUMI_AWS_ENDPOINT_CLIENTS.items():
        assert key in provider_keys, key
        url = f"http://127.0.0.1:4566/{key}"
        env = build_environment({"aws:endpoints": json.dumps([{key: url}])})
        with monkeypatch.context() as patch:
            for variable in [v for v in os.environ if v.startswith("AWS_ENDPOINT_URL")]:
                patch.delenv(variable)
            for variable, value in env.items():
                patch.setenv(variable, value)
            made = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing",
                                         region_name="us-east-2").client(client)
            assert made.meta.endpoint_url == url, (key, env)
    assert build_environment({"aws:endpoints": '[{"ec2": "http://127.0.0.1:1"}]'}) == {}, "no local step calls EC2"


def test_turning_keep_images_off_with_the_kept_repository_there_is_refused_with_the_manual_step(refused_stack,
                                                                                               run_stack):
    """keepImages true -> false: the kept repository (retained, never deleted by Pulumi) would stay in the account
    outside the stack, billing; the same for one an earlier destroy kept."""
    world = {"sagemaker": SageMakerWorld(repositories={"gemma4-t4/sagemaker-t4"})}
    error, partial = refused_stack("sagemaker-t4", world=world)
    assert error.key == "gemma4-t4:keepImages" and "gemma4-t4/sagemaker-t4 is in the account" in error.problem
    assert "keepImages true" in error.fix
    assert ("aws ecr delete-repository --repository-name gemma4-t4/sagemaker-t4 --force --region us-east-2"
            in error.fix)
    assert partial.resources == []
    assert run_stack("sagemaker-t4", "keepImages=true", world=world).find(MODEL), "kept on: adopted"
    # An account that may not describe repositories: keepImages off needs no lookup, so nothing is refused.
    assert run_stack("sagemaker-t4", world={"sagemaker": SageMakerWorld(denied=True)}).find(MODEL)


def test_the_plans_stand_ins_give_arns_as_aws_returns_them(run_stack):
    """IAM ARNs name no region; an SQS queue's is arn:aws:sqs:REGION:ACCOUNT:NAME; a log group's is
    ...:log-group:NAME as the AWS provider passes it on (":*" trimmed); a bucket's names neither region nor account
    (sources beside standins._ARNS). A policy written from a stand-in's ARN is then the one AWS would be given."""
    plan = run_stack("sagemaker-t4")
    role = plan.one("aws:iam/role:Role", "gemma4-t4-ttl").state
    assert role["arn"] == f"arn:aws:iam::123456789012:role/{role['name']}"
    queue = plan.one("aws:sqs/queue:Queue", "gemma4-t4-ttl-dlq").state
    assert queue["arn"] == f"arn:aws:sqs:us-east-2:123456789012:{queue['name']}"
    topic = plan.one("aws:sns/topic:Topic").state
    assert topic["arn"] == f"arn:aws:sns:us-east-2:123456789012:{topic['name']}"
    alarm = plan.one("aws:cloudwatch/metricAlarm:MetricAlarm").state
    assert alarm["arn"] == f"arn:aws:cloudwatch:us-east-2:123456789012:alarm:{alarm['name']}"
    (group,) = [g.state for g in plan.find("aws:cloudwatch/logGroup:LogGroup")
                if g.name.startswith("gemma4-t4-endpoint-logs-")]
    assert group["arn"] == f"arn:aws:logs:us-east-2:123456789012:log-group:{group['name']}"
    bucket = plan.one("aws:s3/bucket:Bucket").state
    assert bucket["arn"] == f"arn:aws:s3:::{bucket['bucket']}"
