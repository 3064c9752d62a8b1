"""The retained data disk comes back: a fixed name from the stack, and the next `pulumi up` after
a `pulumi destroy` adopts the disk it left, never one another VM uses. Under mocks whose
getDisk answers as the provider does: the disk, or the data source's "<id> not found" error
(components/gce/provider_answers.py cites the provider's code path)."""

from __future__ import annotations

import re
import threading
import time

import pytest

from gemma4_t4 import catalog
from gemma4_t4.clouds.gce import GCE, World
from gemma4_t4.clouds.gce.standins import MOCK_GCP_PROJECT
from gemma4_t4.components.gce import provider_answers as answers
from gemma4_t4.components.gce.names import GCE_NAME_MAX, gce_resource_name
from gemma4_t4.components.gce.settings import GCE_OWN_LABELS
from gemma4_t4.components.gce.storage import RETAIN_LABEL
from gemma4_t4.components.provider_answers import engine_failure


def stack_resource_name(project: str, stack: str, suffix: str) -> str:
    """The name the stack program gives one of its GCE resources."""
    return gce_resource_name(GCE.name_prefix(project, stack), suffix)

DISK = "gcp:compute/disk:Disk"
INSTANCE = "gcp:compute/instance:Instance"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
ZONE = "us-west2-b"
LOOKUP_S = 0.1  # a lookup's round trip, scaled down


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
    failure = engine_failure(answers.GET_DISK, answers.disk_not_found("p-1", ZONE, "s-data"))
    assert answers.is_disk_not_found(f"invoke of {answers.GET_DISK} failed: {failure}", ZONE, "s-data")
    assert not answers.is_disk_not_found(failure, ZONE, "other-data"), "another disk's answer"
    assert not answers.is_disk_not_found(failure, "us-east1-c", "s-data"), "another zone's answer"
    forbidden = engine_failure(answers.GET_DISK, answers.disk_forbidden("p-1", ZONE, "s-data"))
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
    as the provider does; {} would make every stack look new, so it is refused, naming the provider's answer and
    the mocks that give it."""
    monkeypatch.setattr(World, "get_disk", lambda self, args: {})
    error, _ = refused_stack("gce-t4")
    assert "answered without a disk id" in error.problem and "disks/gemma4-t4-gce-t4-data not found" in error.problem
    assert "gemma4_t4.testing.ProviderMocks()" in error.fix


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


def _disk_after(plan, **changes) -> dict:
    """The data disk as GCE holds it after an `up` that registered PLAN's: its inputs, and no VM ever attached
    it unless CHANGES say so (a failed VM create leaves the disk alone: ZONE_RESOURCE_POOL_EXHAUSTED)."""
    disk = plan.one(DISK).inputs
    return {"zone": disk["zone"], "sizeGb": disk["size"], "type": disk["type"], "users": [],
            "labels": disk["labels"], **changes}


def _used_disk(zone: str, retain: str | None = None) -> dict:
    """A data disk a VM used, detached now (the stack's VM went with a destroy or a zone change)."""
    labels = {"app": "gemma4-t4", **({RETAIN_LABEL: retain} if retain else {})}
    return {"zone": zone, "sizeGb": 250, "type": "pd-balanced", "users": [], "labels": labels,
            "lastAttachTimestamp": "2030-01-01T00:00:00.000-08:00", "lastDetachTimestamp": "2030-01-02T00:00:00.000-08:00"}


def test_a_stock_out_then_the_readmes_remedy_serves_in_the_new_zone_and_leaves_nothing_billing(run_stack,
                                                                                               refused_stack):
    name = stack_resource_name("gemma4-t4", "gce-t4", "data")
    # First `up` in us-west2-b: the disk is made, then the VM fails (no T4 free): the state keeps the disk,
    # never attached, with the retain flag of that `up` (true, the default).
    first = run_stack("gce-t4")
    assert first.one(DISK).options["retainOnDelete"] is True
    assert first.one(DISK).inputs["labels"][RETAIN_LABEL] == "true", "the label says what the state says"
    after_first = World(disks={name: _disk_after(first)})
    # The remedy: another zone. The engine would replace the disk and, following the flag the first `up`
    # saved, keep the old one out of the stack, billing: so the preview says to delete it, since it is empty.
    error, partial = refused_stack("gce-t4", "zone=us-central1-a", world={"gce": after_first})
    assert error.key == "gemma4-t4:zone" and "holds no data" in error.problem and "billing" in error.problem
    assert error.fix == (f"delete the empty disk (gcloud compute disks delete {name} --zone us-west2-b --project "
                         f"{MOCK_GCP_PROJECT} --quiet), then pulumi up")
    assert partial.resources == [], "nothing is registered, so nothing new bills"
    # After that command: a serving plan in the new zone, its own new disk, nothing adopted from the old zone.
    plan = run_stack("gce-t4", "zone=us-central1-a", world={"gce": World()})
    disk, vm = plan.one(DISK), plan.one(INSTANCE)
    assert disk.inputs["zone"] == vm.inputs["zone"] == "us-central1-a"
    assert disk.options["importId"] == "", "a new disk, not the empty one adopted as data"
    assert vm.inputs["attachedDisks"][0]["source"] == disk.state["selfLink"]
    # us-central1 is another region: the subnet is replaced, and its range may exist only once in the network.
    assert plan.one(SUBNET).inputs["region"] == "us-central1" and plan.one(SUBNET).options["deleteBeforeReplace"]


def test_an_empty_disk_whose_up_saved_retain_false_goes_with_the_replacement(run_stack):
    """retainDataDisk false from the first `up`: the state's flag is false, so the engine deletes the old disk when
    it replaces it (step.go DeleteStep.Apply): no refusal, nothing left."""
    name = stack_resource_name("gemma4-t4", "gce-t4", "data")
    first = run_stack("gce-t4", "retainDataDisk=false")
    assert first.one(DISK).options["retainOnDelete"] is False
    world = {"gce": World(disks={name: _disk_after(first)})}
    plan = run_stack("gce-t4", "retainDataDisk=false", "zone=us-central1-a", world=world)
    assert plan.one(DISK).inputs["zone"] == "us-central1-a" and plan.one(DISK).options["importId"] == ""


def test_a_zone_change_that_would_leave_the_disk_billing_is_refused(refused_stack):
    name = stack_resource_name("gemma4-t4", "gce-t4", "data")
    world = {"gce": World(disks={name: _used_disk("us-central1-a")})}
    error, partial = refused_stack("gce-t4", world=world)  # the stack's zone: us-west2-b
    assert error.key == "gemma4-t4:zone" and f"data disk {name}" in error.problem and "billing" in error.problem
    assert error.fix.startswith("pulumi config set gemma4-t4:zone us-central1-a, or move the disk first")
    assert partial.resources == [], "no second disk is registered"


@pytest.mark.parametrize("saved", [None, "true"])
def test_retain_false_in_the_same_up_as_a_zone_change_is_refused_with_the_two_steps(refused_stack, saved):
    """The engine deletes a replaced resource by the flag in the state, not the new one (pulumi/pulumi#13428):
    retainDataDisk false in the same `up` as the zone change would leave the old disk billing, out of the stack.
    A disk without the label is from before it, when the flag could only be read as the default (true)."""
    name = stack_resource_name("gemma4-t4", "gce-t4", "data")
    world = {"gce": World(disks={name: _used_disk("us-central1-a", retain=saved)})}
    error, partial = refused_stack("gce-t4", "retainDataDisk=false", world=world)
    assert error.key == "gemma4-t4:retainDataDisk" and "pulumi/pulumi#13428" in error.problem
    assert error.fix == ("two steps: first pulumi config set gemma4-t4:zone us-central1-a && pulumi config set "
                         "gemma4-t4:retainDataDisk false && pulumi up; then pulumi config set gemma4-t4:zone "
                         "us-west2-b && pulumi up")
    assert partial.resources == []


def test_the_two_steps_delete_the_old_disk_with_the_zone_change(run_stack):
    name = stack_resource_name("gemma4-t4", "gce-t4", "data")
    vm = stack_resource_name("gemma4-t4", "gce-t4", "vm")
    link = f"https://www.googleapis.com/compute/v1/projects/{MOCK_GCP_PROJECT}/zones/us-central1-a/instances/{vm}"
    deployed = {**_used_disk("us-central1-a", retain="true"), "users": [link]}
    # Step one, in the disk's zone: the flag (and its label) become false in the state.
    step_one = run_stack("gce-t4", "zone=us-central1-a", "retainDataDisk=false",
                         world={"gce": World(disks={name: deployed})})
    disk = step_one.one(DISK)
    assert disk.options["importId"] and disk.options["retainOnDelete"] is False
    assert disk.inputs["labels"][RETAIN_LABEL] == "false"
    # Step two, the zone change: not refused; the replacement deletes the old disk (the state's flag is false).
    after = {**deployed, "labels": disk.inputs["labels"]}
    plan = run_stack("gce-t4", "retainDataDisk=false", world={"gce": World(disks={name: after})})
    assert plan.one(DISK).inputs["zone"] == "us-west2-b" and plan.one(DISK).options["importId"] == ""


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


def test_the_retain_label_is_one_a_user_cannot_set():
    assert RETAIN_LABEL in GCE_OWN_LABELS


def test_a_new_stacks_lookups_run_at_once_one_per_t4_zone(run_stack, monkeypatch):
    """A new stack finds no disk in its zone and looks in every other T4 zone; each lookup is a round trip
    (engine, provider, Compute API), twice per `pulumi up`. They must overlap, not queue."""
    lock, calls, in_flight, most = threading.Lock(), [], [0], [0]
    answer = World.get_disk

    def slow_get_disk(self, args):
        with lock:
            calls.append(args["zone"])
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        try:
            time.sleep(LOOKUP_S)
            return answer(self, args)
        finally:
            with lock:
                in_flight[0] -= 1

    monkeypatch.setattr(World, "get_disk", slow_get_disk)
    started = time.monotonic()
    run_stack("gce-t4")
    elapsed = time.monotonic() - started
    assert calls[0] == ZONE and sorted(calls) == sorted(catalog.GCE_T4_ZONES), "one lookup per T4 zone, its own first"
    assert len(calls) == 47
    assert most[0] >= 4, f"at most {most[0]} lookups at once"
    assert elapsed < len(calls) * LOOKUP_S / 2, f"{elapsed:.1f} s for {len(calls)} lookups of {LOOKUP_S} s"
