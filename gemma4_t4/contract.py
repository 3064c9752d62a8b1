"""The one contract between a deployed stack and the operator tools, whatever the cloud.

Both serving components register these outputs under these names, and the Pulumi program
exports them as they are; the operator commands read a stack through them alone (``pulumi stack
output --json``), so nothing about a stack is spelled twice.
"""

from __future__ import annotations

# Output name -> what it holds. Every serving component registers all of them.
OUTPUTS: dict[str, str] = {
    "cloud": "the registered cloud that reads the target below (gemma4_t4.clouds: gce, sagemaker)",
    "port": "the TCP port vLLM's OpenAI server listens on (GCE: on the VM's loopback, which the "
            "tunnel forwards to the same local port; SageMaker: the container's, behind /invocations)",
    "served_model_name": "the model id requests must name",
    "target": "how the operator tools reach the server, in the cloud's own terms (its target.py reads it): "
              "{instance, zone, project} on GCE, {endpoint_name, region, profile?} on SageMaker",
    "connect_command": "the shell command a person runs to reach it (GCE: a tunnel that returns "
                       "to the prompt; SageMaker: one invocation)",
    "cost_per_hour_usd": "catalog list price of what bills while it serves (an autoscaled endpoint: at its "
                         "fewest instances; cost_per_hour_usd_max is the most)",
    "billing_after_destroy_usd_per_month": "what keeps billing after `pulumi destroy` (the retained "
                                           "data disk, or kept images)",
}
