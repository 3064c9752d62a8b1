"""gemma4-t4: wiring only. Reads the stack's config into its component's Args (refusing a bad
value before anything is registered), builds that one component, exports the contract's outputs
(gemma4_t4.contract) and the component's own extras (the memory plan, the data disk or image...)."""

import pulumi

from components.config import GceT4ServerArgs, stack_args
from gemma4_t4.contract import OUTPUTS

args = stack_args()
if isinstance(args, GceT4ServerArgs):
    from components.gce import GceT4Server

    server = GceT4Server("gemma4-t4", args)
else:
    from components.sagemaker import SageMakerT4Endpoint

    server = SageMakerT4Endpoint("gemma4-t4", args)

for name in OUTPUTS:
    pulumi.export(name, getattr(server, name))
for name, value in server.extra_outputs.items():
    pulumi.export(name, value)
