"""The image build step, run by `pulumi up` (a pulumi_command local Command) with boto3.

It runs with the AWS settings of the stack's Pulumi AWS provider (aws:region, aws:profile,
aws:accessKey/secretKey/token, aws:assumeRole(s), aws:endpoints), handed over in its environment
by components/sagemaker/image_build.py, so the build is looked for in the account the resources are made
in; no AWS CLI is needed. Prints the image digest on stdout; everything else goes to stderr.

1. An image with this tag already in the repository (immutable tags: same context, same image)
   is reused, not rebuilt; a build of this tag still running (an `up` interrupted while it waited)
   is waited for instead of starting a second one that would fail to push the same immutable tag.
2. The base image is resolved to its digest and checked against the pin; CodeBuild builds from
   exactly that digest.
3. The build role's inline policy must exist before the build starts, and a build refused in its
   first phases for lack of permissions (IAM is eventually consistent) is started again.
   A refusal of the ECR login in PRE_BUILD for permissions (turing/ecr-login.sh's exit status 3, after its own
   retries) is too; any other failed login is not.
4. On success the digest and the manifest type are read from ECR by tag: SageMaker's CreateModel takes
   only a Docker v2 schema 2 manifest, so anything else (an OCI manifest or index) is refused here, with
   the fix, instead of at CreateModel after the build. A failed build exits 1 with its id, the phase
   that failed, its message and the log link, which fails `pulumi up`.
5. StartBuild refused for the account's build limit (AccountLimitExceededException): "0 builds in queue"
   is a limit only an AWS Support case raises (the case's text is printed), and imageBuilder local is
   suggested; a full queue (N > 0) names the quota.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from gemma4_t4 import catalog

from ...step import StepFailed, StepRequest, run_step, say_as, step_command

MODULE = "gemma4_t4.components.sagemaker.steps.build"
NAME = "sagemaker-build"  # its name in components/step.py's STEPS, which the state records
ASSUME_ROLES_ENV = "GEMMA4_T4_ASSUME_ROLES"  # JSON list: the provider's aws:assumeRole(s), in order
EARLY_PHASES = ("SUBMITTED", "QUEUED", "PROVISIONING", "DOWNLOAD_SOURCE")
# The buildspec's ECR logins (turing/ecr-login.sh): a PRE_BUILD failure of one is a refused login; the
# phase context names the command only ("COMMAND_EXECUTION_ERROR: Error while executing command: ...").
LOGIN_COMMAND = "ecr-login.sh"
# ecr-login.sh's exit status when GetAuthorizationToken is still refused for permissions after its retries.
LOGIN_DENIED_STATUS = 3
PERMISSION_WORDS = ("AccessDenied", "not authorized", "Access Denied", "403")
FAILED = ("FAILED", "FAULT", "TIMED_OUT", "STOPPED")
MANIFEST_TYPES = ["application/vnd.docker.distribution.manifest.v2+json",
                  "application/vnd.docker.distribution.manifest.list.v2+json",
                  "application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.image.index.v1+json"]


class BuildError(StepFailed):
    """The build did not produce an image: the message says which build, where and why."""


@dataclass(frozen=True)
class BuildRequest(StepRequest):
    ENV = "GEMMA4_T4_BUILD"

    project: str
    repository: str
    tag: str
    source_location: str
    base_image: str
    base_digest_pin: str  # "" = no pin; else the digest (or its recorded leading part) the base must have
    role_name: str
    policy_name: str


@dataclass(frozen=True)
class Timing:
    timeout_s: float = 5400
    poll_s: float = 20
    policy_wait_s: float = 120
    retry_wait_s: float = 30
    permission_retries = 3

    @classmethod
    def from_env(cls, env: dict[str, str]) -> Timing:
        names = {"timeout_s": "TIMEOUT_S", "poll_s": "POLL_S", "policy_wait_s": "POLICY_WAIT_S",
                 "retry_wait_s": "RETRY_WAIT_S"}
        return cls(**{field: float(env[var]) for field, var in names.items() if var in env})


say = say_as("codebuild-run")


def session_from_env(env: dict[str, str]) -> boto3.session.Session:
    """The provider's credentials: boto3 reads the keys, profile, region and endpoint URLs from the
    environment as the provider does; then each role of aws:assumeRole(s) is assumed in turn."""
    session = boto3.session.Session(profile_name=env.get("AWS_PROFILE") or None,
                                    region_name=env.get("AWS_REGION") or None)
    for role in json.loads(env.get(ASSUME_ROLES_ENV) or "[]"):
        kwargs: dict[str, Any] = {"RoleArn": role["roleArn"],
                                  "RoleSessionName": role.get("sessionName") or "gemma4-t4-image-build"}
        if role.get("externalId"):
            kwargs["ExternalId"] = role["externalId"]
        credentials = session.client("sts").assume_role(**kwargs)["Credentials"]
        session = boto3.session.Session(aws_access_key_id=credentials["AccessKeyId"],
                                        aws_secret_access_key=credentials["SecretAccessKey"],
                                        aws_session_token=credentials["SessionToken"],
                                        region_name=session.region_name)
    return session


def existing_digest(ecr, repository: str, tag: str) -> str | None:
    """The digest of REPOSITORY:TAG, refused unless its manifest is one SageMaker can run."""
    try:
        images = ecr.describe_images(repositoryName=repository, imageIds=[{"imageTag": tag}])["imageDetails"]
    except ecr.exceptions.ImageNotFoundException:
        return None
    if not images:
        return None
    media_type = images[0].get("imageManifestMediaType", "")
    if media_type != catalog.SAGEMAKER_MANIFEST_TYPE:
        raise BuildError(
            f"{repository}:{tag} was pushed as {media_type or 'an unknown manifest type'}; SageMaker's CreateModel "
            f"accepts only {catalog.SAGEMAKER_MANIFEST_TYPE} (it answers \"Unsupported manifest media type\"). "
            "The build pushes one only with provenance and SBOM attestations off (turing/build-image.sh); "
            "delete this image (" + shlex.join(["aws", "ecr", "batch-delete-image", "--repository-name", repository,
                                                "--image-ids", f"imageTag={tag}", "--region", ecr.meta.region_name])
            + ") and run `pulumi up` again")
    return images[0]["imageDigest"]


def split_image(image: str) -> tuple[str, str, str, str]:
    """(account, region, repository, tag or digest) of ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO[:TAG][@DIGEST]."""
    registry, _, path = image.partition("/")
    account, _, _, region, *_ = registry.split(".")
    name, _, digest = path.partition("@")
    repository, _, tag = name.partition(":")
    return account, region, repository, digest or tag


def pinned_base(session, image: str, pin: str) -> str:
    """REGISTRY/REPO@sha256:... for the base image; refused unless its digest matches the pin."""
    account, region, repository, reference = split_image(image)
    if reference.startswith("sha256:"):
        digest = reference
    else:
        ecr = session.client("ecr", region_name=region)
        found = ecr.batch_get_image(registryId=account, repositoryName=repository,
                                    imageIds=[{"imageTag": reference}], acceptedMediaTypes=MANIFEST_TYPES)
        if not found["images"]:
            failure = (found.get("failures") or [{}])[0]
            raise BuildError(f"base image {image} not found ({failure.get('failureCode', 'no image')}: "
                             f"{failure.get('failureReason', '')})")
        digest = found["images"][0]["imageId"]["imageDigest"]
    if pin and not digest.startswith(pin):
        raise BuildError(f"base image {image} is now {digest}, not the pinned {pin}: the tag was republished. "
                         f"Review the new image, then pin it: pulumi config set gemma4-t4:baseImage "
                         f"{image.split('@')[0]}@{digest}")
    return f"{image.split('/')[0]}/{repository}@{digest}"


def account_id(session) -> str:
    """The account the build runs in, for a Support case; "YOUR-ACCOUNT-ID" if STS will not say."""
    try:
        return session.client("sts").get_caller_identity()["Account"]
    except (BotoCoreError, ClientError):
        return "YOUR-ACCOUNT-ID"


def wait_for_policy(iam, request: BuildRequest, timing: Timing) -> None:
    deadline = time.monotonic() + timing.policy_wait_s
    while True:
        try:
            iam.get_role_policy(RoleName=request.role_name, PolicyName=request.policy_name)
            return
        except iam.exceptions.NoSuchEntityException:
            if time.monotonic() > deadline:
                raise BuildError(f"the build role {request.role_name} has no policy {request.policy_name} after "
                                 f"{timing.policy_wait_s:.0f}s: the build would fail with AccessDenied") from None
            time.sleep(timing.poll_s)


def log_link(build: dict[str, Any], region: str) -> str:
    link = (build.get("logs") or {}).get("deepLink")
    if link:
        return link
    project, _, run = build["id"].partition(":")
    return (f"https://{region}.console.aws.amazon.com/codesuite/codebuild/projects/{project}/build/"
            f"{project}%3A{run}/log?region={region}")


def failed_phase(build: dict[str, Any]) -> tuple[str, str]:
    """(phase type, its messages) of the phase that failed, else the current phase and ""."""
    for phase in build.get("phases") or []:
        if phase.get("phaseStatus") in FAILED:
            messages = [": ".join(filter(None, (c.get("statusCode"), c.get("message"))))
                        for c in phase.get("contexts") or []]
            return phase["phaseType"], "; ".join(filter(None, messages))
    return build.get("currentPhase", "unknown"), ""


def build_in_progress(codebuild, request: BuildRequest) -> dict[str, Any] | None:
    """A build of this project from this context (so of this tag) still running: an earlier `up` started it
    and was interrupted. Only the newest builds are looked at; an older one has timed out."""
    ids = codebuild.list_builds_for_project(projectName=request.project, sortOrder="DESCENDING")["ids"][:20]
    builds = codebuild.batch_get_builds(ids=ids)["builds"] if ids else []
    return next((b for b in builds if b.get("buildStatus") == "IN_PROGRESS"
                 and (b.get("source") or {}).get("location") == request.source_location), None)


def start(codebuild, request: BuildRequest, base: str, region: str, account: Callable[[], str]) -> dict[str, Any]:
    try:
        return codebuild.start_build(
            projectName=request.project, sourceLocationOverride=request.source_location,
            environmentVariablesOverride=[{"name": "BASE_IMAGE", "value": base, "type": "PLAINTEXT"}])["build"]
    except ClientError as err:
        if err.response["Error"]["Code"] != catalog.CODEBUILD_ACCOUNT_LIMIT_ERROR:
            raise
        raise BuildError(account_limit_refusal(err.response["Error"]["Message"], region, account())) from None


def account_limit_refusal(message: str, region: str, account: str) -> str:
    """What StartBuild's AccountLimitExceededException means, and its fix. "0 builds in queue" is a limit of 0
    that Service Quotas does not show (it shows AWS's default, and refuses a request that is not above it):
    only AWS Support raises it; meanwhile the image can be built on this machine (imageBuilder local)."""
    quota = catalog.CODEBUILD_BUILD_QUOTAS[catalog.CODEBUILD_COMPUTE_TYPE]
    environment = quota.rsplit(" for ", 1)[-1].removesuffix(" environment")
    found = catalog.CODEBUILD_QUEUE_LIMIT.search(message)
    refused = f"CodeBuild refused the build ({catalog.CODEBUILD_ACCOUNT_LIMIT_ERROR}: {message})"
    if found is None or int(found.group(1)) > 0:
        code = catalog.CODEBUILD_BUILD_QUOTA_CODES[catalog.CODEBUILD_COMPUTE_TYPE]
        return (f"{refused}: the account's builds of this size are all running or queued. Wait for them, or raise "
                f"\"{quota}\" (Service Quotas > AWS CodeBuild, quota code {code}) above its current value in "
                f"{region}, then `pulumi up` again")
    return (f"{refused}: CodeBuild lets this account run no {environment} build at all in {region}. This limit is not "
            f"the \"{quota}\" value Service Quotas shows (CodeBuild sets new accounts' real limits itself), and a "
            "quota request cannot raise it (Service Quotas refuses a value not greater than the one it shows). "
            f"Fix: open an AWS Support case (Support Center > Create case > Service limit increase > CodeBuild) "
            f"saying: \"Account {account}, region {region}: StartBuild answers {catalog.CODEBUILD_ACCOUNT_LIMIT_ERROR} "
            f"'{message}'. Please raise the concurrent builds limit for {environment} "
            f"({catalog.CODEBUILD_COMPUTE_TYPE}) from 0 to at least 1.\" Then `pulumi up` again. Or, without "
            "CodeBuild: build the image on this machine with buildah, podman or docker (an 8 GB base is pulled, "
            "the 8.3 GB image pushed from here): pulumi config set gemma4-t4:imageBuilder local && pulumi up")


def refused_for_permissions(phase: str, message: str) -> bool:
    """A failure IAM propagation explains: AccessDenied while fetching the source (DOWNLOAD_SOURCE and before),
    or an ECR login in PRE_BUILD still refused for permissions after its own retries (turing/ecr-login.sh exits
    LOGIN_DENIED_STATUS then, and 1 for any other failure, which a restart would not mend)."""
    if phase in EARLY_PHASES:
        return any(word in message for word in PERMISSION_WORDS)
    return phase == "PRE_BUILD" and LOGIN_COMMAND in message and f"Reason: exit status {LOGIN_DENIED_STATUS}" in message


def run_build(codebuild, request: BuildRequest, base: str, timing: Timing, region: str,
              account: Callable[[], str] = lambda: "YOUR-ACCOUNT-ID") -> dict[str, Any]:
    """Start the build (or join one of this tag still running) and wait for it; a permission failure in the
    early phases is retried."""
    running = build_in_progress(codebuild, request)
    for attempt in range(1, timing.permission_retries + 1):
        if running is not None:
            build, running = running, None
            say(f"build {build['id']} of this tag is already running (an earlier `up` started it): waiting for it "
                f"instead of starting another; log: {log_link(build, region)}")
        else:
            build = start(codebuild, request, base, region, account)
            say(f"started {build['id']} (attempt {attempt}); log: {log_link(build, region)}")
        started = time.monotonic()
        while build.get("buildStatus", "IN_PROGRESS") == "IN_PROGRESS":
            if time.monotonic() - started > timing.timeout_s:
                raise BuildError(f"build {build['id']} still running after {timing.timeout_s:.0f}s in phase "
                                 f"{build.get('currentPhase')}; log: {log_link(build, region)}")
            time.sleep(timing.poll_s)
            build = codebuild.batch_get_builds(ids=[build["id"]])["builds"][0]
        if build["buildStatus"] == "SUCCEEDED":
            return build
        phase, message = failed_phase(build)
        refused = refused_for_permissions(phase, message)
        if not refused or attempt == timing.permission_retries:
            raise BuildError(f"build {build['id']} {build['buildStatus']} in phase {phase}"
                             f"{': ' + message if message else ''}; log: {log_link(build, region)}")
        say(f"build {build['id']} was refused in {phase} ({message}): the role's permissions may not have "
            f"propagated yet; starting it again in {timing.retry_wait_s:.0f}s")
        time.sleep(timing.retry_wait_s)
    raise AssertionError("unreachable: the last attempt returns or raises")


SETTINGS_ENV = BuildRequest.ENV


def command() -> str:
    """The Command's `create`: this step by its NAME (components/step.py: the line every step records)."""
    return step_command(NAME)


def main(env: Mapping[str, str] | None = None) -> int:
    return run_step(BuildRequest, build, say, env)


def build(request: BuildRequest, env: dict[str, str]) -> int:
    """The image digest on stdout: the one already built with this tag, else the one CodeBuild builds now."""
    timing = Timing.from_env(env)
    started = time.monotonic()
    try:
        session = session_from_env(env)
        region = session.region_name
        if not region:
            raise BuildError("no AWS region: pulumi config set aws:region us-east-2")
        ecr = session.client("ecr")
        digest = existing_digest(ecr, request.repository, request.tag)
        if digest:
            say(f"{request.repository}:{request.tag} already built ({digest}): not rebuilding")
            print(digest)
            return 0
        base = pinned_base(session, request.base_image, request.base_digest_pin)
        say(f"base image: {base}")
        wait_for_policy(session.client("iam"), request, timing)
        done = run_build(session.client("codebuild"), request, base, timing, region, lambda: account_id(session))
        digest = existing_digest(ecr, request.repository, request.tag)
        if not digest:
            raise BuildError(f"build {done['id']} succeeded but {request.repository} has no image tagged "
                             f"{request.tag}; log: {log_link(done, region)}")
    except (BotoCoreError, ClientError) as err:
        say(f"AWS: {err}")
        return 1
    say(f"built {request.repository}:{request.tag} @ {digest} in {time.monotonic() - started:.0f}s")
    print(digest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
