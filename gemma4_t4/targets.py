"""Where the operator commands send their requests: any OpenAI-compatible URL (a GCE VM through
its IAP tunnel is one), or a SageMaker endpoint through boto3's sagemaker-runtime.

Both speak the OpenAI chat body: the vLLM SageMaker container serves it at /invocations.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Iterator


class TargetError(RuntimeError):
    """A failure the operator can act on: the message says what and what to do."""


# --- OpenAI-compatible HTTP ----------------------------------------------------------------------


def _sse_events(lines: Iterator[bytes]) -> Iterator[dict[str, Any]]:
    """Parse `data: {...}` server-sent events until `data: [DONE]`."""
    for raw in lines:
        line = raw.decode("utf-8").strip()
        if not line.startswith("data:"):
            continue
        data = line[len("data:"):].strip()
        if data == "[DONE]":
            return
        yield json.loads(data)


@dataclass
class HttpTarget:
    base_url: str
    timeout_s: float = 1800.0
    label: str = ""

    def __post_init__(self):
        self.base_url = self.base_url.rstrip("/")
        self.label = self.label or self.base_url

    def _open(self, path: str, body: dict[str, Any] | None = None, timeout_s: float | None = None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.base_url}{path}", data=data,
                                         headers={"Content-Type": "application/json"} if data else {})
        try:
            return urllib.request.urlopen(request, timeout=timeout_s or self.timeout_s)
        except urllib.error.HTTPError as err:
            detail = err.read().decode("utf-8", "replace")[:500]
            raise TargetError(f"{self.base_url}{path}: HTTP {err.code}: {detail}") from None
        except (urllib.error.URLError, ConnectionError, socket.timeout) as err:
            reason = getattr(err, "reason", err)
            raise TargetError(f"cannot reach {self.base_url}: {reason}") from None

    def health(self) -> bool:
        try:
            with self._open("/health", timeout_s=5) as response:
                return response.status == 200
        except TargetError:
            return False

    def models(self) -> list[dict[str, Any]]:
        with self._open("/v1/models", timeout_s=10) as response:
            return json.load(response)["data"]

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._open("/v1/chat/completions", {**body, "stream": False}) as response:
            return json.load(response)

    def chat_stream(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        stream_body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        with self._open("/v1/chat/completions", stream_body) as response:
            yield from _sse_events(response)

    def metrics(self) -> str | None:
        try:
            with self._open("/metrics", timeout_s=10) as response:
                return response.read().decode()
        except TargetError:
            return None

    def describe(self) -> dict[str, Any]:
        return {}

    def logs(self, follow: bool) -> int:
        raise TargetError("a plain URL has no log to read: use --stack gce-t4 or --endpoint NAME")

    def recent_log(self, lines: int = 20) -> str:
        return ""  # a plain URL has no log

    def close(self) -> None:
        pass


# --- GCE: the VM's loopback server through an IAP SSH tunnel ----------------------------------------


@dataclass
class GceTarget(HttpTarget):
    instance: str = ""
    zone: str = ""
    local_port: int = 8000
    remote_port: int = 8000
    _tunnel: subprocess.Popen | None = field(default=None, repr=False)

    def _ssh(self, *remote: str, extra: tuple[str, ...] = ()) -> list[str]:
        if shutil.which("gcloud") is None:
            raise TargetError("gcloud is not installed: the GCE target needs it for the IAP tunnel and SSH")
        return ["gcloud", "compute", "ssh", self.instance, "--zone", self.zone, "--tunnel-through-iap",
                *extra, *(("--command", " ".join(remote)) if remote else ())]

    def open_tunnel(self, wait_s: float = 30) -> None:
        if self.health():
            return  # a tunnel (or a local server) already answers
        forward = f"{self.local_port}:127.0.0.1:{self.remote_port}"
        self._tunnel = subprocess.Popen(self._ssh(extra=("--", "-N", "-L", forward)), stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self._tunnel.poll() is not None:
                error = self._tunnel.stderr.read().decode()[-500:] if self._tunnel.stderr else ""
                raise TargetError(f"the IAP tunnel to {self.instance} closed: {error.strip()}")
            try:
                with socket.create_connection(("127.0.0.1", self.local_port), timeout=1):
                    return
            except OSError:
                time.sleep(0.5)
        self.close()
        raise TargetError(f"the IAP tunnel to {self.instance} did not open in {wait_s:.0f}s (firewall rule for "
                          "35.235.240.0/20 on port 22? `gcloud auth login`?)")

    def describe(self) -> dict[str, Any]:
        query = "nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader,nounits"
        result = subprocess.run(self._ssh(query), capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            return {"vram": f"unknown ({result.stderr.strip()[-200:]})"}
        used, total = (int(x) for x in result.stdout.strip().split(","))
        return {"vram_used_mib": used, "vram_total_mib": total}

    def recent_log(self, lines: int = 20) -> str:
        result = subprocess.run(self._ssh(f"sudo journalctl -u gemma4-vllm -n {lines} --no-pager"),
                                capture_output=True, text=True, timeout=60)
        return result.stdout

    def logs(self, follow: bool) -> int:
        return subprocess.call(self._ssh("sudo journalctl -u gemma4-vllm --no-pager" + (" -f" if follow else " -n 200")))

    def close(self) -> None:
        if self._tunnel is not None and self._tunnel.poll() is None:
            self._tunnel.terminate()
            self._tunnel.wait(timeout=10)
        self._tunnel = None


# --- SageMaker ---------------------------------------------------------------------------------------


@dataclass
class SageMakerTarget:
    endpoint: str
    region: str
    endpoint_url: str | None = None  # a local stand-in (tests); None for AWS
    control_url: str | None = None
    label: str = ""

    def __post_init__(self):
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise TargetError("boto3 is not installed: pip install boto3") from None
        session = boto3.session.Session(region_name=self.region)
        if session.get_credentials() is None:
            raise TargetError("no AWS credentials: run `aws configure` or `aws sso login`, or set AWS_PROFILE")
        config = Config(read_timeout=1800, retries={"max_attempts": 2})
        self.runtime = session.client("sagemaker-runtime", endpoint_url=self.endpoint_url, config=config)
        self.control = session.client("sagemaker", endpoint_url=self.control_url)
        self.label = self.label or f"sagemaker:{self.endpoint}@{self.region}"

    def _call(self, fn, **kwargs):
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(**kwargs)
        except ClientError as err:
            message = err.response.get("Error", {}).get("Message", str(err))
            if "Could not find endpoint" in message or err.response.get("Error", {}).get("Code") == "ValidationError":
                raise TargetError(f"endpoint {self.endpoint} not found in {self.region}: {message}") from None
            raise TargetError(f"{self.endpoint}: {message}") from None
        except BotoCoreError as err:
            raise TargetError(f"{self.endpoint}: {err}") from None

    def describe(self) -> dict[str, Any]:
        described = self._call(self.control.describe_endpoint, EndpointName=self.endpoint)
        info = {"endpoint_status": described["EndpointStatus"]}
        if described.get("FailureReason"):
            info["failure_reason"] = described["FailureReason"]
        return info

    def health(self) -> bool:
        return self.describe()["endpoint_status"] == "InService"

    def models(self) -> list[dict[str, Any]]:
        """The served model as the endpoint's Model defines it (there is no /v1/models behind SageMaker)."""
        described = self._call(self.control.describe_endpoint, EndpointName=self.endpoint)
        config = self._call(self.control.describe_endpoint_config, EndpointConfigName=described["EndpointConfigName"])
        model = self._call(self.control.describe_model, ModelName=config["ProductionVariants"][0]["ModelName"])
        env = model.get("PrimaryContainer", {}).get("Environment", {})
        name = env.get("SM_VLLM_SERVED_MODEL_NAME") or env.get("SM_VLLM_MODEL", "")
        return [{"id": name, "max_model_len": int(env["SM_VLLM_MAX_MODEL_LEN"]) if "SM_VLLM_MAX_MODEL_LEN" in env
                 else None}]

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        response = self._call(self.runtime.invoke_endpoint, EndpointName=self.endpoint,
                              ContentType="application/json", Accept="application/json",
                              Body=json.dumps({**body, "stream": False}))
        return json.loads(response["Body"].read())

    def chat_stream(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        response = self._call(self.runtime.invoke_endpoint_with_response_stream, EndpointName=self.endpoint,
                              ContentType="application/json",
                              Body=json.dumps({**body, "stream": True, "stream_options": {"include_usage": True}}))
        buffer = b""

        def lines():
            nonlocal buffer
            for event in response["Body"]:
                buffer += event.get("PayloadPart", {}).get("Bytes", b"")
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    yield line

        yield from _sse_events(lines())

    def metrics(self) -> str | None:
        return None  # SageMaker exposes no /metrics; CloudWatch has the endpoint's metrics

    def logs(self, follow: bool) -> int:
        import boto3

        client = boto3.session.Session(region_name=self.region).client("logs")
        group = f"/aws/sagemaker/Endpoints/{self.endpoint}"
        start = int((time.time() - 3600) * 1000)
        while True:
            try:
                events = client.filter_log_events(logGroupName=group, startTime=start)["events"]
            except client.exceptions.ResourceNotFoundException:
                raise TargetError(f"no log group {group}: the container never started (host image pin?)") from None
            for event in events:
                print(event["message"])
                start = max(start, event["timestamp"] + 1)
            if not follow:
                return 0
            time.sleep(5)

    def recent_log(self, lines: int = 20) -> str:
        return ""

    def close(self) -> None:
        pass
