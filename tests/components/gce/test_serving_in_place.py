"""A serving value, a guest setting or a release's guest files changed in the stack update the VM in place; only a
new machine replaces it.

What replaces a gcp.compute.Instance is the provider's schema (hashicorp/terraform-provider-google,
google/services/compute/resource_compute_instance.go at e03b7622, the schema pulumi-gcp bridges):
`boot_disk`, `guest_accelerator`, `name`, `network_interface` and `zone` are ForceNew;
`metadata_startup_script` is made ForceNew by the resource's CustomizeDiff
(`customdiff.ForceNewIf("metadata_startup_script", ...)`, all but the switch from metadata.startup-script
with the same text); `metadata` is not ForceNew: Update sends it with setMetadata (`if d.HasChange("metadata")`);
`machine_type` is updated with the VM stopped (allow_stopping_for_update). The component sets no
replaceOnChanges, so these are the only ways to a replacement: a serving change must leave every input
but the metadata byte-identical, and in the metadata only the serving key may change; a guest change (a guard, the
swap size, the vLLM version, a release's scripts) only the user-data key, which the guest applies on the running
VM (cloudinit/scripts/guest_bundle.py), never the startup-script.
"""

from __future__ import annotations

import json

import pytest

from gemma4_t4 import catalog
from gemma4_t4.components.gce import guest as render

INSTANCE = "gcp:compute/instance:Instance"
DISK = "gcp:compute/disk:Disk"
FORCE_NEW = catalog.GCE_INSTANCE_FORCE_NEW


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True)


def _at(inputs: dict, dotted: str):
    for key in dotted.split("."):
        inputs = inputs.get(key) if isinstance(inputs, dict) else None
    return inputs


def _replaced_by(before: dict, after: dict) -> list[str]:
    """The ForceNew inputs (a dotted one: a key inside an input) whose values differ: the provider's plan replaces the
    VM for any."""
    return [key for key in FORCE_NEW if _canonical(_at(before, key)) != _canonical(_at(after, key))]


def _changed(before: dict, after: dict) -> set[str]:
    return {key for key in before.keys() | after.keys() if _canonical(before.get(key)) != _canonical(after.get(key))}


@pytest.mark.parametrize("change", [
    ("maxModelLen=8192",),
    ("maxNumSeqs=4",),
    ("gpuMemoryUtilization=0.85",),
    ("model=google/gemma-4-E2B-it", "dtype=float16"),
    ("servedModelName=gemma",),
    ("port=8001",),
    ("languageModelOnly=false",),
    ("modelRevision=0123456789abcdef0123456789abcdef01234567",),
], ids=lambda change: " ".join(change))
def test_a_serving_change_is_an_update_in_place(run_stack, change):
    base, changed = run_stack("gce-t4"), run_stack("gce-t4", *change)
    before, after = base.one(INSTANCE).inputs, changed.one(INSTANCE).inputs
    assert _replaced_by(before, after) == []
    assert _changed(before, after) == {"metadata"}, "only the metadata changes (setMetadata, in place)"
    assert _changed(before["metadata"], after["metadata"]) == {render.SERVING_METADATA_KEY}
    assert before["metadata"]["user-data"] == after["metadata"]["user-data"]
    assert _canonical(base.one(DISK).inputs) == _canonical(changed.one(DISK).inputs)


@pytest.mark.parametrize("change", [("swapSizeGb=20",), ("idleStopMinutes=30",), ("idleStopMinutes=0",),
                                    ("vllmVersion=0.33.0",)], ids=lambda change: " ".join(change))
def test_a_guest_setting_is_an_update_in_place(run_stack, change):
    """The guest's own settings reach the running VM in its user-data (setMetadata); the startup-script, which the
    provider replaces the VM for, stays as it was."""
    base, changed = run_stack("gce-t4"), run_stack("gce-t4", *change)
    before, after = base.one(INSTANCE).inputs, changed.one(INSTANCE).inputs
    assert _replaced_by(before, after) == []
    assert _changed(before, after) == {"metadata"}
    assert _changed(before["metadata"], after["metadata"]) == {"user-data"}
    assert _canonical(base.one(DISK).inputs) == _canonical(changed.one(DISK).inputs)


def test_a_release_that_changes_the_guests_files_is_an_update_in_place(run_stack, monkeypatch, tmp_path):
    """A new release's scripts, units or clamp: the user-data changes, the startup-script does not."""
    before = run_stack("gce-t4").one(INSTANCE).inputs
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    for script in render.guest_scripts():
        (scripts / script.name).write_text(script.read_text())
    serve = scripts / "serve.sh"
    serve.write_text(serve.read_text() + "# a later release's line\n")
    monkeypatch.setattr(render, "guest_scripts", lambda: sorted(scripts.iterdir(), key=lambda p: p.name))
    after = run_stack("gce-t4").one(INSTANCE).inputs
    assert "# a later release's line" in after["metadata"]["user-data"]
    assert _replaced_by(before, after) == []
    assert _changed(before["metadata"], after["metadata"]) == {"user-data"}


# The first line of every lock up to 0.4.0: the path of a module that has since moved.
LOCK_HEADER_030 = "# gemma4-t4 guest lock: generated by `make guest-lock` (components/guest_lock.py); do not edit."


def test_the_locks_new_header_is_an_update_in_place(run_stack, monkeypatch, tmp_path):
    """The lock as 0.3.0 shipped it, and with the header `make guest-lock` writes now: a new user-data the running VM
    applies (no new venv there: install-vllm.sh names it by the lock's pins), nothing the provider replaces it for."""
    now = run_stack("gce-t4").one(INSTANCE).inputs
    lock = render.lock_file(catalog.PINS["vllm.gce"]).read_text()
    shipped = tmp_path / "vllm-lock.txt"
    shipped.write_text(LOCK_HEADER_030 + "\n" + lock.split("\n", 1)[1])
    monkeypatch.setattr(render, "lock_file", lambda version: shipped)
    then = run_stack("gce-t4").one(INSTANCE).inputs
    assert LOCK_HEADER_030 in then["metadata"]["user-data"] and LOCK_HEADER_030 not in now["metadata"]["user-data"]
    assert _replaced_by(then, now) == []
    assert _changed(then, now) == {"metadata"}
    assert _changed(then["metadata"], now["metadata"]) == {"user-data"}


def test_the_boot_image_is_the_named_image_the_driver_ran_on_not_a_family(run_stack):
    image = run_stack("gce-t4").one(INSTANCE).inputs["bootDisk"]["initializeParams"]["image"]
    assert image == catalog.PINS["gce.image"] == "debian-cloud/debian-13-trixie-v20260609"


@pytest.mark.parametrize("change,replaced_by", [
    (("tensorParallelSize=2",), ["guestAccelerators"]),
    (("bootImage=debian-cloud/debian-13",), ["bootDisk"]),
    # GCE's own guards on the machine: ForceNew in the provider's scheduling block.
    (("maxRunHours=12",), ["scheduling.maxRunDuration"]),
    (("spot=true",), ["scheduling.preemptible", "scheduling.provisioningModel"]),
    # Another region's subnet (a new one, so a new id) is the VM's network interface too.
    (("zone=us-central1-a",), ["networkInterfaces", "zone"]),
], ids=lambda value: " ".join(value) if isinstance(value, tuple) else None)
def test_a_new_machine_replaces_the_vm(run_stack, change, replaced_by):
    """The checks above fail where they should: what needs a new machine is ForceNew."""
    before, after = run_stack("gce-t4").one(INSTANCE).inputs, run_stack("gce-t4", *change).one(INSTANCE).inputs
    assert _replaced_by(before, after) == replaced_by
