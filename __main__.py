"""gemma4-t4: wiring only. Reads the stack's config and builds the stack's one component."""

import pulumi

from components.config import StackConfig, gce_settings, hf_token, sagemaker_settings
from components.errors import ConfigError

cfg = StackConfig()
cloud = cfg.str("cloud")
labels = {k: str(v) for k, v in cfg.object("labels").items()}

if cloud == "gce":
    from components.gce import GceT4Server, GceT4ServerArgs

    settings = gce_settings(cfg)
    server = GceT4Server("gemma4-t4", GceT4ServerArgs(cfg.serving(), settings, labels))
    pulumi.export("instance_name", server.instance_name)
    pulumi.export("zone", server.zone)
    pulumi.export("data_disk_name", server.data_disk_name)
    pulumi.export("ssh_tunnel_command", server.ssh_tunnel_command)
    pulumi.export("cost_per_hour_usd", server.cost_per_hour_usd)
    pulumi.export("billing_after_destroy_usd_per_month",
                  server.data_disk_monthly_usd if settings.retain_data_disk else 0.0)
elif cloud == "sagemaker":
    from components.sagemaker import SageMakerT4Endpoint, SageMakerT4EndpointArgs

    settings = sagemaker_settings(cfg)
    endpoint = SageMakerT4Endpoint("gemma4-t4", SageMakerT4EndpointArgs(cfg.serving(), settings, hf_token(cfg), labels))
    pulumi.export("endpoint_name", endpoint.endpoint_name)
    pulumi.export("region", settings.region)
    pulumi.export("image_uri", endpoint.image_uri)
    pulumi.export("invoke_example", endpoint.invoke_example)
    pulumi.export("cost_per_hour_usd", endpoint.cost_per_hour_usd)
    pulumi.export("billing_after_destroy_usd_per_month", endpoint.billing_after_destroy_usd_per_month)
else:
    raise ConfigError("cloud", f"unknown cloud {cloud!r}", "pulumi config set gemma4-t4:cloud gce (or sagemaker)")
