"""What a SageMaker stack costs, in one place: the component's outputs (cost_per_hour_usd and its autoscaled most,
the cost guard, the bill after destroy), the offline plan's `cost` (the image's build, transfer and storage) and
`zones` all price through these functions, at the catalog's list prices.

Plain values and the catalog only, no Pulumi: the operator tools import it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gemma4_t4 import catalog

if TYPE_CHECKING:
    from .settings import SageMakerT4EndpointSettings


@dataclass(frozen=True)
class Charge:
    """A cost beside the endpoint's hours, as `cost` lists it (core.cost.CostItem's fields)."""

    name: str
    usd: float
    per: str
    source: str


def instance_price(region: str, instance_type: str) -> catalog.Price | None:
    """The instance's list price per hour in REGION; None where the catalog has none."""
    return catalog.SAGEMAKER_REGIONAL_PRICES.get(region, {}).get(instance_type)


def cost_per_hour_usd(args: SageMakerT4EndpointSettings, instances: int | None = None) -> float | None:
    """At ``instances`` (default: the fewest the endpoint runs), at the region's list price."""
    price = instance_price(args.region, args.instance_type)
    count = args.instances_min if instances is None else instances
    return None if price is None else round(price.usd_per_hour * count, 4)


def ecr_image_usd_per_month() -> float:
    """The pushed image in ECR, per month."""
    return round(catalog.SAGEMAKER_IMAGE_BYTES / 1e9 * catalog.AWS_PRICES["ecr:gb-month"].usd_per_hour, 2)


def billing_after_destroy_usd_per_month(args: SageMakerT4EndpointSettings) -> float:
    """The kept image (keepImages), else nothing."""
    return ecr_image_usd_per_month() if args.keep_images else 0.0


def image_charges(codebuild: bool, base_region: str | None, region: str) -> list[Charge]:
    """The image's costs beside the endpoint's hours: the CodeBuild minutes of each `up` that builds (CODEBUILD),
    the base pulled from another region's registry (BASE_REGION) by that build into REGION, and the image's ECR
    storage while the stack is up (with keepImages, after destroy too: billing_after_destroy_usd_per_month)."""
    prices = catalog.AWS_PRICES
    items: list[Charge] = []
    if codebuild:
        minutes = math.ceil(catalog.SAGEMAKER_BUILD_SECONDS / 60)
        minute = prices["codebuild:general1.medium-minute"]
        items.append(Charge("image build (CodeBuild)", round(minutes * minute.usd_per_hour, 2), "build",
                            f"{minutes} min (a measured build's phases) x ${minute.usd_per_hour}/min: "
                            f"{minute.source}"))
        if base_region is not None and region and base_region != region:
            transfer = prices["transfer:inter-region-gb"]
            gb = catalog.SAGEMAKER_BASE_IMAGE_BYTES / 1e9
            items.append(Charge(f"base image pulled from {base_region} into {region}",
                                round(gb * transfer.usd_per_hour, 2), "build",
                                f"{gb:g} GB x ${transfer.usd_per_hour}/GB: {transfer.source}"))
    storage = prices["ecr:gb-month"]
    gb = catalog.SAGEMAKER_IMAGE_BYTES / 1e9
    items.append(Charge("image in ECR while the stack is up", ecr_image_usd_per_month(), "month",
                        f"{gb:.2f} GB (the pushed image) x ${storage.usd_per_hour}/GB-month: {storage.source}"))
    return items
