"""SageMaker's target: an endpoint through boto3's sagemaker-runtime (the OpenAI chat body at
/invocations), and the AWS session the operator tools ask as.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...core.targets import CONNECT_TIMEOUT_S, OnWire, TargetError, sse_events


def aws_session(region: str, profile: str | None, error: type[Exception]) -> Any:
    """A boto3 session in REGION as PROFILE (the stack's aws:profile) or the default chain; a
    missing profile or no credentials at all is ``error`` with what to do."""
    import boto3
    from botocore.exceptions import ProfileNotFound

    try:
        session = boto3.session.Session(profile_name=profile or None, region_name=region)
    except ProfileNotFound:
        raise error(f"the AWS profile {profile!r} (the stack's aws:profile) is not in ~/.aws/config: "
                    + shlex.join(["aws", "configure", "--profile", profile or ""])) from None
    if session.get_credentials() is None:
        as_whom = f" for the profile {profile!r}" if profile else ""
        raise error(f"no AWS credentials{as_whom}: run `aws configure` or `aws sso login`, or set AWS_PROFILE")
    return session


# SageMaker cuts a real-time invocation at 60 s; AWS advises a 70 s socket timeout (InvokeEndpoint).
SAGEMAKER_INVOKE_LIMIT_S = 60
SAGEMAKER_READ_TIMEOUT_S = 70.0


@dataclass
class SageMakerTarget:
    """An endpoint through boto3. Invocations are never retried (a generation is not idempotent:
    a retry after a timeout would run it twice), and a plain invocation must answer within 60 s,
    so the CLI streams by default here."""

    endpoint: str
    region: str
    endpoint_url: str | None = None  # a local stand-in (tests); None for AWS
    profile: str | None = None  # the stack's aws:profile; None: the default chain (AWS_*, ~/.aws)
    # The stack's endpointTtl, when it has one: when the schedule deletes the endpoint, and the
    # dead-letter queues where the TTL's and the backstop's deletes land when they kept failing (a letter that names
    # the endpoint still there: it was not deleted and bills).
    ttl_deletes_at: str | None = None
    ttl_dead_letter_queue_url: str | None = None
    ttl_backstop_dead_letter_queue_url: str | None = None
    # The stack whose tags mark its endpoints: any other than ENDPOINT is outside the stack's state (an `up`
    # stopped during the endpoint's wait) and bills; None: not asked. STACK_TAGS: its organization, project and
    # stack tags as its target output records them (components/sagemaker/scope.py); None: a stack deployed by a
    # release before 0.4.0, whose endpoints carry the stack's name alone.
    stack: str | None = None
    stack_tags: Mapping[str, str] | None = None
    label: str = ""
    cloud: str = field(default="sagemaker", init=False)
    read_timeout_s: float = SAGEMAKER_READ_TIMEOUT_S
    runtime: Any = field(init=False, repr=False)
    control: Any = field(init=False, repr=False)
    _session: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        from botocore.config import Config

        if not self.region or not self.region.strip():
            raise TargetError("no AWS region: pass --region (or set aws:region in the stack)")
        self._session = aws_session(self.region, self.profile, TargetError)
        once = Config(read_timeout=self.read_timeout_s, connect_timeout=CONNECT_TIMEOUT_S,
                      retries={"total_max_attempts": 1, "mode": "standard"})
        self.runtime = self._session.client("sagemaker-runtime", endpoint_url=self.endpoint_url, config=once)
        self.control = self._session.client("sagemaker", endpoint_url=self.endpoint_url)
        self.label = self.label or f"sagemaker:{self.endpoint}@{self.region}"

    def _error(self, err: Exception) -> TargetError:
        """One message per error class, each with what to do."""
        from botocore.exceptions import (
            ClientError,
            ConnectionClosedError,
            EndpointConnectionError,
            ReadTimeoutError,
            ResponseStreamingError,
        )

        if isinstance(err, ReadTimeoutError):
            return TargetError(f"{self.endpoint}: no answer in {self.read_timeout_s:.0f}s (SageMaker ends a "
                               f"real-time invocation at {SAGEMAKER_INVOKE_LIMIT_S}s): stream it (the default) or "
                               "ask for fewer --max-tokens")
        if isinstance(err, ConnectionClosedError | ResponseStreamingError):
            return TargetError(f"{self.endpoint}: the connection broke midway ({err}): ask again")
        from .failures import cloud_message  # the one wording of credential and network failures

        if (message := cloud_message(err)) is not None:
            return TargetError(message)
        if isinstance(err, EndpointConnectionError):
            return TargetError(f"cannot reach SageMaker in {self.region}: {err}")
        if not isinstance(err, ClientError):
            return TargetError(f"{self.endpoint}: {err}")
        error = err.response.get("Error", {})
        code, message = error.get("Code", ""), error.get("Message", str(err))
        if code in ("ValidationError", "ValidationException") and (
                "not found" in message or "Could not find endpoint" in message):
            return TargetError(f"endpoint {self.endpoint} not found in {self.region}: {message}")
        if code in ("ValidationError", "ValidationException"):
            return TargetError(f"{self.endpoint}: SageMaker refused the request: {message}")
        if code == "ModelError" and "timed out" in message:
            return TargetError(f"{self.endpoint}: the container did not answer within SageMaker's "
                               f"{SAGEMAKER_INVOKE_LIMIT_S}s: stream it (the default) or ask for fewer --max-tokens")
        if code == "ModelError":
            return TargetError(f"{self.endpoint}: the model container answered with an error: {message} "
                               f"(its log: gemma4-t4 logs --endpoint {self.endpoint} --region {self.region})")
        if code == "ModelStreamError":
            # botocore keeps only the message of a stream's exception event (not its ErrorCode).
            cut = " (SageMaker's time for one streamed answer ran out: ask for fewer --max-tokens)" \
                if "allotted time" in message else ""
            return TargetError(f"{self.endpoint}: the stream broke midway{cut}: {message}; the answer is incomplete")
        if code == "InternalStreamFailure":
            return TargetError(f"{self.endpoint}: SageMaker's stream failed midway: {message}; ask again")
        if code == "ModelNotReadyException":
            return TargetError(f"{self.endpoint} is not ready for requests yet: {message} "
                               f"(gemma4-t4 wait --endpoint {self.endpoint} --region {self.region})")
        if code in ("ThrottlingException", "ServiceUnavailable", "InternalFailure", "InternalDependencyException"):
            return TargetError(f"{self.endpoint}: SageMaker answered {code}: {message}; not retried (a generation "
                               "is not idempotent): ask again")
        if code in ("AccessDeniedException", "UnrecognizedClientException", "ExpiredTokenException",
                    "InvalidSignatureException"):
            return TargetError(f"{self.endpoint}: AWS refused your credentials ({code}): {message}")
        return TargetError(f"{self.endpoint}: {code}: {message}")

    def _call(self, fn, **kwargs):
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(**kwargs)
        except (BotoCoreError, ClientError) as err:
            raise self._error(err) from None

    def describe(self) -> dict[str, Any]:
        described = self._call(self.control.describe_endpoint, EndpointName=self.endpoint)
        info = {"endpoint_status": described["EndpointStatus"]}
        if described.get("FailureReason"):
            info["failure_reason"] = described["FailureReason"]
        if self.ttl_deletes_at:
            info["ttl_deletes_at"] = self.ttl_deletes_at
        queues = [url for url in (self.ttl_dead_letter_queue_url, self.ttl_backstop_dead_letter_queue_url) if url]
        if queues:
            failed = sum(self.failed_ttl_deletes(url, described["CreationTime"]) for url in queues)
            info["ttl_failed_deletes"] = failed
            if failed:
                info["ttl_warning"] = (f"the TTL's delete failed {failed} time(s) and is not retried again: the "
                                       f"endpoint was NOT deleted and bills; delete it with `pulumi destroy` and read "
                                       f"the reason in {' and '.join(queues)}")
        if self.stack:
            strays = self.strays()
            if strays:
                info["not_in_the_stack"] = strays
        return info

    def failed_ttl_deletes(self, queue_url: str, created: Any) -> int:
        """The deletes Scheduler gave up on for THIS endpoint, which still exists: dead letters in QUEUE_URL that
        name it and were sent after it was created. A queue holds for 14 days the letters of an earlier endpoint of
        the same name (and the backstop's, its harmless failure after a delete that worked); those are not this
        endpoint's."""
        sqs = self._session.client("sqs", endpoint_url=self.endpoint_url)
        # A dead letter's body is "a JSON payload containing invocation details and any response received from the
        # target" (EventBridge Scheduler User Guide, "Configuring a dead-letter queue"): the endpoint's name is read
        # as a whole word in it, whatever its layout. SentTimestamp is SQS's own attribute (epoch milliseconds).
        named = re.compile(rf"(?<![A-Za-z0-9-]){re.escape(self.endpoint)}(?![A-Za-z0-9-])")
        since_ms = created.timestamp() * 1000
        seen: dict[str, bool] = {}
        for _ in range(10):  # short polls sample the queue's servers: ask until nothing new comes back
            messages = self._call(sqs.receive_message, QueueUrl=queue_url,
                                  MaxNumberOfMessages=10, VisibilityTimeout=0,
                                  AttributeNames=["SentTimestamp"]).get("Messages", [])
            new = [m for m in messages if m["MessageId"] not in seen]
            if not new:
                break
            for message in new:
                seen[message["MessageId"]] = bool(named.search(message.get("Body", ""))) and \
                    int(message.get("Attributes", {}).get("SentTimestamp", 0)) >= since_ms
        return sum(seen.values())

    def strays(self) -> list[str]:
        """Endpoints that carry the stack's tag but are not the stack's endpoint, each with the line that deletes
        it: one made by an `up` that was stopped during its wait bills outside the stack's state."""
        from botocore.exceptions import BotoCoreError, ClientError

        from ...catalog import SAGEMAKER_FLEET_TAG
        from ...components.sagemaker.scope import StackScope
        from .strays import adopt_or_delete

        scope = StackScope.of(self.stack_tags, self.stack or "")
        found = []
        try:
            for page in self.control.get_paginator("list_endpoints").paginate():
                for summary in page["Endpoints"]:
                    if summary["EndpointName"] == self.endpoint:
                        continue
                    tags = self.control.list_tags(ResourceArn=summary["EndpointArn"]).get("Tags", [])
                    if scope.owns(tags):
                        fleet = next((t["Value"] for t in tags if t["Key"] == SAGEMAKER_FLEET_TAG), "")
                        found.append(f"{summary['EndpointName']} ({summary['EndpointStatus']}, not in the stack's "
                                     "state, bills): " + adopt_or_delete(summary["EndpointName"], self.region, scope,
                                                                         fleet))
        except (BotoCoreError, ClientError) as err:
            raise self._error(err) from None
        return found

    def probe(self) -> tuple[bool, str]:
        status = self.describe()["endpoint_status"]
        return status == "InService", "" if status == "InService" else f"the endpoint is {status}"

    def health(self) -> bool:
        return self.probe()[0]

    def models(self) -> list[dict[str, Any]]:
        """The served model as the endpoint's Model defines it (there is no /v1/models behind SageMaker)."""
        described = self._call(self.control.describe_endpoint, EndpointName=self.endpoint)
        config = self._call(self.control.describe_endpoint_config, EndpointConfigName=described["EndpointConfigName"])
        model = self._call(self.control.describe_model, ModelName=config["ProductionVariants"][0]["ModelName"])
        env = model.get("PrimaryContainer", {}).get("Environment", {})
        name = env.get("SM_VLLM_SERVED_MODEL_NAME") or env.get("SM_VLLM_MODEL", "")
        max_len = int(env["SM_VLLM_MAX_MODEL_LEN"]) if "SM_VLLM_MAX_MODEL_LEN" in env else None
        return [{"id": name, "max_model_len": max_len}]

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        response = self._call(self.runtime.invoke_endpoint, EndpointName=self.endpoint,
                              ContentType="application/json", Accept="application/json",
                              Body=json.dumps({**body, "stream": False}))
        return json.loads(response["Body"].read())

    def chat_stream(self, body: dict[str, Any], on_wire: OnWire | None = None) -> Iterator[dict[str, Any]]:
        from botocore.exceptions import BotoCoreError, ClientError

        if on_wire is not None:  # as near the send as this client lets a caller be: boto3 signs and sends in one call
            on_wire("sent")
        response = self._call(self.runtime.invoke_endpoint_with_response_stream, EndpointName=self.endpoint,
                              ContentType="application/json",
                              Body=json.dumps({**body, "stream": True, "stream_options": {"include_usage": True}}))

        def lines() -> Iterator[str]:
            buffer = b""
            try:
                for event in response["Body"]:
                    buffer += event.get("PayloadPart", {}).get("Bytes", b"")
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        yield line.decode("utf-8")
            except (BotoCoreError, ClientError) as err:  # an error event, or the connection, midway
                raise self._error(err) from None

        yield from sse_events(lines(), require_done=True)

    def metrics(self) -> str | None:
        return None  # SageMaker exposes no /metrics; CloudWatch has the endpoint's metrics

    def log_lines(self, follow: bool, lines: int = 200) -> Iterator[str]:
        client = self._session.client("logs")
        group = f"/aws/sagemaker/Endpoints/{self.endpoint}"
        start = int((time.time() - 3600) * 1000)
        while True:
            try:
                events = client.filter_log_events(logGroupName=group, startTime=start)["events"]
            except client.exceptions.ResourceNotFoundException:
                raise TargetError(f"no log group {group}: the container never started (host image pin?)") from None
            for event in events[-lines:] if not follow else events:
                yield event["message"]
                start = max(start, event["timestamp"] + 1)
            if not follow:
                return
            time.sleep(5)

    def close(self) -> None:
        pass
