"""AWS on loopback for the tests: moto's server, plus the few stand-ins for what moto does not do.

Every call the code under test makes goes over HTTP to moto's server (ThreadedMotoServer on
127.0.0.1, a free port), signed by botocore as for AWS. What moto does not emulate is filled in
here, in its own process, on its backends:
- CodeBuild: moto records projects and builds but never builds (every build "SUCCEEDED" at the
  first look, overrides dropped). `CodeBuildWorker` plays the build: it records the overrides,
  keeps the build IN_PROGRESS for a few polls, then pushes the image into moto's ECR or fails in
  a chosen phase with CodeBuild's context message.
- ECR: moto keeps every repository in the caller's account (registryId is ignored), so the AWS
  base image registry is a repository of the caller's account here.
- Service Quotas: moto knows only the VPC quotas; `add_quotas` adds SageMaker's and CodeBuild's
  (default values, and applied values where a test sets them).
- EventBridge Scheduler: moto stores schedules but never fires them; `fire_schedule` does what
  the service does at the schedule's time for a universal target: the target's SDK call with the
  schedule's role (its inline policy must allow it), the retry policy, then the dead-letter queue.
- The component's local run (pulumi-command's `command:local:run` invoke): `MotoWorld` answers it by running the
  step's main in this process against this server, as the provider runs the command (`set_endpoint_created`
  dates an endpoint's CreationTime, which moto sets to the moment of the create).
"""

from __future__ import annotations

import fnmatch
import importlib
import io
import json
import os
import re
import threading
import urllib.request
from collections.abc import Callable, Mapping
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from unittest import mock

import boto3
from botocore.exceptions import ClientError
from moto.server import ThreadedMotoServer

from gemma4_t4.clouds.sagemaker.standins import AwsWorld
from gemma4_t4.components import provider_answers as answers
from gemma4_t4.components.step import STEPS
from gemma4_t4.core.mock_answers import ProviderInvokeError

ACCOUNT = "123456789012"  # moto's default account
REGION = "us-east-2"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


class MotoAws:
    def __init__(self) -> None:
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.url = f"http://{host}:{port}"

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/moto-api/reset", method="POST"), timeout=10)

    def env(self, **extra: str) -> dict[str, str]:
        """The environment a process needs to reach this server as AWS (and nothing else)."""
        return {"AWS_ENDPOINT_URL": self.url, "AWS_REGION": REGION, **CREDENTIALS,
                "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", **extra}

    def client(self, service: str, **kwargs: Any):
        session = boto3.session.Session(aws_access_key_id=kwargs.pop("key", "testing"),
                                        aws_secret_access_key=kwargs.pop("secret", "testing"),
                                        aws_session_token=kwargs.pop("token", None), region_name=REGION)
        return session.client(service, endpoint_url=self.url, **kwargs)

    def stop(self) -> None:
        self.server.stop()


def _backend(service: str, account: str = ACCOUNT, region: str = REGION):
    from moto.backends import get_backend

    return get_backend(service)[account][region]


# --- CodeBuild ------------------------------------------------------------------------------------


def manifest(tag: str, media_type: str = "application/vnd.docker.distribution.manifest.v2+json") -> str:
    """A small image manifest of MEDIA_TYPE (ECR reports it as imageManifestMediaType)."""
    return json.dumps({"schemaVersion": 2, "mediaType": media_type,
                       "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": 2,
                                  "digest": "sha256:" + "c" * 64}, "layers": [], "annotations": {"tag": tag}})


@dataclass
class Outcome:
    """What one build does: after ``polls`` looks, succeed (pushing ``push`` = (repository, tag), as a manifest of
    ``media_type``) or fail in ``phase`` with a phase context of ``status_code`` and ``message``."""
    status: str = "SUCCEEDED"
    phase: str = ""
    message: str = ""
    polls: int = 2
    push: tuple[str, str] | None = None
    media_type: str = "application/vnd.docker.distribution.manifest.v2+json"
    status_code: str = "CLIENT_ERROR"


# StartBuild's answer to an account whose build quota is used up or 0 (CodeBuild API reference, StartBuild
# errors: AccountLimitExceededException, "An AWS service limit was exceeded for the calling AWS account";
# the message as published in aws-ia/terraform-aws-control_tower_account_factory#179, 2022-06-01).
ACCOUNT_LIMIT_MESSAGE = "Cannot have more than 0 builds in queue for the account"


def _account_limit_exceeded(message: str) -> Exception:
    from moto.core.exceptions import JsonRESTError

    return JsonRESTError("AccountLimitExceededException", message)


@dataclass
class CodeBuildWorker:
    outcomes: list[Outcome] = field(default_factory=list)
    started: list[dict[str, Any]] = field(default_factory=list)  # each start_build request as sent
    refuse_start: str | None = None  # StartBuild answers AccountLimitExceededException with this message
    _polls: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def install(self, monkeypatch) -> None:
        from moto.codebuild.models import CodeBuildBackend
        from moto.codebuild.responses import CodeBuildResponse

        worker, original_start = self, CodeBuildResponse.start_build

        def start_build(response_self):
            request = json.loads(response_self.body)
            if worker.refuse_start is not None:
                raise _account_limit_exceeded(worker.refuse_start)
            worker.started.append(request)
            result = original_start(response_self)
            # The build as CodeBuild describes it (API reference, Build): its source at the override's location.
            metadata = response_self.codebuild_backend.build_metadata[request["projectName"]].build_metadata
            if request.get("sourceLocationOverride"):
                metadata["source"] = {"type": "S3", "location": request["sourceLocationOverride"]}
            return result

        def batch_get_builds(backend_self, ids):
            builds = [b for history in backend_self.build_metadata_history.values() for b in history if b["id"] in ids]
            for build in builds:
                worker._advance(backend_self, build)
            return builds

        monkeypatch.setattr(CodeBuildResponse, "start_build", start_build)
        monkeypatch.setattr(CodeBuildBackend, "batch_get_builds", batch_get_builds)

    def _advance(self, backend, build: dict[str, Any]) -> None:
        with self._lock:
            polls = self._polls[build["id"]] = self._polls.get(build["id"], 0) + 1
            index = list(self._polls).index(build["id"])
        outcome = self.outcomes[min(index, len(self.outcomes) - 1)]
        if build["buildStatus"] != "IN_PROGRESS" or polls < outcome.polls:
            build["currentPhase"] = "BUILD"
            return
        phases = ["SUBMITTED", "QUEUED", "PROVISIONING", "DOWNLOAD_SOURCE", "INSTALL", "PRE_BUILD", "BUILD",
                  "POST_BUILD"]
        build["phases"] = []
        for phase in phases:
            if outcome.status != "SUCCEEDED" and phase == outcome.phase:
                build["phases"].append({"phaseType": phase, "phaseStatus": outcome.status, "contexts": [
                    {"statusCode": outcome.status_code, "message": outcome.message}]})
                break
            build["phases"].append({"phaseType": phase, "phaseStatus": "SUCCEEDED"})
        if outcome.status == "SUCCEEDED" and outcome.push:
            repository, tag = outcome.push
            _backend("ecr", backend.account_id, backend.region_name).put_image(
                repository, manifest(tag, outcome.media_type), tag)
        build["buildStatus"] = outcome.status
        build["currentPhase"] = "COMPLETED"
        build["buildComplete"] = True


# --- Service Quotas -----------------------------------------------------------------------------------


def add_quotas(monkeypatch, service: str, service_name: str, defaults: dict[str, float], applied: dict[str, float],
               codes: dict[str, str] | None = None) -> dict[str, str]:
    """SERVICE's quotas in moto: {quota name: default} as AWS lists them (ListAWSDefaultServiceQuotas), and
    {quota name: applied value} for the account (GetServiceQuota; a quota with none applied answers
    NoSuchResourceException, as AWS does). Returns {name: quota code}: CODES where the catalog records the
    real ones, else made-up codes. Several services may be added; each call chains to the previous."""
    from moto.servicequotas.exceptions import NoSuchResource
    from moto.servicequotas.models import ServiceQuotasBackend

    codes = codes or {name: f"L-STANDIN{i:02d}" for i, name in enumerate(defaults)}
    entries = {codes[name]: {"ServiceCode": service, "ServiceName": service_name, "QuotaCode": codes[name],
                             "QuotaName": name, "Value": value, "Unit": "None", "Adjustable": True,
                             "GlobalQuota": False} for name, value in defaults.items()}
    original_list, original_get = (ServiceQuotasBackend.list_aws_default_service_quotas,
                                   ServiceQuotasBackend.get_service_quota)

    def list_defaults(self, service_code):
        return list(entries.values()) if service_code == service else original_list(self, service_code)

    def get_quota(self, service_code, quota_code):
        if service_code != service:
            return original_get(self, service_code, quota_code)
        name = next((n for n, c in codes.items() if c == quota_code), None)
        if name not in applied:
            # source: Service Quotas API reference, GetServiceQuota errors: NoSuchResourceException (a quota
            # with no applied value); moto renders it.
            raise NoSuchResource()
        return {**entries[quota_code], "Value": applied[name]}

    monkeypatch.setattr(ServiceQuotasBackend, "list_aws_default_service_quotas", list_defaults)
    monkeypatch.setattr(ServiceQuotasBackend, "get_service_quota", get_quota)
    return codes


def add_sagemaker_quotas(monkeypatch, defaults: dict[str, float], applied: dict[str, float]) -> dict[str, str]:
    """SageMaker's endpoint-usage quotas (made-up codes)."""
    return add_quotas(monkeypatch, "sagemaker", "Amazon SageMaker", defaults, applied)


def add_codebuild_quota(monkeypatch, default: float, applied: float | None) -> str:
    """CodeBuild's quota for the project's compute type, by its real name and code (catalog/aws.py);
    APPLIED None: nothing applied to the account. Returns the quota's name."""
    from gemma4_t4 import catalog

    name = catalog.CODEBUILD_BUILD_QUOTAS[catalog.CODEBUILD_COMPUTE_TYPE]
    add_quotas(monkeypatch, "codebuild", "AWS CodeBuild", {name: default}, {} if applied is None else {name: applied},
               codes={name: catalog.CODEBUILD_BUILD_QUOTA_CODES[catalog.CODEBUILD_COMPUTE_TYPE]})
    return name


# --- SageMaker's endpoint quota at CreateEndpoint -------------------------------------------------------


def enforce_endpoint_quota(monkeypatch, limits: dict[str, int]) -> None:
    """CreateEndpoint refuses instances beyond the account's "TYPE for endpoint usage" (moto creates anything),
    counting those the account's endpoints not Failed hold. The answer as SageMaker gives it: error code
    ResourceLimitExceeded (awsdocs/amazon-sagemaker-developer-guide#70, 2020-03-25), the message as published in
    aws-samples/aws-genai-llm-chatbot#244 (2023-11-27)."""
    from moto.sagemaker.exceptions import SagemakerClientError
    from moto.sagemaker.models import SageMakerModelBackend

    class ResourceLimitExceeded(SagemakerClientError):
        code = "ResourceLimitExceeded"

    original = SageMakerModelBackend.create_endpoint

    def create_endpoint(self, endpoint_name, endpoint_config_name, tags):
        config = self.describe_endpoint_config(endpoint_config_name)
        for variant in config["ProductionVariants"]:
            kind, delta = variant["InstanceType"], int(variant["InitialInstanceCount"])
            used = sum(int(v.get("CurrentInstanceCount") or v.get("InitialInstanceCount") or 0)
                       for e in self.endpoints.values() if e.endpoint_status != "Failed"
                       for v in self.describe_endpoint_config(e.endpoint_config_name)["ProductionVariants"]
                       if v["InstanceType"] == kind)
            limit = limits.get(kind, 0)
            if used + delta > limit:
                raise ResourceLimitExceeded(
                    f"The account-level service limit '{kind} for endpoint usage' is {limit} Instances, with current "
                    f"utilization of {used} Instances and a request delta of {delta} Instances. Please use AWS "
                    "Service Quotas to request an increase for this quota.")
        return original(self, endpoint_name, endpoint_config_name, tags)

    monkeypatch.setattr(SageMakerModelBackend, "create_endpoint", create_endpoint)


# --- EventBridge Scheduler ----------------------------------------------------------------------------


def set_endpoint_status(name: str, status: str) -> None:
    _backend("sagemaker").endpoints[name].endpoint_status = status


def set_endpoint_created(name: str, when: datetime) -> None:
    """The endpoint's CreationTime, as if CreateEndpoint had been called at WHEN."""
    _backend("sagemaker").endpoints[name].creation_time = when


# --- pulumi-command's local run -----------------------------------------------------------------------------


class _Both(io.StringIO):
    """One of the command's streams, also written to BOTH as it comes (the provider's stdout-and-stderr buffer)."""

    def __init__(self, both: io.StringIO) -> None:
        super().__init__()
        self.both = both

    def write(self, text: str) -> int:
        self.both.write(text)
        return super().write(text)


@dataclass
class MotoWorld(AwsWorld):
    """The offline plan's AWS world with the local run answered as pulumi-command answers it: the command (one of
    the component's steps, `python -m gemma4_t4.step NAME`) run, its main here in this process, with the environment the
    provider gives it (this process's, moto's, then the invoke's own) and this server as AWS."""

    aws: MotoAws | None = None

    def run_local_command(self, args: Mapping[str, Any]) -> dict[str, Any]:
        assert self.aws is not None, "MotoWorld(aws=moto)"
        command = str(args["command"])
        name = re.fullmatch(r".* -m gemma4_t4\.step ([\w-]+)", command)
        assert name, f"not a step's command: {command}"
        env = {**os.environ, **self.aws.env(), **(args.get("environment") or {})}
        both = io.StringIO()
        stdout, stderr = _Both(both), _Both(both)
        with mock.patch.dict(os.environ, env, clear=True), redirect_stdout(stdout), redirect_stderr(stderr):
            status = importlib.import_module(STEPS[name.group(1)]).main(env)
        if status != 0:
            # source: pulumi-command v1.2.1 commandOutputs.go `run` (the command's error, with its stdout and stderr
            # as written), through pulumi-go-provider and the engine (answers.run_failure); the text is the step's.
            raise ProviderInvokeError(answers.run_failure(command, status, both.getvalue()))
        # source: pulumi-command v1.2.1 runController.go Run.Invoke (answers.run_answer); the text is the step's.
        return answers.run_answer(dict(args), stdout.getvalue(), stderr.getvalue())


def allows(policy: dict[str, Any], action: str, resource: str) -> bool:
    for statement in policy["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        if statement["Effect"] == "Allow" and any(fnmatch.fnmatch(action, a) for a in actions) \
                and any(fnmatch.fnmatch(resource, r) for r in resources):
            return True
    return False


@dataclass
class Firing:
    attempts: int
    delivered: bool
    errors: list[str]


def fire_schedule(aws: MotoAws, name: str, resource_arn: Callable[[dict], str],
                  before_attempt: Callable[[int], None] = lambda attempt: None, max_attempts: int = 5) -> Firing:
    """Fire schedule NAME now, as Scheduler does with a universal target (aws-sdk:SERVICE:ACTION):
    the call with the target's Input as the request, allowed only by the schedule role's inline
    policy on ``resource_arn(request)``; failures retried up to the retry policy (capped at
    ``max_attempts`` here), then the event goes to the dead-letter queue."""
    schedule = aws.client("scheduler").get_schedule(Name=name)
    target = schedule["Target"]
    service, action = re.fullmatch(r"arn:aws:scheduler:::aws-sdk:(\w+):(\w+)", target["Arn"]).groups()
    request = json.loads(target["Input"])
    iam = aws.client("iam")
    role = target["RoleArn"].rsplit("/", 1)[-1]
    policies = [iam.get_role_policy(RoleName=role, PolicyName=p)["PolicyDocument"]
                for p in iam.list_role_policies(RoleName=role)["PolicyNames"]]
    iam_action = f"{service}:{action[0].upper()}{action[1:]}"
    operation = re.sub(r"(?<!^)(?=[A-Z])", "_", action).lower()
    limit = min(target.get("RetryPolicy", {}).get("MaximumRetryAttempts", 0) + 1, max_attempts)
    errors: list[str] = []
    for attempt in range(1, limit + 1):
        before_attempt(attempt)
        if not any(allows(p, iam_action, resource_arn(request)) for p in policies):
            # not stood in: the stand-in's own record of a refused call (tests read only its code); Scheduler's
            # dead-letter message carries the target's error as message attributes (ERROR_CODE, ERROR_MESSAGE:
            # EventBridge Scheduler User Guide, "Configuring a dead-letter queue"), not this text.
            errors.append(f"AccessDeniedException: {role} may not {iam_action} on {resource_arn(request)}")
            continue
        try:
            getattr(aws.client(service), operation)(**request)
            return Firing(attempt, True, errors)
        except ClientError as err:
            errors.append(f"{err.response['Error']['Code']}: {err.response['Error']['Message']}")
    dead_letter = target.get("DeadLetterConfig", {}).get("Arn")
    if dead_letter:
        if not any(allows(p, "sqs:SendMessage", dead_letter) for p in policies):
            raise AssertionError(f"{role} may not send to its dead-letter queue {dead_letter}")
        queue_url = aws.client("sqs").get_queue_url(QueueName=dead_letter.rsplit(":", 1)[-1])["QueueUrl"]
        aws.client("sqs").send_message(QueueUrl=queue_url, MessageBody=json.dumps(
            {"schedule": name, "target": target["Arn"], "input": target["Input"], "errors": errors}))
    return Firing(limit, False, errors)
