"""What the component's outputs say beside its resources' own: the command that reaches vLLM, and the hourly price
(from cost.py), with a warning at preview where the catalog has none."""

import pulumi
import pulumi_gcp as gcp

from . import cost
from .settings import GceT4ServerSettings


def connect_command(instance: gcp.compute.Instance, port: int) -> pulumi.Output[str]:
    """The IAP tunnel to vLLM's port; -f: ssh goes to the background once the forward is up, so the shell
    comes back."""
    return pulumi.Output.format(
        "gcloud compute ssh {0} --project {1} --zone {2} --tunnel-through-iap -- -f -N -L {3}",
        instance.name, instance.project, instance.zone, f"{port}:127.0.0.1:{port}")


def priced_per_hour(settings: GceT4ServerSettings, resource: pulumi.Resource) -> float | None:
    """The cost_per_hour_usd output (cost.py); where the catalog lacks a price, None, said at preview."""
    usd_per_hour = cost.cost_per_hour_usd(settings)
    if usd_per_hour is None:
        missing = sorted(cost.missing_prices(settings.region, cost.billed_items(settings)))
        pulumi.log.warn(f"no catalog price for {', '.join(missing)} in {settings.region}: cost not estimated",
                        resource=resource)
    return usd_per_hour
