"""The VM's data disk (the checkpoints, the vLLM venv, swap and the compile cache), which outlives the VM: made, or
adopted when a retained one is there, and refused where the engine would leave one billing or drop its data."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_gcp as gcp
from pulumi.runtime.sync_await import _sync_await
from pulumi_gcp._utilities import get_invoke_opts_defaults as gcp_invoke_defaults

from gemma4_t4 import catalog
from gemma4_t4.errors import ConfigError, Set, fix

from ..provider_answers import USE_PROVIDER_MOCKS, provider_message
from . import provider_answers as answers
from .settings import GceT4ServerSettings

if TYPE_CHECKING:
    from .checks import CheckedServer


DATA_DISK_DEVICE_NAME = "gemma4-data"
# Every resource carries app=gemma4-t4; a retained disk is adopted only with that label.
APP_LABEL = "gemma4-t4"
# The data disk's retainDataDisk as its last `up` saved it ("true"/"false"): a changed flag changes this input,
# so one step writes the label and the state's retainOnDelete (the step's new state takes the goal's flag:
# pulumi/pulumi pkg/resource/deploy/step_generator.go), and a lookup can tell what the state says (see
# disk_in_another_zone).
RETAIN_LABEL = "gemma4-t4-retain-data-disk"


def _disk_answer(found: Any, name: str, zone: str) -> dict[str, Any]:
    if not found.id:
        # The provider never answers a lookup without an id (a missing disk is the error above); a mock
        # that answers {} would make every stack look new.
        raise ConfigError("retainDataDisk", f"{answers.GET_DISK} answered without a disk id for {name} in {zone}, "
                          "which the provider never does (a missing disk is its error "
                          f"'{answers.disk_not_found('PROJECT', zone, name)}')", USE_PROVIDER_MOCKS)
    labels = dict(found.labels or {})
    # The provider's id is projects/P/zones/Z/disks/NAME (answers.disk_id): P is the project even when the
    # provider's default project chose it.
    parts = found.id.split("/")
    return {"id": found.id, "project": parts[1] if parts[0] == "projects" and len(parts) > 1 else "PROJECT",
            "size": found.size, "type": found.type,
            "users": list(found.users or []), "labels": labels, "mine": labels.get("app") == APP_LABEL,
            "never_attached": answers.disk_never_attached(list(found.users or []), found.last_attach_timestamp),
            # What the last `up` saved as the disk's retainOnDelete (RETAIN_LABEL); unlabelled: before the label,
            # when retainDataDisk was the default (true) or set, unseen: read as kept, the side that refuses.
            "kept": labels.get(RETAIN_LABEL) != "false"}


def _lookup_failure(error: Exception, name: str, zone: str) -> ConfigError | None:
    if answers.is_disk_not_found(str(error), zone, name):
        return None
    return ConfigError("retainDataDisk", f"gemma4-t4 could not read whether the data disk {name} exists in "
                       f"{zone} (it adopts a retained one): {provider_message(error)}",
                       fix("let the account `pulumi up` runs as read disks in the project (compute.disks.get, "
                           "e.g. roles/compute.viewer; gcloud auth application-default login), or set ",
                           Set("project"), " to the project you mean"))


def find_disks(name: str, zones: list[str], project: str,
               invoke: pulumi.InvokeOptions) -> dict[str, dict[str, Any] | ConfigError | None]:
    """The disk NAME in each of ZONES as the provider reads it: its answer, None where the provider answers
    that there is none, or the refusal for any other failure (no permission to read disks, a wrong project,
    an API not enabled: read as "absent", it would create a second disk under the kept one's name).

    The lookups run at once, not one after another: a new stack looks in every T4 zone, and each lookup is a
    round trip through the engine, the provider and the Compute API, twice per `pulumi up` (preview, then
    update). `gcp.compute.get_disk` is the same invoke, made synchronous by the SDK (pulumi/runtime/invoke.py
    `invoke` waits on it with `_sync_await`); here the invokes are gathered and waited on together."""
    opts = pulumi.InvokeOptions.merge(gcp_invoke_defaults(), invoke)

    async def lookup(zone: str) -> dict[str, Any] | ConfigError | None:
        args = {"name": name, "zone": zone, "project": project or None}
        try:
            found = await pulumi.runtime.invoke_async(answers.GET_DISK, args, opts=opts, typ=gcp.compute.GetDiskResult)
        except Exception as error:
            return _lookup_failure(error, name, zone)
        try:
            return _disk_answer(found, name, zone)
        except ConfigError as refusal:
            return refusal

    async def every_zone() -> list[dict[str, Any] | ConfigError | None]:
        return await asyncio.gather(*(lookup(zone) for zone in zones))

    return dict(zip(zones, _sync_await(every_zone()), strict=True))


def find_disk(name: str, zone: str, project: str, invoke: pulumi.InvokeOptions) -> dict[str, Any] | None:
    """The disk NAME in ZONE, None when there is none; a lookup that fails otherwise is refused."""
    found = find_disks(name, [zone], project, invoke)[zone]
    if isinstance(found, ConfigError):
        raise found
    return found


def disk_in_another_zone(name: str, settings: GceT4ServerSettings, invoke: pulumi.InvokeOptions) -> None:
    """Refuse a zone where this stack's data disk is not, while it is in another T4 zone and the engine would
    leave it billing or drop its data. The stack moved zone, or was destroyed and comes back elsewhere, or its
    first `up` made the disk and then found no T4 free in that zone (ZONE_RESOURCE_POOL_EXHAUSTED).

    With a new zone the engine replaces the disk, and whether it deletes the old one follows the flag the last
    `up` saved in the state, not this one's (pulumi/pulumi#13428; pkg/resource/deploy/step.go DeleteStep.Apply
    at 004205f2: `else if s.old.RetainOnDelete` skips the provider's Delete). The program cannot read the
    state, so the disk carries that flag as RETAIN_LABEL, written in the same step as the state's.
    Zones that cannot be read are warned about, not refused: the lookup in the chosen zone already proved the
    account may read disks."""
    others = sorted(z for z in catalog.GCE_T4_ZONES if z != settings.zone)
    for other, disk in find_disks(name, others, settings.project, invoke).items():
        if isinstance(disk, ConfigError):
            pulumi.log.warn(f"could not check {other} for this stack's data disk {name}: {disk.problem}")
            continue
        if disk is None or not disk["mine"]:
            continue
        where = f"--zone {other} --project {disk['project']}"
        if disk["never_attached"]:
            if disk["kept"]:
                raise ConfigError("zone", f"the data disk {name} in {other} was made by a `pulumi up` that got no VM "
                                  "there (no VM has ever attached it, so it holds no data); with zone "
                                  f"{settings.zone} Pulumi makes a new one and would keep that one, billing "
                                  f"({disk['size']:.0f} GB), because the earlier `up` saved retainDataDisk true",
                                  f"delete the empty disk (gcloud compute disks delete {name} {where} --quiet), then "
                                  "pulumi up")
            continue  # the replacement deletes it: the last `up` saved retainDataDisk false
        if settings.retain_data_disk:
            raise ConfigError("zone", f"this stack's data disk {name} (label app={APP_LABEL}, {disk['size']:.0f} GB) "
                              f"is in {other}: with zone {settings.zone} a second disk would be made, and the one "
                              f"in {other} would be left billing with its data",
                              fix(Set("zone", other), f", or move the disk first (gcloud compute snapshots create "
                                  f"{name}-move --source-disk {name} --source-disk-zone {other}; gcloud compute disks "
                                  f"create {name} --zone {settings.zone} --source-snapshot {name}-move; then delete "
                                  f"the disk in {other} and the snapshot)"))
        if disk["kept"]:
            raise ConfigError("retainDataDisk", f"false in the same `pulumi up` as zone {settings.zone} does not "
                              f"delete the data disk {name} in {other}: Pulumi deletes a replaced resource only if "
                              "the previous `up` saved retainDataDisk false (it saved true; pulumi/pulumi#13428), "
                              f"so the disk would be left billing outside the stack",
                              fix("two steps: first ", Set("zone", other), " && ", Set("retainDataDisk", False),
                                  " && pulumi up; then ", Set("zone", settings.zone), " && pulumi up"))


def adoptable_disk(name: str, settings: GceT4ServerSettings, instance_name: str,
                   invoke: pulumi.InvokeOptions) -> str | None:
    """The id of the retained data disk when it exists (an `up` after the VM was destroyed adopts it, with
    its checkpoints, venv and caches), None when there is none to adopt. A disk that another VM uses, that
    gemma4-t4 did not make, or that these settings would shrink or change type (both replace a disk), is
    refused. A bigger dataDiskSizeGb grows the adopted disk: since pulumi/pulumi#19339 an import whose
    inputs differ from the resource succeeds and is then updated to them."""
    zone = settings.zone
    disk = find_disk(name, zone, settings.project, invoke)
    if disk is None:
        disk_in_another_zone(name, settings, invoke)
        return None
    if not disk["mine"]:
        raise ConfigError("retainDataDisk", f"a disk named {name} in {zone} exists but gemma4-t4 did not make it "
                          f"(no label app={APP_LABEL}); it is never adopted, nor deleted with this component",
                          fix(Set("namePrefix"), " (a prefix no disk of this zone uses), or, if it is this "
                              f"component's, label it: gcloud compute disks add-labels {name} --zone {zone} "
                              f"--labels app={APP_LABEL}"))
    others = [user for user in disk["users"] if not user.endswith(f"/zones/{zone}/instances/{instance_name}")]
    if others:
        raise ConfigError("retainDataDisk", f"the data disk {name} in {zone} is attached to another VM "
                          f"({', '.join(u.rsplit('/', 1)[-1] for u in others)}); it is never taken from it",
                          fix(f"detach it (gcloud compute instances detach-disk VM --disk {name} --zone {zone}), "
                              "or give this component its own ", Set("namePrefix")))
    if disk["size"] > settings.data_disk_size_gb:
        raise ConfigError("dataDiskSizeGb", f"the retained data disk {name} is {disk['size']} GB: a disk cannot "
                          f"shrink to {settings.data_disk_size_gb} GB, and replacing it would drop its data",
                          Set("dataDiskSizeGb", disk["size"]))
    kind = disk["type"].rsplit("/", 1)[-1]
    if kind != settings.data_disk_type:
        raise ConfigError("dataDiskType", f"the retained data disk {name} is {kind}: changing the type replaces "
                          "the disk and drops its data", Set("dataDiskType", kind))
    return disk["id"]


def data_disk(name: str, checked: CheckedServer, labels: dict[str, str], parent: pulumi.Resource,
              checked_first: pulumi.Output[list[pulumi.Resource]] | None = None) -> gcp.compute.Disk:
    """The disk for the checkpoints, the vLLM venv and the compile cache, adopted when a retained one is there;
    made once CHECKED_FIRST (subnetwork_checked) has passed."""
    settings = checked.settings
    if checked.adopted_disk:
        pulumi.log.info(f"adopting the retained data disk {checked.disk_name} ({checked.adopted_disk})",
                        resource=parent)
    return gcp.compute.Disk(
        f"{name}-data",
        name=checked.disk_name,
        zone=settings.zone,
        project=settings.project or None,
        type=settings.data_disk_type,
        size=settings.data_disk_size_gb,
        labels={**labels, RETAIN_LABEL: str(settings.retain_data_disk).lower()},
        # The checkpoints, the vLLM venv and the compile cache outlive the VM: `pulumi destroy`
        # leaves this disk (and its storage bill) for the next VM unless retainDataDisk is false.
        opts=pulumi.ResourceOptions(parent=parent, retain_on_delete=settings.retain_data_disk,
                                    import_=checked.adopted_disk, depends_on=checked_first),
    )
