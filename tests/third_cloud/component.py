"""The stand-in cloud's component: one child, a local command that stands for starting the server (the
pulumi-command provider's, as the SageMaker component's build steps are), and the contract's outputs."""

import pulumi
import pulumi_command as command

from gemma4_t4.components.base import type_token

from .settings import LoopbackSettings

# A server on your own machine bills nothing: its price is $0/h, and nothing is left after destroy.
USD_PER_HOUR = 0.0


class LoopbackServer(pulumi.ComponentResource):
    cloud: pulumi.Output[str]
    port: pulumi.Output[int]
    served_model_name: pulumi.Output[str]
    target: pulumi.Output[dict]
    connect_command: pulumi.Output[str]
    cost_per_hour_usd: pulumi.Output[float]
    billing_after_destroy_usd_per_month: pulumi.Output[float]

    def __init__(self, name: str, args: dict, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token(LoopbackServer), name, None, opts)
        settings = LoopbackSettings.model_validate(args)
        port = int(settings.url.rsplit(":", 1)[1].split("/")[0])
        command.local.Command(f"{name}-server", create=f"echo serving {settings.model} on port {port}",
                              opts=pulumi.ResourceOptions(parent=self))
        outputs = {"cloud": "loopback", "port": port, "served_model_name": settings.served_model_name or settings.model,
                   "target": {"url": settings.url}, "connect_command": f"curl {settings.url}/v1/models",
                   "cost_per_hour_usd": USD_PER_HOUR, "billing_after_destroy_usd_per_month": 0.0}
        for key, value in outputs.items():
            setattr(self, key, pulumi.Output.from_input(value))
        self.register_outputs(outputs)
