"""A booted guest's first boot as parts with a start and an end, read from the guest's own journal (wall clock: the
container runs on this machine's kernel, so its times and the host's agree) and the stand-in network's request log;
the parts' dependencies; the longest chain through them.

The dependencies are the work's own, whatever order the guest's scripts run it in: the driver and vLLM's venv each
need provisioning's first steps (the disk, the packages); the model's download needs the venv (the download runs with
its huggingface_hub); the reboot needs the driver; vLLM's start needs the boot after the reboot, the venv and the
model. A boot that runs them one after another takes the sum of the parts; one that overlaps them can come down to
the longest chain (the first boot within 15 % of it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

NEEDS: dict[str, tuple[str, ...]] = {
    "bootstrap": (),
    "provision": ("bootstrap",),
    "driver": ("provision",),
    "venv": ("provision",),
    "model": ("venv",),
    "reboot": ("driver",),
    "after the reboot": ("reboot",),
    "vLLM start": ("after the reboot", "venv", "model"),
}
WHAT = {"bootstrap": "the startup-script and cloud-init, to provisioning's start",
        "provision": "data disk, service user, dpkg, packages, swap",
        "driver": "the NVIDIA driver's step: apt, then the DKMS build",
        "venv": "vLLM's venv from the lock: the wheels over the mirror's link, pip",
        "model": "the model's files from the Hub stand-in (first request to the last file's end)",
        "reboot": "the driver's reboot, to provisioning's start on the next boot",
        "after the reboot": "provisioning again, each step finding its work done",
        "vLLM start": "provisioning done to /health 200, less any download inside it"}


@dataclass(frozen=True)
class Part:
    """A part from START to END, less LESS seconds of another part's work inside it (a download vLLM's start made)."""
    name: str
    start: float
    end: float
    less: float = 0.0

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start - self.less)


def journal(vm, unit: str) -> list[tuple[float, str]]:
    """UNIT's journal on VM, every boot: (epoch seconds, message), oldest first."""
    out = vm.exec("journalctl", "--no-pager", "-o", "json", "-u", unit, timeout=120).stdout
    lines = []
    for line in out.splitlines():
        entry = json.loads(line)
        message = entry.get("MESSAGE")
        if isinstance(message, list):  # journald's bytes for a message that is not UTF-8
            message = bytes(message).decode(errors="replace")
        lines.append((int(entry["__REALTIME_TIMESTAMP"]) / 1e6, str(message)))
    return lines


def at(lines: list[tuple[float, str]], *texts: str, nth: int = 1, last: bool = False) -> float:
    """When the NTH (or the last) line holding any of TEXTS was written."""
    found = [t for t, message in lines if any(text in message for text in texts)]
    if len(found) < nth:
        raise LookupError(f"not {nth} line(s) with {texts} in the journal")
    return found[-1] if last else found[nth - 1]


def download(network, service: str) -> tuple[float, float] | None:
    """From SERVICE's first answer to the end of its last GET of a file (net.py logs a request once answered, a file
    once sent whole): the download, without the listings a server asks for later (vLLM's engine, at its start)."""
    lines = [line.split() for line in network.requests() if line.split(" ", 1)[0] == service]
    files = [float(words[-1]) for words in lines if words[1] == "GET" and "/resolve/" in words[2]]
    return (float(lines[0][-1]), files[-1]) if files else None


def driver_and_venv(provision: list[tuple[float, str]]) -> tuple[Part, Part]:
    """The first boot's driver step and vLLM's venv, from provisioning's journal."""
    driver = Part("driver", at(provision, "provision: step 'nvidia driver'"),
                  at(provision, "install-driver: driver installed; a reboot loads it",
                     "install-driver: driver loaded without a reboot"))
    venv = Part("venv", at(provision, "provision: step 'vllm'"), at(provision, "install-vllm: installed "))
    return driver, venv


def first_boot(vm, network, booted: float, healthy: float) -> list[Part]:
    """The parts of a first boot that took the driver's reboot: VM started at BOOTED, /health 200 at HEALTHY."""
    provision = journal(vm, "gemma4-t4-provision")
    started = at(provision, "provision: step 'data disk'")
    driver, venv = driver_and_venv(provision)
    hub = download(network, "hub")
    model = Part("model", *hub) if hub else Part("model", venv.end, venv.end)
    rebooting = at(provision, "provision: rebooting to load the NVIDIA driver")
    again = at(provision, "provision: step 'data disk'", nth=2)
    ready = at(provision, "provision: ready:", last=True)
    inside = max(0.0, min(model.end, healthy) - max(model.start, ready))  # a download vLLM's own start made
    return [Part("bootstrap", booted, started), Part("provision", started, driver.start), driver, venv, model,
            Part("reboot", rebooting, again), Part("after the reboot", again, ready),
            Part("vLLM start", ready, healthy, inside)]


def longest_chain(parts: list[Part]) -> tuple[float, list[str]]:
    """The longest path through NEEDS with each part's seconds: (seconds, the parts on it, first to last)."""
    seconds = {part.name: part.seconds for part in parts}
    best: dict[str, tuple[float, list[str]]] = {}

    def through(name: str) -> tuple[float, list[str]]:
        if name not in best:
            before = max((through(need) for need in NEEDS[name]), default=(0.0, []), key=lambda b: b[0])
            best[name] = (before[0] + seconds[name], [*before[1], name])
        return best[name]

    return max((through(name) for name in seconds), key=lambda b: b[0])


def report(parts: list[Part], booted: float, healthy: float) -> str:
    """Each part's start and end (seconds from the VM's start), the sum, the longest chain, the first boot, the ratio."""
    lines = [f"{'part':<18}{'start s':>9}{'end s':>9}{'seconds':>9}  what"]
    for part in parts:
        lines.append(f"{part.name:<18}{part.start - booted:>9.0f}{part.end - booted:>9.0f}{part.seconds:>9.0f}  "
                     f"{WHAT[part.name]}")
    chain_s, chain = longest_chain(parts)
    total = healthy - booted
    lines += [f"sum of the parts: {sum(p.seconds for p in parts):.0f} s",
              f"longest chain: {chain_s:.0f} s ({' -> '.join(chain)})",
              f"first boot (VM start to /health 200): {total:.0f} s",
              f"first boot / longest chain: {total / chain_s:.2f} (at most 1.15)"]
    return "\n".join(lines)
