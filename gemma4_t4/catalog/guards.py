"""The cost guards' defaults, each with its reason (the GCE guest's health bound: first_boot.py).

A forgotten stack must stop billing by itself: on GCE the guest's idle stop and GCE's own
run-time limit, on SageMaker the endpoint's time-to-live, all on unless the stack turns them off.
"""

from __future__ import annotations

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
