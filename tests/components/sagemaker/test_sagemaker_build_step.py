"""The image build step (components/sagemaker/steps/build.py) against moto's server on loopback,
run as `pulumi up` runs it: a subprocess with the environment the stack's Command hands it.

Budget: ~15 s for the module (one moto server; each run is a Python process of ~1 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from aws_standin import ACCOUNT, ACCOUNT_LIMIT_MESSAGE, REGION, CodeBuildWorker, Outcome, manifest
from conftest import REPO

from gemma4_t4 import catalog
from gemma4_t4.components.sagemaker import image_build
from gemma4_t4.components.sagemaker.steps import build as codebuild_run

pytestmark = pytest.mark.standin

BASE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.3"
TAG = "vllm-0.30.0-sm75-0123456789abcdef"
FAST = {"POLL_S": "0.05", "RETRY_WAIT_S": "0", "POLICY_WAIT_S": "0.5"}


@pytest.fixture
def account(moto, monkeypatch):
    """A reset account with what the stack creates before the build step: the repository, the
    base image registry, the build role and its policy, the project."""
    moto.reset()
    worker = CodeBuildWorker(outcomes=[Outcome(push=("gemma4-t4-repo", TAG))])
    worker.install(monkeypatch)
    ecr = moto.client("ecr")
    ecr.create_repository(repositoryName="gemma4-t4-repo", imageTagMutability="IMMUTABLE")
    ecr.create_repository(repositoryName="vllm")
    ecr.put_image(repositoryName="vllm", imageManifest=manifest("base"), imageTag=BASE.rsplit(":", 1)[1])
    iam = moto.client("iam")
    iam.create_role(RoleName="build-role", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "codebuild.amazonaws.com"}, "Action": "sts:AssumeRole"}]}))
    iam.put_role_policy(RoleName="build-role", PolicyName="build-role-policy", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ecr:PutImage", "Resource": "*"}]}))
    moto.client("codebuild").create_project(
        name="gemma4-t4-build", source={"type": "S3", "location": "bucket/context/x.zip"},
        artifacts={"type": "NO_ARTIFACTS"}, serviceRole=f"arn:aws:iam::{ACCOUNT}:role/build-role",
        environment={"type": "LINUX_CONTAINER", "image": image_build.CODEBUILD_IMAGE,
                     "computeType": "BUILD_GENERAL1_MEDIUM", "privilegedMode": True})
    return worker


def request(**changes) -> str:
    fields = {"project": "gemma4-t4-build", "repository": "gemma4-t4-repo", "tag": TAG,
              "source_location": f"bucket/context/{TAG}.zip", "base_image": BASE, "base_digest_pin": "",
              "role_name": "build-role", "policy_name": "build-role-policy"}
    return json.dumps({**fields, **changes})


def step(moto, request_json: str, **env) -> subprocess.CompletedProcess:
    """The step as the Command runs it: the module, from the project directory, this environment only."""
    environment = {"PATH": os.environ["PATH"], **moto.env(), **FAST, codebuild_run.SETTINGS_ENV: request_json, **env}
    return subprocess.run([sys.executable, "-m", codebuild_run.MODULE], cwd=REPO, env=environment,
                          capture_output=True, text=True, timeout=60)


def base_digest(moto) -> str:
    """The base tag's digest, as the registry (moto) reports it."""
    images = moto.client("ecr").describe_images(repositoryName="vllm", imageIds=[{"imageTag": BASE.rsplit(":", 1)[1]}])
    return images["imageDetails"][0]["imageDigest"]


def test_a_build_prints_the_digest_read_from_ecr_by_tag(moto, account):
    result = step(moto, request())
    assert result.returncode == 0, result.stderr
    pushed = moto.client("ecr").describe_images(repositoryName="gemma4-t4-repo", imageIds=[{"imageTag": TAG}])
    assert result.stdout == pushed["imageDetails"][0]["imageDigest"] + "\n"
    (started,) = account.started
    assert started["sourceLocationOverride"] == f"bucket/context/{TAG}.zip"
    # CodeBuild builds from the base pinned by the digest the tag resolved to.
    assert started["environmentVariablesOverride"] == [
        {"name": "BASE_IMAGE", "value": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/vllm@{base_digest(moto)}",
         "type": "PLAINTEXT"}]
    assert "started gemma4-t4-build:" in result.stderr and "built gemma4-t4-repo:" in result.stderr


def test_an_image_already_built_is_reused_without_a_build(moto, account):
    assert step(moto, request()).returncode == 0
    again = step(moto, request())
    assert again.returncode == 0 and "already built" in again.stderr
    assert len(account.started) == 1


def test_a_failed_build_fails_with_its_id_phase_message_and_log_link(moto, account):
    account.outcomes[:] = [Outcome(status="FAILED", phase="BUILD", message="Error while executing command: "
                                   "docker build ... Reason: exit status 1")]
    result = step(moto, request())
    assert result.returncode == 1 and result.stdout == ""
    build_id = account.started and moto.client("codebuild").list_builds_for_project(
        projectName="gemma4-t4-build")["ids"][0]
    assert f"build {build_id} FAILED in phase BUILD: CLIENT_ERROR: Error while executing command" in result.stderr
    assert "log: https://" in result.stderr


# CodeBuild's phase contexts for a role whose permissions have not propagated (Build.phases[].contexts):
# DOWNLOAD_SOURCE as published in awslabs/aws-refarch-cross-account-pipeline#5 (2018-10-18) and
# aws-samples/aws-simple-streaming-webapp#8 (2022-05-27); PRE_BUILD's command failure as CodeBuild words it
# ("Phase context status code: COMMAND_EXECUTION_ERROR Message: Error while executing command: aws ecr
# get-login-password ... Reason: exit status 1", a published CodeBuild log of 2024-02-19 whose role lacked
# ecr:GetAuthorizationToken), here for the buildspec's login command: exit status 3 is ecr-login.sh's own for a
# login still refused for permissions after its retries, 1 for any other failure.
S3_REFUSED = ("AccessDenied: Access Denied status code: 403, request id: D18C063FBD, host id: q8QSdgeMXd9GzqiHAn9aR7e"
              "+Qh5TNjYfRjbXxQP73FZbZWjFj78IXQ= for primary source and source version arn:aws:s3:::bucket/context/x.zip")
LOGIN_REFUSED = ('Error while executing command: bash ecr-login.sh "$base_region" "$base_registry". '
                 f"Reason: exit status {codebuild_run.LOGIN_DENIED_STATUS}")
LOGIN_FAILED = 'Error while executing command: bash ecr-login.sh "$AWS_REGION" "${TARGET_REPO%%/*}". Reason: exit status 1'


def test_a_build_refused_before_the_policy_propagated_is_started_again(moto, account):
    account.outcomes[:] = [Outcome(status="FAILED", phase="DOWNLOAD_SOURCE", message=S3_REFUSED),
                           Outcome(push=("gemma4-t4-repo", TAG))]
    result = step(moto, request())
    assert result.returncode == 0, result.stderr
    assert len(account.started) == 2 and "permissions may not have propagated" in result.stderr


def test_an_ecr_login_refused_in_pre_build_is_started_again(moto, account):
    account.outcomes[:] = [Outcome(status="FAILED", phase="PRE_BUILD", status_code="COMMAND_EXECUTION_ERROR",
                                   message=LOGIN_REFUSED), Outcome(push=("gemma4-t4-repo", TAG))]
    result = step(moto, request())
    assert result.returncode == 0, result.stderr
    assert len(account.started) == 2 and "was refused in PRE_BUILD" in result.stderr


def test_an_ecr_login_that_failed_for_another_reason_is_not_started_again(moto, account):
    """ecr-login.sh exits 1 for anything but a permission refusal (a registry that does not answer, a docker
    login that fails): a new build would fail the same way."""
    account.outcomes[:] = [Outcome(status="FAILED", phase="PRE_BUILD", status_code="COMMAND_EXECUTION_ERROR",
                                   message=LOGIN_FAILED), Outcome(push=("gemma4-t4-repo", TAG))]
    result = step(moto, request())
    assert result.returncode == 1 and len(account.started) == 1
    assert "FAILED in phase PRE_BUILD: COMMAND_EXECUTION_ERROR: Error while executing command: bash ecr-login.sh" \
        in result.stderr


def test_another_pre_build_failure_is_not_retried(moto, account):
    account.outcomes[:] = [Outcome(status="FAILED", phase="PRE_BUILD", status_code="COMMAND_EXECUTION_ERROR",
                                   message="Error while executing command: base_registry=x. Reason: exit status 1")]
    result = step(moto, request())
    assert result.returncode == 1 and len(account.started) == 1
    assert "FAILED in phase PRE_BUILD: COMMAND_EXECUTION_ERROR: Error while executing command" in result.stderr


def test_a_limit_of_0_builds_asks_for_a_support_case_and_offers_the_local_builder(moto, account):
    """A new account's real limit: 0, whatever Service Quotas shows, which a quota request cannot raise."""
    account.refuse_start = ACCOUNT_LIMIT_MESSAGE
    result = step(moto, request())
    assert result.returncode == 1 and result.stdout == "" and account.started == []
    assert (f"CodeBuild refused the build (AccountLimitExceededException: {ACCOUNT_LIMIT_MESSAGE}): CodeBuild lets "
            f"this account run no Linux/Medium build at all in {REGION}") in result.stderr
    assert "a quota request cannot raise it" in result.stderr and "--desired-value" not in result.stderr
    # The Support case's text: the service, the region, the account, the limit.
    assert "Service limit increase > CodeBuild" in result.stderr
    assert (f"\"Account {ACCOUNT}, region {REGION}: StartBuild answers AccountLimitExceededException "
            f"'{ACCOUNT_LIMIT_MESSAGE}'. Please raise the concurrent builds limit for Linux/Medium "
            "(BUILD_GENERAL1_MEDIUM) from 0 to at least 1.\"") in result.stderr
    assert result.stderr.rstrip().endswith("pulumi config set gemma4-t4:imageBuilder local && pulumi up")


def test_a_full_build_queue_names_the_quota_and_does_not_ask_for_support(moto, account):
    # source: the message as published with a limit of 1 (awslabs/landing-zone-accelerator-on-aws#361, 2023-12-18).
    account.refuse_start = "Cannot have more than 1 builds in queue for the account"
    result = step(moto, request())
    assert result.returncode == 1 and account.started == []
    assert "builds of this size are all running or queued" in result.stderr
    assert "quota code L-2DC20C30" in result.stderr and "Support" not in result.stderr
    assert "imageBuilder" not in result.stderr


@pytest.mark.parametrize("media_type", ["application/vnd.oci.image.manifest.v1+json",
                                        "application/vnd.oci.image.index.v1+json"])
def test_an_oci_manifest_is_refused_after_the_push_with_the_fix(moto, account, media_type):
    account.outcomes[:] = [Outcome(push=("gemma4-t4-repo", TAG), media_type=media_type)]
    result = step(moto, request())
    assert result.returncode == 1 and result.stdout == ""
    assert (f"gemma4-t4-repo:{TAG} was pushed as {media_type}; SageMaker's CreateModel accepts only "
            "application/vnd.docker.distribution.manifest.v2+json") in result.stderr
    assert (f"aws ecr batch-delete-image --repository-name gemma4-t4-repo --image-ids imageTag={TAG} "
            "--region us-east-2") in result.stderr
    # The next up finds the image kept under the immutable tag, and refuses it again rather than reusing it.
    again = step(moto, request())
    assert again.returncode == 1 and "was pushed as" in again.stderr and len(account.started) == 1


def test_a_build_of_the_tag_left_running_by_an_interrupted_up_is_waited_for(moto, account):
    """An `up` interrupted while its build ran: the next one joins that build instead of starting another,
    which would fail pushing the same immutable tag."""
    account.outcomes[:] = [Outcome(push=("gemma4-t4-repo", TAG), polls=4)]
    left = moto.client("codebuild").start_build(projectName="gemma4-t4-build",
                                                 sourceLocationOverride=f"bucket/context/{TAG}.zip")["build"]
    result = step(moto, request())
    assert result.returncode == 0, result.stderr
    assert len(account.started) == 1, "no second build"
    assert f"build {left['id']} of this tag is already running" in result.stderr
    pushed = moto.client("ecr").describe_images(repositoryName="gemma4-t4-repo", imageIds=[{"imageTag": TAG}])
    assert result.stdout == pushed["imageDetails"][0]["imageDigest"] + "\n"


def test_a_running_build_of_another_context_is_not_joined(moto, account):
    moto.client("codebuild").start_build(projectName="gemma4-t4-build",
                                         sourceLocationOverride="bucket/context/other.zip")
    result = step(moto, request())
    assert result.returncode == 0 and len(account.started) == 2 and "already running" not in result.stderr


def test_a_build_that_keeps_being_refused_stops_after_three_tries(moto, account):
    account.outcomes[:] = [Outcome(status="FAILED", phase="DOWNLOAD_SOURCE", message="AccessDenied")]
    result = step(moto, request())
    assert result.returncode == 1 and len(account.started) == 3
    assert "FAILED in phase DOWNLOAD_SOURCE: CLIENT_ERROR: AccessDenied" in result.stderr


def test_no_build_starts_without_the_role_policy(moto, account):
    moto.client("iam").delete_role_policy(RoleName="build-role", PolicyName="build-role-policy")
    result = step(moto, request())
    assert result.returncode == 1 and account.started == []
    assert "has no policy build-role-policy" in result.stderr and "AccessDenied" in result.stderr


def test_a_success_without_the_image_in_ecr_says_so(moto, account):
    account.outcomes[:] = [Outcome(push=None)]
    result = step(moto, request())
    assert result.returncode == 1 and f"has no image tagged {TAG}" in result.stderr


def test_the_base_must_match_its_pinned_digest(moto, account):
    assert step(moto, request(base_digest_pin=base_digest(moto)[:15])).returncode == 0


def test_a_republished_base_tag_is_refused_with_the_pin_to_accept_it(moto, account):
    result = step(moto, request(base_digest_pin="sha256:48e605e3"))
    assert result.returncode == 1 and account.started == []
    assert f"is now {base_digest(moto)}, not the pinned sha256:48e605e3" in result.stderr
    assert f"pulumi config set gemma4-t4:baseImage {BASE}@{base_digest(moto)}" in result.stderr


def test_a_base_given_by_digest_is_used_as_given(moto, account):
    pinned = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/vllm@{base_digest(moto)}"
    assert step(moto, request(base_image=pinned, base_digest_pin=base_digest(moto))).returncode == 0
    assert account.started[0]["environmentVariablesOverride"][0]["value"] == pinned


OTHER_ACCOUNT = "210987654321"


def image_in_other_account(moto) -> tuple[dict, str]:
    """Credentials of a role in another account, whose repository already holds the image."""
    keys = moto.client("sts").assume_role(RoleArn=f"arn:aws:iam::{OTHER_ACCOUNT}:role/deployer",
                                          RoleSessionName="test")["Credentials"]
    ecr = moto.client("ecr", key=keys["AccessKeyId"], secret=keys["SecretAccessKey"], token=keys["SessionToken"])
    ecr.create_repository(repositoryName="gemma4-t4-repo")
    digest = ecr.put_image(repositoryName="gemma4-t4-repo", imageManifest=manifest(TAG), imageTag=TAG)
    return keys, digest["image"]["imageId"]["imageDigest"]


def test_the_build_runs_as_the_assumed_role_of_the_stack_config(moto, account):
    """aws:assumeRoles: the image is looked for (and built) in the role's account; moto keeps one
    state per account and maps the assumed role's keys to it."""
    _, digest = image_in_other_account(moto)
    roles = json.dumps([{"roleArn": f"arn:aws:iam::{OTHER_ACCOUNT}:role/deployer", "sessionName": "gemma4"}])
    result = step(moto, request(), GEMMA4_T4_ASSUME_ROLES=roles)
    assert result.returncode == 0 and result.stdout == digest + "\n" and account.started == [], result.stderr
    assert "already built" in result.stderr


def test_the_build_uses_the_profile_of_the_stack_config(moto, account, tmp_path):
    """aws:profile: the credentials come from the profile, not from the environment's default keys."""
    keys, digest = image_in_other_account(moto)
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[gemma]\naws_access_key_id = {keys['AccessKeyId']}\naws_secret_access_key = "
                           f"{keys['SecretAccessKey']}\naws_session_token = {keys['SessionToken']}\n")
    env = {k: v for k, v in moto.env().items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    result = subprocess.run([sys.executable, "-m", codebuild_run.MODULE], cwd=REPO, timeout=60,
                            env={"PATH": os.environ["PATH"], **env, **FAST, "AWS_PROFILE": "gemma",
                                 "AWS_SHARED_CREDENTIALS_FILE": str(credentials),
                                 codebuild_run.SETTINGS_ENV: request()}, capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == digest + "\n" and account.started == [], result.stderr
    # Without the profile, the default account's keys build there.
    assert step(moto, request()).returncode == 0 and len(account.started) == 1


def test_missing_settings_say_who_runs_the_step(moto):
    result = subprocess.run([sys.executable, "-m", codebuild_run.MODULE], cwd=REPO, timeout=60,
                            env={"PATH": os.environ["PATH"]}, capture_output=True, text=True)
    assert result.returncode == 2 and "run by `pulumi up`" in result.stderr


def test_no_region_is_an_error_naming_the_key(moto, account):
    env = {k: v for k, v in moto.env().items() if k != "AWS_REGION"}
    result = subprocess.run([sys.executable, "-m", codebuild_run.MODULE], cwd=REPO, timeout=60,
                            env={"PATH": os.environ["PATH"], **env, **FAST, codebuild_run.SETTINGS_ENV: request()},
                            capture_output=True, text=True)
    assert result.returncode == 1 and "pulumi config set aws:region" in result.stderr


def test_the_catalog_pins_the_default_base_by_digest():
    assert image_build.base_digest_pin(catalog.PINS["sagemaker.base_image"]) == catalog.PINS[
        "sagemaker.base_image_digest"]
    assert image_build.base_digest_pin(f"{BASE}@sha256:{'e' * 64}") == f"sha256:{'e' * 64}"
    assert image_build.base_digest_pin(BASE.replace("v1.3", "v1.4")) == ""
