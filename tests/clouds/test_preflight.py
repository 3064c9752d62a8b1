"""Preflight decisions on recorded API responses (shapes as compute_v1 to_dict / boto3 return them)."""

from __future__ import annotations

import pytest
from conftest import REPO

from gemma4_t4 import clouds
from gemma4_t4.clouds.gce import capacity as gce_capacity
from gemma4_t4.clouds.gce import preflight as gce_preflight
from gemma4_t4.clouds.gce.preflight import GceNeeds
from gemma4_t4.clouds.sagemaker import capacity
from gemma4_t4.clouds.sagemaker.preflight import SageMakerNeeds
from gemma4_t4.components.sagemaker import quotas
from gemma4_t4.core.preflight import Needs

REGION_QUOTA_0 = {"name": "us-west2", "quotas": [{"metric": "CPUS", "limit": 24.0, "usage": 0.0},
                                                {"metric": "NVIDIA_T4_GPUS", "limit": 0.0, "usage": 0.0}]}
REGION_QUOTA_USED = {"name": "us-west2", "quotas": [{"metric": "NVIDIA_T4_GPUS", "limit": 1.0, "usage": 1.0}]}
REGION_OK = {"name": "us-west2", "quotas": [{"metric": "NVIDIA_T4_GPUS", "limit": 4.0, "usage": 1.0}]}
PROJECT_0 = {"name": "p", "quotas": [{"metric": "GPUS_ALL_REGIONS", "limit": 0.0, "usage": 0.0}]}
PROJECT_OK = {"name": "p", "quotas": [{"metric": "GPUS_ALL_REGIONS", "limit": 2.0, "usage": 0.0}]}
ZONES = ["us-west2-b", "us-west2-c"]


def _by_name(checks):
    return {c.name: c for c in checks}


def test_new_project_has_zero_quota_in_both_places():
    checks = _by_name(gce_preflight.gce_checks("us-west2", "us-west2-b", "nvidia-tesla-t4", 1, REGION_QUOTA_0,
                                           PROJECT_0, ZONES))
    region, world = checks["NVIDIA_T4_GPUS"], checks["GPUS_ALL_REGIONS"]
    assert not region.ok and "new projects start at 0" in region.detail
    assert region.fix == "request a NVIDIA_T4_GPUS quota of at least 1 for region us-west2 (IAM & Admin > Quotas)"
    assert not world.ok and "the project (global)" in world.fix


def test_quota_used_up_by_another_vm_fails():
    check = _by_name(gce_preflight.gce_checks("us-west2", "us-west2-b", "nvidia-tesla-t4", 1, REGION_QUOTA_USED,
                                          PROJECT_OK, ZONES))["NVIDIA_T4_GPUS"]
    assert not check.ok and "in use 1, free 0" in check.detail and "at least 2" in check.fix


def test_zone_without_a_t4_names_the_zones_that_have_one():
    check = _by_name(gce_preflight.gce_checks("us-west2", "us-west2-a", "nvidia-tesla-t4", 1, REGION_OK, PROJECT_OK,
                                          ZONES))["nvidia-tesla-t4 in us-west2-a"]
    assert not check.ok and check.fix.startswith("pulumi config set gemma4-t4:zone us-west2-b")
    none = gce_preflight.gce_checks("europe-west9", "europe-west9-a", "nvidia-tesla-t4", 1, REGION_OK, PROJECT_OK, [])
    assert "no zone of europe-west9 offers" in none[-1].detail


def test_all_good_passes():
    checks = gce_preflight.gce_checks("us-west2", "us-west2-b", "nvidia-tesla-t4", 1, REGION_OK, PROJECT_OK, ZONES)
    assert all(c.ok for c in checks) and [c.name for c in checks][:2] == ["NVIDIA_T4_GPUS", "GPUS_ALL_REGIONS"]


# SageMaker decisions (the same checks against moto's server: test_sagemaker_preflight.py).
G4DN = quotas.EndpointQuota("ml.g4dn.xlarge for endpoint usage", "L-CODE", 2.0, applied=True)


@pytest.mark.parametrize("quota,in_use,ok,fragment", [
    (G4DN, 0, True, "limit 2 (applied), in use 0, free 2"),
    # Room for the endpoint and for a later change's new fleet beside it (blue/green).
    (G4DN, 2, False, 'request "ml.g4dn.xlarge for endpoint usage" = 4 in us-east-2'),
    (quotas.EndpointQuota("ml.g4dn.xlarge for endpoint usage", "L-CODE", 0.0, applied=False), 0, False,
     "limit 0 (AWS default; nothing applied to this account)"),
    (None, 0, False, "does not offer ml.g4dn.xlarge here"),
])
def test_sagemaker_endpoint_quota(quota, in_use, ok, fragment):
    (check,) = quotas.sagemaker_checks("us-east-2", "ml.g4dn.xlarge", 1, quota, in_use, None)
    assert check.ok is ok and not check.warning and fragment in check.detail + check.fix


def test_an_update_that_needs_twice_the_quota_is_a_warning_with_the_numbers():
    running, update = quotas.sagemaker_checks("us-east-2", "ml.g4dn.xlarge", 1,
                                                 G4DN, 2, 1)
    assert running.ok and "this stack's endpoint holds 1" in running.detail
    assert update.ok and update.warning and "needs 3 ml.g4dn.xlarge, the limit is 2" in update.detail
    assert update.fix.startswith('request "ml.g4dn.xlarge for endpoint usage" = 3 in us-east-2')


def test_an_update_that_fits_is_ok():
    _, update = quotas.sagemaker_checks("us-east-2", "ml.g4dn.xlarge", 1, G4DN, 1, 1)
    assert update.ok and not update.warning and "2 of 2 fit" in update.detail


# --- autoscaling: the quota for the most instances, and an update's two fleets ----------------------------


def test_autoscaling_that_fits_its_maximum_is_ok():
    checks = _by_name(quotas.sagemaker_checks("us-east-2", "ml.g4dn.xlarge", 1, G4DN_4, 0, None, most=3))
    assert checks["autoscaling to maxInstanceCount"].ok and not checks["autoscaling to maxInstanceCount"].warning
    assert "3 x ml.g4dn.xlarge fit beside the 0 other endpoints hold (3 of 4)" in \
        checks["autoscaling to maxInstanceCount"].detail


def test_autoscaling_beyond_the_quota_starts_but_warns_with_the_number():
    checks = _by_name(quotas.sagemaker_checks("us-east-2", "ml.g4dn.xlarge", 1, G4DN, 0, None, most=5))
    assert checks["ml.g4dn.xlarge for endpoint usage"].ok
    scaling = checks["autoscaling to maxInstanceCount"]
    assert scaling.ok and scaling.warning and "scales out to 2 of 5" in scaling.detail
    assert scaling.fix.startswith('request "ml.g4dn.xlarge for endpoint usage" = 5 in us-east-2')


def test_an_autoscaled_update_counts_the_old_fleet_at_its_most():
    """The old endpoint keeps serving (and scaling) until the new one is up."""
    _, scaling, update = quotas.sagemaker_checks("us-east-2", "ml.g4dn.xlarge", 1, G4DN_4, 2, 2, most=3)
    assert scaling.ok and not scaling.warning
    assert update.ok and not update.warning and "(3 + 1): 4 of 4 fit" in update.detail
    *_, tight = quotas.sagemaker_checks("us-east-2", "ml.g4dn.xlarge", 1, G4DN_4, 3, 2, most=3)
    assert tight.warning and "it needs 5 ml.g4dn.xlarge, the limit is 4" in tight.detail


G4DN_4 = quotas.EndpointQuota("ml.g4dn.xlarge for endpoint usage", "L-CODE", 4.0, applied=True)


# --- what the stack needs, read off its plan ---------------------------------------------------------------


def test_needs_are_what_the_program_would_create(run_stack):
    config = {"aws:region": "us-east-2"}
    gce = clouds.needs(run_stack("gce-t4", "tensorParallelSize=4", "zone=us-central1-b"), config)
    assert gce == Needs("gce", "us-central1", GceNeeds("us-central1-b", "nvidia-tesla-t4", 4))
    sagemaker = clouds.needs(run_stack("sagemaker-t4", "tensorParallelSize=2", "maxInstanceCount=3"), config)
    assert sagemaker == Needs("sagemaker", "us-east-2", SageMakerNeeds("ml.g4dn.12xlarge", 1, 3))
    fixed = clouds.needs(run_stack("sagemaker-t4", "instanceCount=2"), config)
    assert fixed.own == SageMakerNeeds("ml.g4dn.xlarge", 2, 2)



def test_what_a_plan_says_of_spot_and_user_data_is_its_clouds_reading(run_stack):
    """The core reads no provider's inputs: whether the server is Spot and the user-data it boots with are the cloud's
    (GCE: the VM's scheduling and its metadata's user-data; SageMaker has neither)."""
    gce, spot, sagemaker = run_stack("gce-t4"), run_stack("gce-t4", "spot=true"), run_stack("sagemaker-t4")
    assert [clouds.plan_cloud(plan).is_spot(plan) for plan in (gce, spot, sagemaker)] == [False, True, False]
    assert clouds.plan_cloud(gce).user_data(gce).startswith("#cloud-config")
    assert clouds.plan_cloud(sagemaker).user_data(sagemaker) is None

# --- every region (GCE): recorded API responses through the real client -------------------------------------


@pytest.fixture(scope="module")
def recorded_gce():
    """regions.list, projects.get and acceleratorTypes.aggregatedList as the real
    google-cloud-compute client returns them from the recorded responses (tests/fixtures/gce/)."""
    from compute_standin import ComputeStandIn

    with ComputeStandIn("gemma-proj") as standin:
        fetched = gce_capacity.fetch_gce_regions("gemma-proj", "nvidia-tesla-t4", **standin.client_kwargs())
        requests = list(standin.requests)
    return fetched, requests


def _gce_report(recorded_gce, zone="us-west2-b", gpus=1):
    regions, project_doc, offers = recorded_gce[0]
    needs = Needs("gce", zone.rsplit("-", 1)[0], GceNeeds(zone, "nvidia-tesla-t4", gpus))
    return gce_capacity.gce_regions(needs, regions, project_doc, offers)


def test_three_calls_cover_every_region_and_the_accelerator_filter_is_the_apis(recorded_gce):
    (regions, _, offers), requests = recorded_gce
    assert [r.split("?")[0] for r in requests] == ["GET /compute/v1/projects/gemma-proj/regions",
                                                   "GET /compute/v1/projects/gemma-proj",
                                                   "GET /compute/v1/projects/gemma-proj/aggregated/acceleratorTypes"]
    assert "filter=name+%3D+%22nvidia-tesla-t4%22" in requests[2]
    assert len(regions) == 5 and offers["us-east1-b"] == 2 and "us-west2-a" not in offers


def test_a_new_project_in_us_west2_is_sent_to_the_first_region_with_quota(recorded_gce):
    report = _gce_report(recorded_gce)
    rows = {row.region: row for row in report.rows}
    assert [row.region for row in report.rows] == ["us-west2", "europe-west4", "us-central1", "us-east1"]
    assert not rows["us-west2"].ok and "quota 0, in use 0, free 0 (new projects start at 0)" in rows["us-west2"].detail
    assert not rows["europe-west4"].ok and "quota 1, in use 1, free 0" in rows["europe-west4"].detail
    assert report.first is rows["us-central1"] and report.first.where == "us-central1 (zone us-central1-a)"
    assert report.config_lines == ["pulumi config set gemma4-t4:zone us-central1-a"]
    assert "us-east1-b not in the catalog's zone list" in rows["us-east1"].detail
    assert gce_capacity.zones(rows["us-east1"]) == ("us-east1-c", "us-east1-d")
    assert "1 region sells no nvidia-tesla-t4 (europe-west9): not listed" in report.notes


def test_the_stacks_own_zone_that_works_needs_no_move(recorded_gce):
    report = _gce_report(recorded_gce, zone="us-central1-b", gpus=2)
    assert report.first.region == "us-central1" and report.first.where == "us-central1 (zone us-central1-b)"
    assert report.config_lines == [] and report.rows[0].region == "us-central1"


def test_a_vm_of_four_t4s_fits_nowhere_when_the_project_allows_three(recorded_gce):
    report = _gce_report(recorded_gce, gpus=4)
    assert report.first is None and report.config_lines == []
    assert any("GPUS_ALL_REGIONS: limit 4, in use 1: no region can add 4" in note and "at least 5" in note
               for note in report.notes)
    east = next(row for row in report.rows if row.region == "us-east1")
    assert "us-east1-b takes at most 2 per VM" in east.detail


# --- every region (SageMaker): the decision on fetched rows -------------------------------------------------


def test_sagemaker_regions_start_with_the_stacks_own_and_name_the_first_that_fits():
    needs = Needs("sagemaker", "us-east-2", SageMakerNeeds("ml.g4dn.xlarge", instances=1, most=2))
    quota = quotas.EndpointQuota("ml.g4dn.xlarge for endpoint usage", "L-CODE", 2.0, applied=True)
    default = quotas.EndpointQuota("ml.g4dn.xlarge for endpoint usage", "L-CODE", 0.0, applied=False)
    report = capacity.sagemaker_regions(needs, [
        capacity.RegionQuota("ap-east-2", error="not enabled for this account (opt-in region?): ..."),
        capacity.RegionQuota("eu-west-1", default, 0, None),
        capacity.RegionQuota("us-east-2", quota, 2, None),
        capacity.RegionQuota("us-west-1", None),
        capacity.RegionQuota("us-west-2", quota, 0, None),
    ])
    rows = {row.region: row for row in report.rows}
    assert report.rows[0].region == "us-east-2" and not rows["us-east-2"].ok
    assert "request 4 (quota code L-CODE)" in rows["us-east-2"].detail
    assert not rows["eu-west-1"].ok and "0 (AWS default)" in rows["eu-west-1"].detail
    assert not rows["ap-east-2"].ok and "opt-in" in rows["ap-east-2"].detail
    assert "does not offer ml.g4dn.xlarge" in rows["us-west-1"].detail
    assert report.first is rows["us-west-2"] and report.config_lines == ["pulumi config set aws:region us-west-2"]
    assert report.needed == "2 x ml.g4dn.xlarge (autoscaling from 1)"


def test_the_stacks_own_endpoint_makes_room_in_its_region():
    needs = Needs("sagemaker", "us-east-2", SageMakerNeeds("ml.g4dn.xlarge", instances=1, most=1))
    quota = quotas.EndpointQuota("ml.g4dn.xlarge for endpoint usage", "L-CODE", 1.0, applied=True)
    report = capacity.sagemaker_regions(needs, [capacity.RegionQuota("us-east-2", quota, 1, 1)])
    assert report.first.region == "us-east-2" and report.config_lines == []


def test_the_cli_prints_every_region_and_the_lines_that_move_the_stack(monkeypatch, capsys):
    from compute_standin import ComputeStandIn

    from gemma4_t4.cli import main

    fetch = gce_capacity.fetch_gce_regions
    with ComputeStandIn("gemma-proj") as standin:
        monkeypatch.setattr(gce_capacity, "fetch_gce_regions",
                            lambda project, accelerator: fetch(project, accelerator, **standin.client_kwargs()))
        code = main(["preflight", "gce-t4", "--project-dir", str(REPO), "--project", "gemma-proj", "--all-regions"])
    out = capsys.readouterr().out
    assert code == 0 and "each region must hold 1 x nvidia-tesla-t4 on one VM" in out
    assert "first that works: us-central1 (zone us-central1-a); to move the stack there:" in out
    assert "  pulumi config set gemma4-t4:zone us-central1-a" in out and "us-west2 (this stack)" in out
