"""The retained data disk comes back: a fixed name from the stack, and the next `pulumi up` after
a `pulumi destroy` adopts the disk it left, never one another VM uses. Under mocks whose
getDisk answers as the provider does: the disk, or the data source's "<id> not found" error
(components/provider_answers.py cites the provider's code path)."""

from __future__ import annotations

import re

import pytest

from gemma4_t4.clouds.gce import GCE, World
from gemma4_t4.components import provider_answers as answers
from gemma4_t4.components.gce import GCE_NAME_MAX, gce_resource_name
from gemma4_t4.core.plan import MOCK_GCP_PROJECT


def stack_resource_name(project: str, stack: str, suffix: str) -> str:
    """The name the stack program gives one of its GCE resources."""
    return gce_resource_name(GCE.name_prefix(project, stack), suffix)

pytestmark = pytest.mark.components

DISK = "gcp:compute/disk:Disk"
INSTANCE = "gcp:compute/instance:Instance"
ZONE = "us-west2-b"


def _cloud(name: str, **disk) -> dict:
    return {"gce": World(disks={name: {"zone": ZONE, "sizeGb": 250, "type": "pd-balanced", "users": [],
                                   "labels": {"app": "gemma4-t4"}, **disk}})}


def _instance_link(name: str) -> str:
    return f"https://www.googleapis.com/compute/v1/projects/{MOCK_GCP_PROJECT}/zones/{ZONE}/instances/{name}"


def test_disk_and_vm_names_are_fixed_by_the_stack(run_stack):
    first, second = run_stack("gce-t4"), run_stack("gce-t4")
    names = {p.one(DISK).state["name"] for p in (first, second)}
    assert len(names) == 1, "a random suffix would make the next `up` miss the retained disk"
    assert names == {stack_resource_name("gemma4-t4", "gce-t4", "data")}
    assert first.one(INSTANCE).state["name"] == second.one(INSTANCE).state["name"]
    assert first.outputs["data_disk_name"] == names.pop()


def test_a_first_up_creates_the_disk(run_stack):
    disk = run_stack("gce-t4").one(DISK)
    assert disk.options["importId"] == ""
    assert disk.options["retainOnDelete"] is True


def test_the_up_after_a_destroy_adopts_the_retained_disk(run_stack):
    name = stack_resource_name("gemma4-t4", "gce-t4", "data")
    plan = run_stack("gce-t4", world=_cloud(name))
    disk = plan.one(DISK)
    assert disk.options["importId"] == f"projects/{MOCK_GCP_PROJECT}/zones/{ZONE}/disks/{name}"
    assert disk.state["name"] == name
    assert plan.one(INSTANCE).inputs["attachedDisks"][0]["source"] == disk.state["selfLink"]


def test_the_providers_answer_for_a_missing_disk_is_read_as_absent():
    failure = answers.engine_failure(answers.GET_DISK, answers.disk_not_found("p-1", ZONE, "s-data"))
    assert answers.is_disk_not_found(f"invoke of {answers.GET_DISK} failed: {failure}", ZONE, "s-data")
    assert not answers.is_disk_not_found(failure, ZONE, "other-data"), "another disk's answer"
    assert not answers.is_disk_not_found(failure, "us-east1-c", "s-data"), "another zone's answer"
    forbidden = answers.engine_failure(answers.GET_DISK, answers.disk_forbidden("p-1", ZONE, "s-data"))
    assert not answers.is_disk_not_found(forbidden, ZONE, "s-data")
    # What main read as "absent" before: a text the provider never sends for a missing disk.
    assert not answers.is_disk_not_found("googleapi: Error 404: The resource 'projects/p-1/zones/"
                                         f"{ZONE}/disks/s-data' was not found, notFound", ZONE, "s-data")


def test_a_permission_error_is_refused_not_read_as_absent(refused_stack):
    name = stack_resource_name("gemma4-t4", "gce-t4", "data")
    error, partial = refused_stack("gce-t4", world={"gce": World(forbidden=True)})
    assert error.key == "gemma4-t4:retainDataDisk"
    assert f"could not read whether the data disk {name} exists" in error.problem
    assert "Error 403: Required 'compute.disks.get' permission" in error.problem
    assert "invocation of" not in error.problem, "the provider's message, not the engine's wrapping"
    assert "compute.disks.get" in error.fix and "gemma4-t4:project" in error.fix
    assert partial.resources == [], "a refused lookup registers nothing"


def test_a_lookup_answered_without_a_disk_is_refused(refused_stack, monkeypatch):
    """A user's mocks that answer every call with {} (as Pulumi's testing guide's do) must answer getDisk
    as the provider does; {} would make every stack look new, so it is refused with the text to raise."""
    monkeypatch.setattr(World, "get_disk", lambda self, args: {})
    error, _ = refused_stack("gce-t4")
    assert "answered without a disk id" in error.problem and "not found" in error.fix


def test_an_up_while_the_vm_exists_keeps_its_own_disk(run_stack):
    name = stack_resource_name("gemma4-t4", "gce-t4", "data")
    vm = stack_resource_name("gemma4-t4", "gce-t4", "vm")
    disk = run_stack("gce-t4", world=_cloud(name, users=[_instance_link(vm)])).one(DISK)
    assert disk.options["importId"].endswith(f"/disks/{name}")


def test_a_disk_attached_to_another_vm_is_never_taken(refused_stack):
    name = stack_resource_name("gemma4-t4", "gce-t4", "data")
    error, partial = refused_stack("gce-t4", world=_cloud(name, users=[_instance_link("someone-elses-vm")]))
    assert error.key == "gemma4-t4:retainDataDisk"
    assert "someone-elses-vm" in error.problem and "detach-disk" in error.fix
    assert partial.resources == [], "a refused config registers nothing"


def test_a_disk_gemma4_t4_did_not_make_is_never_adopted(refused_stack):
    name = stack_resource_name("gemma4-t4", "gce-t4", "data")
    error, partial = refused_stack("gce-t4", world=_cloud(name, labels={"team": "someone-else"}))
    assert error.key == "gemma4-t4:retainDataDisk"
    assert "did not make it" in error.problem and "another stack name" in error.fix
    assert partial.resources == [], "a refused config registers nothing"


def test_a_disk_of_another_zone_is_not_this_stacks(run_stack):
    name = stack_resource_name("gemma4-t4", "gce-t4", "data")
    world = {"gce": World(disks={name: {"zone": "europe-west4-a", "sizeGb": 250, "type": "pd-balanced",
                                        "users": []}})}
    assert run_stack("gce-t4", world=world).one(DISK).options["importId"] == ""


def test_a_zone_change_that_would_leave_the_disk_billing_is_refused(refused_stack):
    name = stack_resource_name("gemma4-t4", "gce-t4", "data")
    world = {"gce": World(disks={name: {"zone": "us-central1-a", "sizeGb": 250, "type": "pd-balanced", "users": [],
                                        "labels": {"app": "gemma4-t4"}}})}
    error, partial = refused_stack("gce-t4", world=world)  # the stack's zone: us-west2-b
    assert error.key == "gemma4-t4:zone" and f"data disk {name}" in error.problem and "billing" in error.problem
    assert error.fix.startswith("pulumi config set gemma4-t4:zone us-central1-a, or move the disk first")
    assert partial.resources == [], "no second disk is registered"


def test_without_retention_a_zone_change_is_not_refused(run_stack):
    """retainDataDisk false: the old disk goes with the replacement (nothing is left billing)."""
    name = stack_resource_name("gemma4-t4", "gce-t4", "data")
    world = {"gce": World(disks={name: {"zone": "us-central1-a", "sizeGb": 250, "type": "pd-balanced", "users": [],
                                        "labels": {"app": "gemma4-t4"}}})}
    assert run_stack("gce-t4", "retainDataDisk=false", world=world).one(DISK).options["importId"] == ""


@pytest.mark.parametrize("change,key,fix", [
    ({"sizeGb": 500}, "dataDiskSizeGb", "pulumi config set gemma4-t4:dataDiskSizeGb 500"),
    ({"type": "pd-ssd"}, "dataDiskType", "pulumi config set gemma4-t4:dataDiskType pd-ssd"),
])
def test_a_config_that_would_replace_the_retained_disk_is_refused(refused_stack, change, key, fix):
    error, _ = refused_stack("gce-t4", world=_cloud(stack_resource_name("gemma4-t4", "gce-t4", "data"), **change))
    assert error.key == f"gemma4-t4:{key}" and error.fix == fix


def test_a_bigger_config_grows_the_adopted_disk(run_stack):
    name = stack_resource_name("gemma4-t4", "gce-t4", "data")
    disk = run_stack("gce-t4", "dataDiskSizeGb=300", world=_cloud(name)).one(DISK)
    assert disk.options["importId"] and disk.inputs["size"] == 300.0


@pytest.mark.parametrize("stack", ["gce-t4", "Prod_GCE.eu", "x" * 100, "9lives"])
def test_stack_names_become_valid_gce_names(stack):
    name = stack_resource_name("gemma4-t4", stack, "data")
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= GCE_NAME_MAX
    assert name.endswith("-data")
