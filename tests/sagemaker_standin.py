"""A local stand-in for SageMaker's endpoints, in front of a real vLLM server (tests only).

boto3 is pointed at it with endpoint_url, so request signing, the bodies, the response-stream
event encoding and the response parsing are exercised for real; the model work is vLLM's.
"""

from __future__ import annotations

import json
import struct
import threading
import urllib.request
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from conftest import send_json

# The account and region the stand-in's answers name (botocore is pointed at it with these).
ACCOUNT, REGION = "123456789012", "us-east-2"


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return struct.pack("B", len(raw_name)) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value


def event_message(payload: bytes) -> bytes:
    """One application/vnd.amazon.eventstream message carrying a PayloadPart."""
    headers = (_header(":event-type", "PayloadPart") + _header(":content-type", "application/octet-stream")
               + _header(":message-type", "event"))
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(headers))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + payload
    return message + struct.pack(">I", zlib.crc32(message))


class StandIn:
    def __init__(self, vllm_url: str, endpoint: str, environment: dict[str, str]):
        self.vllm_url, self.endpoint, self.environment = vllm_url, endpoint, environment
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _json(self, status: int, doc: dict) -> None:
                # source: botocore's sagemaker service model (protocol json, jsonVersion 1.1).
                send_json(self, status, doc, "application/x-amz-json-1.1")

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                target = self.headers.get("X-Amz-Target", "")
                if target:
                    return standin.control(self, target, json.loads(body or b"{}"))
                prefix = f"/endpoints/{standin.endpoint}/"
                if not self.path.startswith(prefix):
                    name = self.path.split("/")[2] if self.path.count("/") >= 2 else ""
                    # source: InvokeEndpoint's answer for an endpoint the account lacks, a published transcript
                    # (aws/amazon-sagemaker-examples#293): "(ValidationError) ... Endpoint NAME of account ACCOUNT
                    # not found."
                    return self._json(400, {"__type": "ValidationError",
                                            "message": f"Endpoint {name} of account {ACCOUNT} not found."})
                request = urllib.request.Request(f"{standin.vllm_url}/v1/chat/completions", data=body,
                                                 headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=120) as upstream:
                    if self.path.endswith("invocations-response-stream"):
                        self.send_response(200)
                        self.send_header("Content-Type", "application/vnd.amazon.eventstream")
                        self.end_headers()
                        for line in upstream:
                            self.wfile.write(event_message(line))
                        return
                    payload = upstream.read()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def control(self, handler, target: str, request: dict) -> None:
        operation = target.split(".")[-1]
        if operation == "DescribeEndpoint":
            if request.get("EndpointName") != self.endpoint:
                arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/{str(request.get('EndpointName')).lower()}"
                # source: SageMaker's answer for a missing endpoint, a published transcript of DeleteEndpoint's
                # (aws/amazon-sagemaker-examples#2402): ValidationException 'Could not find endpoint "ARN".'
                return handler._json(400, {"__type": "ValidationException",
                                           "message": f"Could not find endpoint \"{arn}\"."})
            # source: DescribeEndpoint's response fields (SageMaker API Reference, DescribeEndpoint: EndpointName,
            # EndpointStatus, EndpointConfigName), only those the operator tools read.
            return handler._json(200, {"EndpointName": self.endpoint, "EndpointStatus": "InService",
                                       "EndpointConfigName": f"{self.endpoint}-config"})
        if operation == "ListEndpoints":
            # source: SageMaker API Reference, ListEndpoints: Endpoints[] of EndpointSummary (EndpointName,
            # EndpointArn, EndpointStatus, CreationTime, LastModifiedTime); no NextToken on the last page.
            # The account holds the one endpoint: a stack's own, so no other carries its tag.
            arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/{self.endpoint.lower()}"
            return handler._json(200, {"Endpoints": [{"EndpointName": self.endpoint, "EndpointArn": arn,
                                                      "EndpointStatus": "InService", "CreationTime": 1764900000,
                                                      "LastModifiedTime": 1764900000}]})
        if operation == "DescribeEndpointConfig":
            # source: SageMaker API Reference, DescribeEndpointConfig: ProductionVariants[].ModelName.
            return handler._json(200, {"ProductionVariants": [{"ModelName": f"{self.endpoint}-model"}]})
        if operation == "DescribeModel":
            # source: SageMaker API Reference, DescribeModel: PrimaryContainer.Environment.
            return handler._json(200, {"PrimaryContainer": {"Environment": self.environment}})
        # not stood in: an operation the tools should never call here; the client raises on the 400.
        return handler._json(400, {"__type": "UnknownOperationException", "message": operation})

    def close(self) -> None:
        self.server.shutdown()
