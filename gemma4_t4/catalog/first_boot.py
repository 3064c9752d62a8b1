"""A GCE first boot, part by part, and the one derivation of every bound that must outlast it.

Three things wait on a first boot and must not cut it short while it still makes progress: `gemma4-t4 wait`
(how long it polls by default), the guest's idle stop (how long a VM whose vLLM never answered may run) and
systemd (how long provisioning may run before it is killed and started over). All three come from FIRST_BOOT
below; docs/gce-guest.md's "First-boot timings" shows the same table.

Provisioning overlaps the network's work with the driver's build (cloudinit/scripts/provision.sh): vLLM's wheels,
then the model's checkpoint and the clamp's fit check, download and run while the compiler builds the module, and the
driver's reboot waits for them. So a first boot takes the longest chain through the parts (each part's `needs`), not
their sum: GCE_FIRST_BOOT_S, which `plan` quotes; GCE_FIRST_BOOT_SERIAL_S is the sum, what a first boot took while
the parts ran one after another. The bounds below add every part at its worst, one after another, as a bound must.

The idle stop does not count from the boot alone: a boot that makes no progress (no new phase, no CPU work in
its provisioning or vLLM units, no download) for HEALTH_STALL_MINUTES is stuck, and the VM stops then; one that
keeps making progress (a slow DKMS build, a slow download) runs up to the cap, the slow end of every part added
up with a margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class BootPart:
    """One stretch of a first boot: seconds at the fast and slow end of what is known, the slowest a working
    boot has been reported to take (``worst_s``), whether it runs in provisioning (before vLLM's start), where the
    figures come from, its key, and the parts it waits for (``needs``, by key)."""
    name: str
    low_s: int
    high_s: int
    worst_s: int
    provisioning: bool
    source: str
    key: str = ""
    needs: tuple[str, ...] = ()


# The download rates: 20-100 MB/s is an estimate for a GCE VM's egress from PyPI and the Hub (not measured on a
# T4 VM, docs/gce-guest.md); the worst case is half the slow end.
DOWNLOAD_BYTES_PER_S = (100e6, 20e6)
WORST_DOWNLOAD_BYTES_PER_S = 10e6
CUDA_WHEELS_BYTES = 4.3e9  # the CUDA lock's wheels beyond the boot test's CPU wheelhouse (docs/gce-guest.md)
DEFAULT_CHECKPOINT_BYTES = 8316306646  # google/gemma-4-E2B-it-qat-w4a16-ct ([gce-t4-article]; catalog models)


def _download(size: float) -> tuple[int, int, int]:
    fast, slow = DOWNLOAD_BYTES_PER_S
    return math.ceil(size / fast), math.ceil(size / slow), math.ceil(size / WORST_DOWNLOAD_BYTES_PER_S)


FIRST_BOOT = (
    BootPart("cloud-init, packages, kernel headers, the venv from the lock up to the driver", 129, 195, 390, True,
             "the boot test's container (docs/testing.md's table, boot 1); worst: ×2 on one core's two hyperthreads",
             "setup"),
    BootPart("the open driver module's DKMS build", 300, 900, 3600, True,
             "estimate for 2 vCPUs (the open module's DKMS build on an n1-standard-2); "
             "worst: 'apt takes 60+ minutes for dkms building', "
             "NVIDIA/open-gpu-kernel-modules#1256 (2026-07-22)", "dkms", ("setup",)),
    BootPart("the CUDA lock's wheels from PyPI (4.3 GB)", *_download(CUDA_WHEELS_BYTES), True,
             "4.3 GB at 100-20 MB/s, worst 10 MB/s (estimates); beside the DKMS build", "wheels", ("setup",)),
    BootPart("the driver reboot", 60, 120, 300, False, "estimate (no T4 VM here); after every job of provisioning",
             "reboot", ("dkms", "model", "fit")),
    BootPart("turing_clamp fit --strict, cold", 71, 156, 312, True,
             "measured on this CI machine's 2 cores, ×2 for one core's two hyperthreads; worst ×2 again; in "
             "provisioning beside the checkpoint's download (the preflight then reads its cache)", "fit", ("wheels",)),
    BootPart("the model's checkpoint (8.3 GB)", *_download(DEFAULT_CHECKPOINT_BYTES), True,
             "catalog checkpoint bytes at 100-20 MB/s, worst 10 MB/s (estimates); fetched by provisioning beside the "
             "DKMS build, once the wheels are in", "model", ("wheels",)),
    BootPart("vLLM start to healthy, warm compile cache", 362, 362, 543, False,
             "[gce-t4-article]: 362 s (89 s weights, 62 s engine init); worst ×1.5", "start", ("reboot",)),
    BootPart("the first compile on a cold cache", 110, 110, 165, False,
             "[gce-t4-article]: 112.77 s instead of 2.59 s; worst ×1.5", "compile", ("start",)),
)

# Past the slowest sum, a quarter more: what no part above foresaw (a slow mirror, a throttled Hub).
MARGIN = 1.25
# The longest a working boot goes without a new phase, CPU work in its units or a download: the driver reboot at
# its worst (300 s, the idle stop's timer does not run meanwhile) and an apt lock held by the image's own timers
# (DPkg::Lock::Timeout=300 in provisioning) back to back, doubled.
HEALTH_STALL_MINUTES = 20
# What counts as progress between two checks of the idle stop, a minute (scaled to the time between them): this
# much CPU time in the provisioning and vLLM units (a compiler, pip, vLLM's load: tens of seconds a minute; a hung
# download: none), or this much received over the network (a download at the worst rate: 600 MB a minute).
PROGRESS_CPU_S = 5.0
PROGRESS_RX_BYTES = 1_000_000


def _sum(attr: str, parts: tuple[BootPart, ...] = FIRST_BOOT) -> int:
    return sum(getattr(part, attr) for part in parts)


def longest_chain(attr: str, parts: tuple[BootPart, ...] = FIRST_BOOT) -> tuple[int, tuple[str, ...]]:
    """(seconds, the keys on it) of the longest path through PARTS' needs, each part taking its ATTR seconds."""
    by_key = {part.key: part for part in parts}
    best: dict[str, tuple[int, tuple[str, ...]]] = {}

    def through(key: str) -> tuple[int, tuple[str, ...]]:
        if key not in best:
            before = max((through(need) for need in by_key[key].needs), default=(0, ()))
            best[key] = (before[0] + getattr(by_key[key], attr), (*before[1], key))
        return best[key]

    return max(through(key) for key in by_key)


# The range `plan` quotes for a change that replaces the VM: the longest chain (the network's work beside the driver's
# build), and what the same parts took one after another (before provisioning overlapped them).
GCE_FIRST_BOOT_S = (longest_chain("low_s")[0], longest_chain("high_s")[0])
GCE_FIRST_BOOT_SERIAL_S = (_sum("low_s"), _sum("high_s"))
# systemd's TimeoutStartSec for gemma4-t4-provision.service (cloudinit/units, checked by tests/guest): one run of
# provisioning at its worst, with the margin. It only ever cuts a hung run short; a stuck one is the idle stop's.
PROVISION_TIMEOUT_MINUTES = math.ceil(_sum("worst_s", tuple(p for p in FIRST_BOOT if p.provisioning)) * MARGIN / 60)
# The idle stop's cap for a VM whose vLLM never answered, from the boot's window (the driver reboot carries it):
# every part at its worst, with the margin, for the default checkpoint.
HEALTH_BOUND_MINUTES = math.ceil(_sum("worst_s") * MARGIN / 60)


def health_bound_minutes(checkpoint_bytes: int) -> int:
    """The idle stop's cap for a model of CHECKPOINT_BYTES (0: not known: the default's): a bigger checkpoint
    adds its extra bytes at the worst download rate, with the margin."""
    extra_s = max(0, checkpoint_bytes - DEFAULT_CHECKPOINT_BYTES) / WORST_DOWNLOAD_BYTES_PER_S
    return HEALTH_BOUND_MINUTES + math.ceil(extra_s * MARGIN / 60)


# `gemma4-t4 wait`'s default: as long as the guest itself may take, so `wait` never gives up on a boot that the
# VM still runs. A boot that is stuck ends sooner: the idle stop stops the VM after HEALTH_STALL_MINUTES without
# progress, and `wait` ends on a stopped VM (or at once on the phase `failed`).
WAIT_TIMEOUT_S = HEALTH_BOUND_MINUTES * 60
