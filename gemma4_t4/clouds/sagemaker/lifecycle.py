"""What stop and start mean for a SageMaker stack: nothing. An endpoint has no stopped state; it can only be
deleted (`pulumi destroy`, or the stack's endpointTtl), and `pulumi up` makes it again. Its state while it
runs is the endpoint's status (SageMakerTarget.describe), not a VM's boot phases.
"""

from __future__ import annotations

NOT_STOPPABLE = ("a SageMaker endpoint cannot be stopped, only deleted: `pulumi destroy` (the image stays "
                 "if keepImages is set), or let the stack's endpointTtl delete it; `pulumi up` makes it "
                 "again")
NO_BOOT_WATCH = ("a SageMaker endpoint has no VM whose boot the Compute API shows: its status (Creating, "
                 "InService, Failed) is the endpoint's, which `status` reads")
