"""GCE's failover for `gemma4-t4 up`, its decisions alone: which refusal a move cures (the texts as GCE and the
provider print them, each cited in gemma4_t4/clouds/gce/failover.py), where to go next, and gcloud's project."""

from __future__ import annotations

import pytest

from gemma4_t4.clouds.gce import failover
from gemma4_t4.clouds.gce.capacity import GceRegion
from gemma4_t4.clouds.gce.up import gcloud_project
from gemma4_t4.core.capacity import RegionRow

PREFIX = "Error waiting for instance to create: "


@pytest.mark.parametrize("message", [
    # cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-availability; two spaces, and one
    PREFIX + "The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the "
             "request.  Try a different zone, or try again later.",
    PREFIX + "The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the "
             "request. Try a different zone, or try again later.",
    # ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS (openshift/release#29959) and the T4 STOCKOUT detail
    # (kubernetes/k8s.io#9834)
    PREFIX + "The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the "
             "request.  '(resource type:compute)'.",
    PREFIX + "The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the "
             "request.  'NULL:0/NULL:0/NULL:0 (state:STOCKOUT, sub-state:STOCKOUT, resource type:compute)'.",
    # the accelerator not sold there (hashicorp/terraform-provider-google#5860's form)
    "Error creating instance: googleapi: Error 400: The resource "
    "'projects/p/zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4' was not found, badRequest",
])
def test_a_zone_without_t4s_moves_within_the_region(message):
    found = failover.refusal(message, "us-central1-a")
    assert found is not None and found.kind == "stockout" and found.region == "us-central1" and found.moves


def test_a_regional_quota_leaves_the_region_and_the_projects_moves_nowhere():
    regional = failover.refusal(PREFIX + "Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 1.0 in region us-central1.",
                                "us-central1-a")
    assert regional is not None and regional.kind == "region-quota" and regional.region == "us-central1"
    world = failover.refusal(PREFIX + "Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 0.0 globally.", "us-central1-a")
    assert world is not None and not world.moves


def test_anything_else_is_not_a_move():
    assert failover.refusal("Error creating instance: googleapi: Error 400: Instances with guest accelerators do not "
                            "support live migration., badRequest", "us-central1-a") is None


ROWS = [RegionRow("us-central1", True, "", 4, 0, GceRegion(("us-central1-a", "us-central1-b", "us-central1-c"))),
        RegionRow("europe-west4", True, "", 1, 0, GceRegion(("europe-west4-b",))),
        RegionRow("us-east1", True, "", 2, 0, GceRegion(("us-east1-c", "us-east1-d"))),
        RegionRow("us-west2", False, "", 0, 0, GceRegion(("us-west2-b",)))]


def test_the_next_zone_is_the_same_regions_then_the_cheapest_other_regions():
    stockout = failover.Refusal("stockout", "us-central1-a", "us-central1", "")
    assert failover.next_zones(ROWS, stockout, ["us-central1-a"], spot=False) == [
        "us-central1-b", "us-central1-c", "us-east1-c", "us-east1-d", "europe-west4-b"]
    quota = failover.Refusal("region-quota", "us-central1-a", "us-central1", "")
    assert failover.next_zones(ROWS, quota, ["us-central1-a"], spot=False)[0] == "us-east1-c"
    assert failover.cheapest_zone(ROWS, spot=False) == "us-central1-a"


def test_gclouds_project_from_its_environment_or_its_active_configuration(tmp_path):
    (tmp_path / "configurations").mkdir()
    (tmp_path / "active_config").write_text("work")
    (tmp_path / "configurations" / "config_work").write_text("[core]\naccount = a@b.c\nproject = work-proj\n")
    assert gcloud_project({"CLOUDSDK_CONFIG": str(tmp_path)}) == "work-proj"
    assert gcloud_project({"CLOUDSDK_CONFIG": str(tmp_path), "CLOUDSDK_CORE_PROJECT": "env-proj"}) == "env-proj"
    assert gcloud_project({"CLOUDSDK_CONFIG": str(tmp_path / "none")}) is None
