#!/usr/bin/python3
"""vLLM's serving values from the VM's metadata key gemma4-t4-serving into /etc/gemma4-t4/vllm.env.

    serving_config.py fetch    before vLLM starts (gemma4-t4-serving-config.service): the key's value, or,
                               if the metadata server does not answer, the last one on disk
    serving_config.py watch    gemma4-t4-serving-watch.service: waits for the key to change; a new value is
                               written and vLLM restarted with it (`pulumi up` updated the VM in place)

The metadata server (Google's "View and query VM metadata",
https://cloud.google.com/compute/docs/metadata/querying-metadata) answers a GET with `Metadata-Flavor: Google`
and an ETag header; with `?wait_for_change=true&last_etag=ETAG` it answers at once when the value's ETag is
no longer ETAG, otherwise when the value changes or `timeout_sec` passes (as Google's guest agent watches
its metadata: GoogleCloudPlatform/guest-agent metadata/metadata.go, `wait_for_change=true&timeout_sec=60`
with `last_etag`). The docs advise retrying: maintenance can make it answer 503 for under a second.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator

KEY = "gemma4-t4-serving"
URL = f"http://metadata.google.internal/computeMetadata/v1/instance/attributes/{KEY}"
VLLM_ENV = os.environ.get("GEMMA4_T4_VLLM_ENV", "/etc/gemma4-t4/vllm.env")
VLLM_UNIT = "gemma4-vllm.service"
WAIT_S = 300


def log(message: str) -> None:
    print(f"serving-config: {message}", flush=True)


class NoKey(Exception):
    """The metadata server answered that the instance has no such key (404)."""


def get(url: str, last_etag: str | None = None, wait_s: int = WAIT_S) -> tuple[str, str]:
    """(value, ETag); with LAST_ETAG, once the value's ETag differs from it (or WAIT_S passed)."""
    if last_etag is not None:
        url += "?" + urllib.parse.urlencode({"wait_for_change": "true", "last_etag": last_etag, "timeout_sec": wait_s})
    request = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
    try:
        with urllib.request.urlopen(request, timeout=(wait_s + 20) if last_etag else 10) as response:
            return response.read().decode(), response.headers.get("ETag", "")
    except urllib.error.HTTPError as error:
        if error.code == 404:
            raise NoKey(url) from None
        raise


def on_disk() -> str | None:
    try:
        with open(VLLM_ENV) as f:
            return f.read()
    except OSError:
        return None


def write_atomically(path: str, text: str, mode: int) -> None:
    """PATH holds TEXT with MODE, or what it held before: written beside it, synced, then renamed over it (a PATH
    that is a symlink is replaced, not followed). guest_bundle.py writes its files with it too."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = f"{path}.{os.getpid()}.new"
    with open(partial, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(partial, mode)
    os.replace(partial, path)


def write(value: str) -> bool:
    """Atomically replace vllm.env with VALUE; False if it already holds it."""
    if on_disk() == value:
        return False
    # Root's only (systemd reads it for vLLM as root): it may hold vLLM's API key (VLLM_API_KEY).
    write_atomically(VLLM_ENV, value, 0o600)
    return True


def args_of(env_text: str | None) -> str:
    return next((line.split("=", 1)[1] for line in (env_text or "").splitlines() if line.startswith("VLLM_ARGS=")), "")


def fetch(url: str = URL, attempts: int = 6, pause_s: float = 5) -> int:
    """The key's value into vllm.env. Without an answer, the value on disk stands; without either, keep asking
    (vLLM cannot start without its values)."""
    attempt = 0
    while True:
        attempt += 1
        try:
            value, _ = get(url)
        except NoKey:
            if on_disk() is not None:
                log(f"the instance has no metadata key {KEY}: serving with the values on disk ({VLLM_ENV})")
                return 0
            log(f"FAILED: the instance has no metadata key {KEY} and {VLLM_ENV} does not exist: run `pulumi up`")
            return 1
        except (urllib.error.URLError, OSError) as error:
            if on_disk() is not None and attempt >= attempts:
                log(f"the metadata server did not answer ({error}): serving with the last values on disk")
                return 0
            log(f"the metadata server did not answer ({error}); asking again in {pause_s:.0f} s")
            time.sleep(pause_s)
            continue
        log(f"wrote new serving values: {args_of(value)}" if write(value) else "serving values unchanged")
        return 0


def restart_vllm() -> None:
    # try-restart: a vLLM that runs (or waits to retry) restarts with the new values; one that was stopped stays
    # stopped and reads them at its next start.
    subprocess.run(["systemctl", "try-restart", VLLM_UNIT], check=False)


def values(url: str, wait_s: Callable[[], int] = lambda: WAIT_S, say: Callable[[str], None] = log) -> Iterator[str]:
    """The key's value as it stands, then each time it may have changed (or WAIT_S() passed): the metadata server's
    wait_for_change with the last ETag. A missing key or a server that does not answer is asked again."""
    etag = "NONE"  # the guest agent's first last_etag: any value answers at once
    while True:
        try:
            value, etag = get(url, etag, wait_s())
        except NoKey:
            time.sleep(60)
            continue
        except (urllib.error.URLError, OSError) as error:
            say(f"the metadata server did not answer ({error}); asking again in 10 s")
            time.sleep(10)
            continue
        if not etag:  # never seen from GCE; without it every wait would answer at once
            etag = "NONE"
            time.sleep(10)
        yield value


def watch(url: str = URL, wait_s: int = WAIT_S) -> None:
    for value in values(url, lambda: wait_s):
        before = on_disk()
        if write(value):
            log(f"serving values changed: {args_of(before)} -> {args_of(value)}; restarting vLLM")
            restart_vllm()


def main(argv: list[str]) -> int:
    if argv == ["fetch"]:
        return fetch()
    if argv == ["watch"]:
        watch()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
