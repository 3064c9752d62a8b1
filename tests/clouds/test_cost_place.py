"""One cost place per cloud (components/NAME/cost.py): the component's outputs, the offline plan's `cost`, `stop`'s
bill and `zones` all price through it, and the operator tools load it without a Pulumi SDK."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gemma4_t4 import catalog
from gemma4_t4.clouds.gce import capacity as gce_capacity
from gemma4_t4.clouds.gce import lifecycle
from gemma4_t4.clouds.sagemaker import capacity as sagemaker_capacity
from gemma4_t4.clouds.sagemaker.cloud import image_costs
from gemma4_t4.components.config import GceT4ServerSettings, SageMakerT4EndpointSettings
from gemma4_t4.components.gce import cost as gce_cost
from gemma4_t4.components.sagemaker import cost as sagemaker_cost
from gemma4_t4.core.plan import Plan


@pytest.mark.parametrize("module", ["gemma4_t4.components.gce.cost", "gemma4_t4.components.sagemaker.cost"])
def test_a_clouds_prices_load_without_pulumi(module):
    loaded = subprocess.run([sys.executable, "-c", f"import sys, {module}; print(sorted(m for m in sys.modules "
                             "if m.split('.')[0] in ('pulumi', 'pulumi_gcp', 'pulumi_aws', 'pulumi_command')))"],
                            capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_the_stopped_bill_and_the_bill_after_destroy_are_one_reckoning():
    """`stop`'s disk bill (lifecycle) and the component's billing_after_destroy price the data disk alike."""
    settings = GceT4ServerSettings()
    after_destroy = gce_cost.billing_after_destroy_usd_per_month(settings)
    bill = lifecycle.disk_bill("data", settings.data_disk_type, settings.data_disk_size_gb, settings.zone)
    assert after_destroy is not None and bill.usd_per_month == after_destroy


def test_the_running_price_is_machine_and_gpus_plus_the_rest():
    """The component's hourly price holds the machine and GPUs `start` and the floor price, to the cent."""
    settings = GceT4ServerSettings()
    floor = gce_cost.machine_and_gpus_usd_per_hour(settings.machine_type, [(settings.gpu_type, settings.gpu_count)],
                                                  settings.spot, settings.region)
    running = gce_cost.cost_per_hour_usd(settings)
    assert floor is not None and running is not None and floor < running


def test_zones_prices_a_t4_as_the_component_prices_its_machine_and_gpu():
    zone = "us-west2-b"
    offer = gce_capacity.zone_offer(zone)
    prices = catalog.GCE_PRICES[catalog.region_of(zone)]
    assert offer.usd_per_hour == round(prices[f"machine:{catalog.n1_standard_for(1)}"].usd_per_hour
                                       + prices["gpu:nvidia-tesla-t4"].usd_per_hour, 5)
    assert offer.usd_per_hour == gce_cost.t4_offer_usd_per_hour(catalog.region_of(zone), spot=False)


def test_sagemaker_prices_come_from_its_cost_module():
    settings = SageMakerT4EndpointSettings(region="us-east-2", keep_images=True)
    region_offer = sagemaker_capacity.region_offer("us-east-2")
    assert region_offer.usd_per_hour == sagemaker_cost.cost_per_hour_usd(settings, 1)
    assert sagemaker_cost.billing_after_destroy_usd_per_month(settings) == sagemaker_cost.ecr_image_usd_per_month()
    # imageBuilder local (no CodeBuild project in the plan): only the image's storage.
    (storage,) = image_costs(Plan("sagemaker-t4"))
    assert (storage.name, storage.usd, storage.per) == ("image in ECR while the stack is up",
                                                      sagemaker_cost.ecr_image_usd_per_month(), "month")
