#!/usr/bin/python3
"""gemma4-t4-progress.service: the boot's phase, published as guest attributes (guest_attributes.py).

provision.sh records its own phases (provision, driver, reboot, vllm-install, failed). Once provisioning is
done, this reads vLLM's: model-download (bytes in the model's Hub cache so far, of the checkpoint's size when
the plan knew it), loading (weights, compile, CUDA graphs: /health does not answer 200 yet), serving (it
does), retrying (the service exited and systemd starts it again in 30 s: its last line and the attempt), or
failed (the preflight refused in a way no retry heals, preflight.sh's verdict: its reason). Every few seconds
it publishes what changed, within the guest attributes' rate.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
import urllib.error
import urllib.request

# guest_attributes.py is installed beside it: run as its unit runs it (python3 PATH), Python puts the script's own
# folder first on sys.path.
import guest_attributes

VLLM_UNIT = "gemma4-vllm.service"
PROVISION_UNIT = "gemma4-t4-provision.service"
VLLM_ENV = "/etc/gemma4-t4/vllm.env"
# preflight.sh's refusal that no retry heals, in the unit's StateDirectory=.
REFUSED = "/var/lib/gemma4-vllm/refused"
POLL_S = 5
GB = 1e9


def read_env(path: str) -> dict[str, str]:
    values = {}
    try:
        with open(path) as f:
            for line in f:
                key, sep, value = line.strip().partition("=")
                if sep and not key.startswith("#"):
                    values[key] = value
    except OSError:
        pass
    return values


def flag(args: list[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def hub_repo(hf_home: str, model: str) -> str | None:
    """The Hub cache folder huggingface_hub downloads MODEL into; None for a local path."""
    if not model or model.startswith("/"):
        return None
    return os.path.join(hf_home, "hub", "models--" + model.replace("/", "--"))


def blob_bytes(repo: str) -> tuple[int, bool]:
    """(bytes in the repo's blobs, partial downloads included; whether a download is under way)."""
    total, partial = 0, False
    try:
        entries = list(os.scandir(os.path.join(repo, "blobs")))
    except OSError:
        return 0, False
    for entry in entries:
        try:
            total += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
        partial = partial or entry.name.endswith(".incomplete")
    return total, partial


def download_detail(done: int, expected: int) -> str:
    if expected > 0:
        return f"{done / GB:.1f} of {expected / GB:.1f} GB"
    return f"{done / GB:.1f} GB so far"


def unit_state(unit: str) -> dict[str, str]:
    out = subprocess.run(["systemctl", "show", unit, "-p", "ActiveState,SubState,Result,NRestarts"],
                         capture_output=True, text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def refusal() -> str | None:
    """The preflight's reason for a refusal no retry heals, if it refused so at its last run."""
    try:
        with open(REFUSED) as f:
            return f.read().strip() or None
    except OSError:
        return None


def last_line(unit: str) -> str:
    """The service's own last line (not systemd's), e.g. the preflight's reason or a traceback's end."""
    out = subprocess.run(["journalctl", f"_SYSTEMD_UNIT={unit}", "-n", "1", "-o", "cat", "--no-pager"],
                         capture_output=True, text=True).stdout.strip()
    return out.splitlines()[-1] if out else ""


def healthy(port: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


class Watch:
    def __init__(self) -> None:
        self.last_bytes = -1
        # A start that failed: its retries (the preflight again) keep its phase and detail until vLLM runs.
        self.failure: tuple[str, str] | None = None

    def _failure(self, vllm: dict[str, str]) -> tuple[str, str]:
        """A start that failed: `failed` with the preflight's reason when no retry heals it, else `retrying`."""
        refused = refusal()
        if refused:
            return "failed", f"vLLM will not start: {refused} (not healed by a retry; journalctl -u gemma4-vllm)"
        attempt = int(vllm.get("NRestarts") or 0) + 1
        return "retrying", (f"vLLM did not start: {last_line(VLLM_UNIT)} (attempt {attempt}; it retries every "
                            "30 s; journalctl -u gemma4-vllm)")

    def phase(self) -> tuple[str, str] | None:
        """vLLM's phase and its detail now; None while provisioning runs (it records its own). Provisioning that
        stopped at a failure it does not retry (an update in place whose new venv could not install) leaves vLLM
        serving from what it had: while vLLM runs, its phases are still said."""
        provision = unit_state(PROVISION_UNIT).get("ActiveState")
        if provision != "active" and (provision != "failed" or unit_state(VLLM_UNIT).get("SubState") != "running"):
            return None
        env = read_env(VLLM_ENV)
        args = shlex.split(env.get("VLLM_ARGS", ""))
        model = flag(args, "--model") or "the model"
        if healthy(flag(args, "--port") or "8000"):
            self.failure = None
            return "serving", f"{model}, max-model-len {flag(args, '--max-model-len') or 'default'}"
        vllm = unit_state(VLLM_UNIT)
        if vllm.get("ActiveState") == "failed" or vllm.get("SubState") == "auto-restart":
            self.failure = self._failure(vllm)
            return self.failure
        if vllm.get("ActiveState") not in ("active", "activating"):
            return None
        if vllm.get("SubState") == "running":
            self.failure = None
        elif self.failure:
            return self.failure
        repo = hub_repo(env.get("HF_HOME", ""), model)
        if repo and vllm.get("SubState") == "running":
            done, partial = blob_bytes(repo)
            expected = int(env.get("CHECKPOINT_BYTES") or 0)
            growing, self.last_bytes = done > self.last_bytes >= 0, done
            if partial or (growing and done < expected):
                return "model-download", f"{model}: {download_detail(done, expected)}"
        if vllm.get("SubState") == "start-pre":
            return "loading", "checking the driver, torch and the Turing clamp before vLLM starts"
        return "loading", f"loading {model}: weights, compile, CUDA graphs"


def tick(watch: Watch, now: float) -> None:
    seen = watch.phase()
    if seen is not None:
        phase, detail = seen
        with guest_attributes._locked_state() as state:
            if state.get("phase") != phase or state.get("detail") != guest_attributes.one_line(detail):
                guest_attributes.record_phase(state, phase, detail, now)
    guest_attributes.publish(now)


def main() -> None:
    watch = Watch()
    while True:
        tick(watch, time.time())
        time.sleep(POLL_S)


if __name__ == "__main__":
    main()
