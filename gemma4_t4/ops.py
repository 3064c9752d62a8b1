"""status, wait, query and logs: the operator's first look at a deployed endpoint."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from typing import Any, Callable, TextIO

from .targets import GceTarget, HttpTarget, SageMakerTarget, TargetError

Target = HttpTarget | SageMakerTarget


def stack_outputs(stack: str) -> dict[str, Any]:
    if shutil.which("pulumi") is None:
        raise TargetError(f"reading stack {stack} needs the Pulumi CLI; or pass --url / --endpoint")
    result = subprocess.run(["pulumi", "stack", "output", "--json", "--stack", stack], capture_output=True, text=True)
    if result.returncode != 0:
        raise TargetError(f"pulumi stack output --stack {stack}: {result.stderr.strip()}")
    return json.loads(result.stdout)


def resolve_target(url: str | None = None, stack: str | None = None, endpoint: str | None = None,
                   region: str | None = None, endpoint_url: str | None = None,
                   outputs: dict[str, Any] | None = None) -> Target:
    """--url, --endpoint [--region], or --stack (read from `pulumi stack output`)."""
    if url:
        return HttpTarget(url)
    if endpoint:
        if not region:
            raise TargetError("--endpoint needs --region")
        return SageMakerTarget(endpoint, region, endpoint_url=endpoint_url, control_url=endpoint_url)
    if stack:
        outputs = outputs if outputs is not None else stack_outputs(stack)
        if "endpoint_name" in outputs:
            return SageMakerTarget(outputs["endpoint_name"], outputs["region"])
        if "instance_name" in outputs:
            target = GceTarget("http://127.0.0.1:8000", instance=outputs["instance_name"], zone=outputs["zone"])
            target.open_tunnel()
            return target
        raise TargetError(f"stack {stack} has neither endpoint_name nor instance_name outputs: was it deployed?")
    raise TargetError("say where: --url URL, --stack STACK, or --endpoint NAME --region REGION")


def check_model(target: Target, model: str | None) -> str:
    """The model id to send: the one asked for if the server serves it, else the only one served."""
    served = [m["id"] for m in target.models()]
    if model is None:
        if len(served) != 1:
            raise TargetError(f"the server serves {served}: pick one with --model")
        return served[0]
    if model not in served:
        raise TargetError(f"model {model!r} is not served here; /v1/models reports: {', '.join(served)}")
    return model


def status(target: Target, out: TextIO = sys.stdout) -> int:
    info = target.describe()
    healthy = target.health()
    print(f"{target.label}: {'serving' if healthy else 'NOT serving'}", file=out)
    for key, value in info.items():
        print(f"  {key}: {value}", file=out)
    if healthy:
        for model in target.models():
            print(f"  model: {model['id']}  max_model_len: {model.get('max_model_len')}", file=out)
    return 0 if healthy else 1


def wait(target: Target, timeout_s: float = 1800, interval_s: float = 15, out: TextIO = sys.stderr,
         alive: Callable[[], bool] | None = None) -> int:
    """Poll until healthy, printing elapsed time (and VRAM on GCE: a compiling engine claims
    memory, a dead one does not). ``alive`` says whether the server process still exists."""
    start = time.monotonic()
    while True:
        elapsed = time.monotonic() - start
        if target.health():
            print(f"healthy after {elapsed:.0f}s: {target.label}", file=out)
            return 0
        if alive is not None and not alive():
            print(f"the server died during startup after {elapsed:.0f}s", file=out)
            _print_death(target, out)
            return 1
        if elapsed > timeout_s:
            print(f"not healthy after {timeout_s:.0f}s: {target.label}", file=out)
            _print_death(target, out)
            return 1
        extra = ""
        if isinstance(target, GceTarget):
            info = target.describe()
            extra = f"  VRAM {info.get('vram_used_mib', '?')} / {info.get('vram_total_mib', '?')} MiB"
        elif isinstance(target, SageMakerTarget):
            info = target.describe()
            if info["endpoint_status"] == "Failed":
                print(f"endpoint Failed: {info.get('failure_reason')}", file=out)
                return 1
            extra = f"  {info['endpoint_status']}"
        print(f"{elapsed:6.0f}s  waiting{extra}", file=out, flush=True)
        time.sleep(interval_s)


def _print_death(target: Target, out: TextIO) -> None:
    log = target.recent_log(20)
    if log:
        print("last 20 log lines:\n" + log, file=out)
    print("no traceback? the kernel may have killed it: `sudo dmesg -T | grep -i oom` on the VM", file=out)


def query(target: Target, prompt: str, model: str | None = None, max_tokens: int = 256, temperature: float = 0.0,
          stream: bool = False, out: TextIO = sys.stdout) -> int:
    body = {"model": check_model(target, model), "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "temperature": temperature}
    if not stream:
        reply = target.chat(body)
        print(reply["choices"][0]["message"]["content"], file=out)
        print(f"usage: {json.dumps(reply['usage'])}  finish: {reply['choices'][0]['finish_reason']}", file=out)
        return 0
    usage = None
    for chunk in target.chat_stream(body):
        for choice in chunk.get("choices", []):
            print(choice.get("delta", {}).get("content") or "", end="", file=out, flush=True)
        usage = chunk.get("usage") or usage
    print(file=out)
    print(f"usage: {json.dumps(usage)}", file=out)
    return 0
