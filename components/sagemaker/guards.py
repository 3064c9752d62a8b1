"""What stops a forgotten endpoint's bill: endpointTtl (EventBridge Scheduler deletes the endpoint; its resources are
ttl.py's), as the cost_guards output reports it."""

from datetime import timedelta

from ..base import CostGuard, cost_guard
from . import cost
from .settings import SageMakerT4EndpointSettings


def cost_guards(settings: SageMakerT4EndpointSettings, ttl: timedelta | None) -> list[CostGuard]:
    """The endpoint's guard: its TTL, or off with what the most instances can cost per day."""
    return [cost_guard("endpointTtl", settings.endpoint_ttl.strip() if ttl is not None else None,
                       f"EventBridge Scheduler deletes the endpoint {settings.endpoint_ttl.strip()} after its "
                       "creation", "nothing deletes the endpoint: it bills until `pulumi destroy`",
                       cost.cost_per_hour_usd(settings, settings.instances_max))]
