"""The cost guards' defaults and the GCE guest's health bound, each with its reason.

A forgotten stack must stop billing by itself (issue 27): on GCE the guest's idle stop and GCE's own
run-time limit, on SageMaker the endpoint's time-to-live, all on unless the stack turns them off.
"""

from __future__ import annotations

import math

# A VM whose vLLM has never answered /metrics this long after its boot's window began stops itself
# (cloudinit/scripts/idle_stop.py). A GCE first boot (driver and its DKMS build, the driver reboot, the
# venv, the 8.3 GB checkpoint) takes ~20-36 min on n1-standard-2: 743-823 s measured and sourced, the rest
# estimated (docs/gce-guest.md "First-boot timings": [gce-t4-article]'s 362 s start to healthy and 112.77 s cold
# compile among them). `gemma4-t4 wait` gives up at 45 min (core/ops.py WAIT_TIMEOUT_S = 2700 s); the bound
# lies a quarter hour beyond, so a slow boot is reported by `wait` while the VM still runs for `logs`,
# and a VM that never becomes healthy bills about one hour, not forever.
HEALTH_BOUND_MINUTES = 60
# The bound's base covers the default checkpoint ([gce-t4-article]: google/gemma-4-E2B-it-qat-w4a16-ct, 8.3 GB); a
# bigger one adds its extra bytes at the slow end of the estimated download rate (docs/gce-guest.md: 20-100
# MB/s, an estimate, not measured on a T4 VM).
HEALTH_BOUND_BASE_CHECKPOINT_BYTES = 8316306646
SLOW_DOWNLOAD_BYTES_PER_S = 20e6


def health_bound_minutes(checkpoint_bytes: int) -> int:
    """The guest's health bound for a model of CHECKPOINT_BYTES (0: not known: the base bound)."""
    extra_s = max(0, checkpoint_bytes - HEALTH_BOUND_BASE_CHECKPOINT_BYTES) / SLOW_DOWNLOAD_BYTES_PER_S
    return HEALTH_BOUND_MINUTES + math.ceil(extra_s / 60)


# idleStopMinutes' default: an hour without a request. A person's session rarely pauses that long, and a
# start after a stop costs a warm service start ([gce-t4-article]: 362 s to healthy), not a first boot: the disks stay.
DEFAULT_IDLE_STOP_MINUTES = 60
# maxRunHours' default: GCE stops the VM after a day of running, whatever the guest does (a client that keeps
# it busy, a guest whose idle stop cannot run). A forgotten VM costs at most a day.
DEFAULT_MAX_RUN_HOURS = 24
# endpointTtl's default: an endpoint has no idle stop (it can only be deleted, and `pulumi up` makes it again
# in ~13 min, [sagemaker-t4-article]), so a day after its creation it is deleted.
DEFAULT_ENDPOINT_TTL = "24h"
# What turns each guard off (the spellings the keys already had, and "off" for the TTL).
OFF = {"idleStopMinutes": "0", "maxRunHours": "0", "endpointTtl": "off"}
HOURS_PER_DAY = 24
