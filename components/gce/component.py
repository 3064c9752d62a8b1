"""GCE: one n1-standard-2 with one Tesla T4 serving Gemma 4 through vLLM (or, with
tensorParallelSize 2 or 4, an n1-standard-4 or -8 with that many T4s and vLLM split over them).

Resources (all children of the component): a private VPC with one subnet (or the network and
subnetwork the caller brings); for the VM's tag, a firewall rule that admits SSH from Google's IAP range and one
that denies every other source at a priority above the network's own rules (so a caller's network, the default
one included, reaches it only through IAP; with allowNonLoopbackHost, apiSourceRanges to vLLM's port too); a
pd-balanced data disk that outlives the VM; the VM itself, whose guest is set up by cloud-config (see
cloudinit/); without an external IP, Cloud NAT for its downloads; and per-instance IAM grants for the operators.
"""

import asyncio
import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import pulumi
import pulumi_gcp as gcp
from pulumi.runtime.sync_await import _sync_await
from pulumi_gcp._utilities import get_invoke_opts_defaults as gcp_invoke_defaults

from gemma4_t4 import catalog
from gemma4_t4.errors import UNDECRYPTED_SECRET, ConfigError, PythonArgs, Set, fix

from ..base import (
    CostGuard,
    InvalidOutput,
    MemoryPlan,
    ServingArgs,
    T4ServingComponent,
    cost_guard,
    provider_for,
    refusals,
    type_token,
    warn_guards_off,
    with_alias,
)
from ..config import gce_name, validate
from ..serving import ServingPlan, check_serving, warn_unpinned
from . import provider_answers as answers
from .guest import SERVING_METADATA_KEY, GuestSettings, bootstrap_script, render_serving_env, render_user_data
from .hf_token import TokenAccess, let_operators_in, token_secret
from .settings import GceT4ServerSettings, OnHostMaintenance, TerminationAction, check_api_key, subnetwork_refusal

# Before 0.3.0 the component was registered under this type; the alias keeps deployed stacks' resources.
LEGACY_TYPE = "gemma4-t4:gce:T4Server"
IAP_SSH_SOURCE_RANGE = catalog.IAP_TCP_FORWARDING_RANGE
# What an operator needs on this VM only (iap.TunnelInstanceIAMMember, compute.InstanceIAMMember): the IAP tunnel
# to it, and OS Login without sudo. roles/compute.osAdminLogin (sudo: `gemma4-t4 logs` reads the journal) is the
# user's to grant on the instance when wanted (docs/gce.md).
OPERATOR_TUNNEL_ROLE = "roles/iap.tunnelResourceAccessor"
OPERATOR_LOGIN_ROLE = "roles/compute.osLogin"
DATA_DISK_DEVICE_NAME = "gemma4-data"
SUBNET_CIDR = "10.80.0.0/24"
# Data disk beyond the checkpoint and swap: the vLLM venv, pip's cache, the compile cache.
# [gce-t4-article]: 62 GB used on /opt1 with two checkpoints (18.5 GB) and the 16 GB swapfile.
DATA_DISK_FIXED_GB = 30
# Host RAM vLLM needs beyond the weights to stage them without swap ([gce-t4-article]: the engine
# was OOM-killed at a 7.25 of 7.8 GB host peak staging 8.02 GiB of weights).
STAGING_RAM_OVERHEAD_GIB = 4.0
UNKNOWN_MODEL_STAGING_RAM_GIB = 16.0
# Every resource carries app=gemma4-t4; a retained disk is adopted only with that label.
APP_LABEL = "gemma4-t4"
# The data disk's retainDataDisk as its last `up` saved it ("true"/"false"): a changed flag changes this input,
# so one step writes the label and the state's retainOnDelete (the step's new state takes the goal's flag:
# pulumi/pulumi pkg/resource/deploy/step_generator.go), and a lookup can tell what the state says (see
# disk_in_another_zone).
RETAIN_LABEL = "gemma4-t4-retain-data-disk"
# GCE resource names: a lowercase letter, then lowercase letters, digits and dashes, at most 63.
GCE_NAME_MAX = 63


class GceT4ServerArgs(ServingArgs, total=False):
    """The arguments of GceT4Server. Every one is optional; the defaults are one n1-standard-2 with one
    Tesla T4 in us-west2-b serving Gemma 4 E2B (QAT) on the VM's 127.0.0.1:8000."""

    project: str
    """GCP project of every resource. Default: the provider's project."""
    network: pulumi.Input[str]
    """An existing VPC network (id or self link) for the VM, with subnetwork. Default: a private network of the
    component's own, with one subnet."""
    subnetwork: pulumi.Input[str]
    """The existing subnetwork the VM joins, in the zone's region (with network)."""
    zone: str
    """GCE zone; it must sell T4s (the catalog's accelerator-types list)."""
    machine_type: str
    """N1 machine type (only N1 takes a T4). Default: n1-standard-2 per T4 (n1-standard-2, -4 or -8 for
    tensorParallelSize 1, 2 or 4)."""
    gpu_type: str
    """GCE accelerator type."""
    allow_non_t4_gpu: bool
    """Opt-in: another GPU an N1 VM takes (P4, P100, V100)."""
    on_host_maintenance: OnHostMaintenance
    """What host maintenance does to the VM; a GPU VM cannot live-migrate."""
    boot_disk_size_gb: int
    """Boot disk, GB."""
    boot_disk_type: str
    """Boot disk type an N1 VM attaches."""
    boot_image: str
    """Boot image (PROJECT/IMAGE, or an image family PROJECT/FAMILY); the default is the Debian 13 image the NVIDIA
    615 driver was run on (the catalog names its kernel). A family follows Debian's newest image, whose kernel the
    driver may not build against; a new value replaces the VM."""
    data_disk_size_gb: int
    """Data disk for the model cache, vLLM venv and swapfile, GB."""
    data_disk_type: str
    """Data disk type an N1 VM attaches."""
    retain_data_disk: bool
    """Keep the data disk (and its bill) after the component is deleted; the next one with the same namePrefix
    and zone adopts it."""
    swap_size_gb: int
    """Swapfile on the data disk, GB (vLLM stages weights in RAM)."""
    max_run_hours: int
    """Cost guard: GCE stops the VM after this many hours running (default 24: a forgotten VM bills at most a
    day, whatever its guest does; 0: off). Counted again from each start."""
    spot: bool
    """SPOT provisioning: cheaper, can be preempted."""
    termination_action: TerminationAction
    """STOP or DELETE when maxRunHours ends or SPOT is preempted (unset: STOP)."""
    idle_stop_minutes: int
    """Cost guard: the VM stops itself after this long without a request (default 60), and when vLLM has not
    answered within the boot's health bound (60 min from the boot's first check, longer for a bigger download;
    the driver's reboot included); 0: both off, else at least 5."""
    host: str
    """Address vLLM listens on inside the VM."""
    port: int
    """vLLM's port, 1024 or above (the tunnel forwards it)."""
    allow_non_loopback_host: bool
    """Opt-in: vLLM on 0.0.0.0, only with apiKey and apiSourceRanges (the firewall admits those ranges to the port;
    every other source but IAP's SSH is denied)."""
    api_key: pulumi.Input[str]
    """vLLM's API key, as a secret (at least 32 characters: openssl rand -hex 32, checked at preview whatever form it
    comes in); required by allowNonLoopbackHost. The VM asks it on every route from beyond its loopback (vLLM itself
    checks /v1 only). The VM's metadata holds it: whoever may read the instance (compute.instances.get, in
    roles/compute.viewer and every role above it on the VM or its project) and every process on the VM read it;
    preview warns."""
    api_source_ranges: Sequence[str]
    """IPv4 CIDRs the firewall admits to vLLM's port, with allowNonLoopbackHost (each a /8 or narrower: a wider one,
    0.0.0.0/1 included, spans unrelated networks); in the stack config, comma-separated."""
    external_ip: bool
    """An ephemeral external IP for the VM's downloads (no ingress: the firewall admits only IAP). false: none, and
    the downloads go through Cloud NAT (made by the component on its own network; see cloudNat), which costs more:
    about $0.7 of NAT processing per first boot plus $0.0014/h."""
    cloud_nat: bool
    """With externalIp false on a network you bring: make a Cloud Router and Cloud NAT for the VM's subnetwork (leave
    it false if the network already routes to the internet). On the component's own network it is made anyway."""
    operators: Sequence[str]
    """IAM members (user:EMAIL, group:EMAIL, serviceAccount:EMAIL...) granted, on this VM only, the IAP tunnel
    (roles/iap.tunnelResourceAccessor), OS Login (roles/compute.osLogin) and the stack's custom operator role
    (compute.instances.get, getGuestAttributes, start, stop: status, wait, stop and start); in the stack config,
    comma-separated."""
    vllm_version: str
    """The vLLM the VM installs: a clamp-verified version with its lock (0.30.0, which has served Gemma 4 on a T4;
    or 0.33.0, resolved in CI but not yet run on a T4)."""


def gce_resource_name(prefix: str, suffix: str) -> str:
    """PREFIX-SUFFIX within GCE's 63 characters: the same on every `pulumi up`, so the retained data disk
    is found again after the VM is gone."""
    return f"{prefix[:GCE_NAME_MAX - len(suffix) - 1].rstrip('-')}-{suffix}"


def default_name_prefix(name: str) -> str:
    return gce_name(f"{pulumi.get_stack()}-{name}")


def _disk_answer(found: Any, name: str, zone: str) -> dict[str, Any]:
    if not found.id:
        # The provider never answers a lookup without an id (a missing disk is the error above); a mock
        # that answers {} would make every stack look new.
        raise ConfigError("retainDataDisk", f"{answers.GET_DISK} answered without a disk id for {name} in {zone}, "
                          "which the provider never does (a missing disk is its error "
                          f"'{answers.disk_not_found('PROJECT', zone, name)}')", answers.USE_PROVIDER_MOCKS)
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
                       f"{zone} (it adopts a retained one): {answers.provider_message(error)}",
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


def check_host(settings: GceT4ServerSettings, plan: ServingPlan) -> None:
    """What the VM must hold for this model: the data disk, and RAM (or swap) to stage the weights."""
    checkpoint_gb = math.ceil(plan.facts.checkpoint_bytes / 1e9) if plan.facts else 0
    needed = checkpoint_gb + settings.swap_size_gb + DATA_DISK_FIXED_GB
    if settings.data_disk_size_gb < needed:
        raise ConfigError("dataDiskSizeGb", f"{settings.data_disk_size_gb} GB cannot hold the model cache: "
                          f"{plan.serving.model} ({checkpoint_gb} GB) + {settings.swap_size_gb} GB swap + "
                          f"{DATA_DISK_FIXED_GB} GB for the vLLM venv and caches needs {needed} GB",
                          Set("dataDiskSizeGb", needed))
    if settings.swap_size_gb > 0:
        return
    shape = catalog.N1_SHAPES[settings.machine_type]
    ram = catalog.GCE_MACHINE_RAM_BYTES.get(settings.machine_type, int(shape.memory_gib * catalog.GIB))
    weights_gib = plan.facts.weights_bytes(settings.dtype) / catalog.GIB if plan.facts else None
    need_gib = weights_gib + STAGING_RAM_OVERHEAD_GIB if weights_gib else UNKNOWN_MODEL_STAGING_RAM_GIB
    if ram / catalog.GIB < need_gib:
        raise ConfigError("swapSizeGb", f"0 (no swap) on {settings.machine_type} with {ram / catalog.GIB:.1f} GiB RAM: "
                          f"staging {plan.serving.model} needs about {need_gib:.1f} GiB, and the kernel kills vLLM "
                          "without a traceback", Set("swapSizeGb", 16))


def _log_shape(settings: GceT4ServerSettings, resource: pulumi.Resource) -> None:
    vcpus = catalog.N1_SHAPES[settings.machine_type].vcpus
    if settings.gpu_count > 1 and vcpus < catalog.VCPUS_PER_T4 * settings.gpu_count:
        pulumi.log.warn(f"{settings.machine_type} has {vcpus} vCPUs for {settings.gpu_count} T4s: each vLLM rank is "
                        "a process of its own, beside the API server and the engine core; the project gives each T4 "
                        f"{catalog.VCPUS_PER_T4} ({catalog.n1_standard_for(settings.gpu_count)})", resource=resource)
    elif settings.gpu_count > 1:
        pulumi.log.info(f"tensorParallelSize {settings.tensor_parallel_size}: {settings.gpu_count} T4s on "
                        f"{settings.machine_type}", resource=resource)


def scheduling(settings: GceT4ServerSettings) -> gcp.compute.InstanceSchedulingArgs:
    termination = settings.termination_action or (TerminationAction.STOP if settings.max_run_hours or settings.spot
                                                  else None)
    return gcp.compute.InstanceSchedulingArgs(
        on_host_maintenance=settings.on_host_maintenance.value,
        automatic_restart=not settings.spot,
        preemptible=settings.spot,
        provisioning_model="SPOT" if settings.spot else "STANDARD",
        instance_termination_action=termination.value if termination else None,
        max_run_duration=gcp.compute.InstanceSchedulingMaxRunDurationArgs(seconds=settings.max_run_hours * 3600)
        if settings.max_run_hours else None,
    )


def billed_items(settings: GceT4ServerSettings) -> list[str]:
    """The catalog items the VM bills while running: machine, GPU (a Spot VM: their Spot prices), address,
    boot and data disk."""
    billed = catalog.spot_item if settings.spot else str
    return [billed(f"machine:{settings.machine_type}"), billed(f"gpu:{settings.gpu_type}"), "ip:external-in-use",
            f"disk:{settings.boot_disk_type}:gb-month", f"disk:{settings.data_disk_type}:gb-month"]


def cost_per_hour_usd(settings: GceT4ServerSettings) -> float | None:
    """While running: machine, GPU, address and both disks, at the region's list prices (a Spot VM: its machine
    and GPUs at the Spot prices); None if the catalog lacks one of them."""
    prices = catalog.GCE_PRICES.get(settings.region, {})
    keys = billed_items(settings)
    if any(key not in prices for key in keys):
        return None
    monthly_disks = (settings.boot_disk_size_gb * prices[keys[3]].usd_per_hour
                     + settings.data_disk_size_gb * prices[keys[4]].usd_per_hour)
    hourly = (prices[keys[0]].usd_per_hour + prices[keys[1]].usd_per_hour * settings.gpu_count
              + egress_usd_per_hour(settings, prices[keys[2]].usd_per_hour) + monthly_disks / catalog.HOURS_PER_MONTH)
    return round(hourly, 4)


def cost_guards(settings: GceT4ServerSettings, health_bound_minutes: int,
                usd_per_hour: float | None) -> list[CostGuard]:
    """The VM's guards: the guest's idle stop (with its health bound) and GCE's run-time limit."""
    idle, hours = settings.idle_stop_minutes, settings.max_run_hours
    return [
        cost_guard("idleStopMinutes", str(idle) if idle else None,
                   f"the VM stops itself after {idle} min without a request, and when a boot whose vLLM never "
                   f"answered makes no progress for {catalog.HEALTH_STALL_MINUTES} min or runs past "
                   f"{health_bound_minutes} min",
                   "nothing stops a VM left idle, or one whose vLLM never becomes healthy", usd_per_hour),
        cost_guard("maxRunHours", str(hours) if hours else None,
                   f"GCE stops the VM after {hours} h running, whatever its guest does",
                   "nothing bounds how long the VM runs (a client that keeps it busy, a guest whose idle stop "
                   "cannot run)", usd_per_hour),
    ]


def egress_usd_per_hour(settings: GceT4ServerSettings, external_ip: float) -> float:
    """The VM's way out: its external address, or the component's Cloud NAT (one VM on the gateway, and the
    address the gateway allocates); 0 where a caller's network carries it (billed to that network)."""
    if settings.external_ip:
        return external_ip
    if settings.network is None or settings.cloud_nat:
        nat = catalog.CLOUD_NAT_PRICES
        return nat["nat:vm-hour"].usd_per_hour + nat["nat:ip-hour"].usd_per_hour
    return 0.0


def data_disk_monthly_usd(settings: GceT4ServerSettings) -> float | None:
    price = catalog.GCE_PRICES.get(settings.region, {}).get(f"disk:{settings.data_disk_type}:gb-month")
    return None if price is None else round(settings.data_disk_size_gb * price.usd_per_hour, 2)


def firewall(name: str, settings: GceT4ServerSettings, network: pulumi.Input[str], tag: str,
             child: pulumi.ResourceOptions) -> None:
    """The VM's ingress, whatever else the network allows: what the stack admits (IAP's SSH; with
    allowNonLoopbackHost, apiSourceRanges to vLLM's port) above a deny-all for the VM's tag, which is above every
    rule a network usually has (1000 by default, the default network's 65534: catalog.FIREWALL_DENY_PRIORITY)."""
    project = settings.project or None
    gcp.compute.Firewall(
        f"{name}-allow-iap-ssh", network=network, project=project, direction="INGRESS",
        priority=catalog.FIREWALL_ALLOW_PRIORITY, source_ranges=[IAP_SSH_SOURCE_RANGE],
        allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])], target_tags=[tag],
        description="gemma4-t4: SSH through Identity-Aware Proxy", opts=child)
    if settings.allow_non_loopback_host and settings.api_source_ranges:
        gcp.compute.Firewall(
            f"{name}-allow-api", network=network, project=project, direction="INGRESS",
            priority=catalog.FIREWALL_ALLOW_PRIORITY, source_ranges=list(settings.api_source_ranges),
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(settings.port)])], target_tags=[tag],
            description="gemma4-t4: vLLM's port from apiSourceRanges (allowNonLoopbackHost; vLLM checks apiKey)",
            opts=child)
    gcp.compute.Firewall(
        f"{name}-deny-other-ingress", network=network, project=project, direction="INGRESS",
        priority=catalog.FIREWALL_DENY_PRIORITY, source_ranges=["0.0.0.0/0"],
        denies=[gcp.compute.FirewallDenyArgs(protocol="all")], target_tags=[tag],
        description="gemma4-t4: no other ingress to the VM, whatever the network's own rules allow", opts=child)


def cloud_nat(name: str, settings: GceT4ServerSettings, network: pulumi.Input[str], subnetwork: pulumi.Input[str],
              child: pulumi.ResourceOptions) -> gcp.compute.RouterNat | None:
    """Cloud NAT for a VM without an external IP: on the component's own network always, on a caller's with
    cloudNat (for the VM's subnetwork only); None otherwise."""
    if settings.external_ip:
        return None
    own = settings.network is None
    if not own and not settings.cloud_nat:
        pulumi.log.warn("externalIp false on your network without cloudNat: the VM's first boot downloads the "
                        "driver, vLLM and the model, and fails unless the network already routes its subnetwork to "
                        "the internet (its own Cloud NAT); set cloudNat true to have the stack make one")
        return None
    project = settings.project or None
    router = gcp.compute.Router(f"{name}-router", network=network, region=settings.region, project=project,
                                description="gemma4-t4: Cloud NAT for the VM's downloads (it has no external IP)",
                                opts=child)
    every = "ALL_SUBNETWORKS_ALL_IP_RANGES"
    return gcp.compute.RouterNat(
        f"{name}-nat", router=router.name, region=settings.region, project=project,
        nat_ip_allocate_option="AUTO_ONLY",
        source_subnetwork_ip_ranges_to_nat=every if own else "LIST_OF_SUBNETWORKS",
        subnetworks=None if own else [gcp.compute.RouterNatSubnetworkArgs(
            name=subnetwork, source_ip_ranges_to_nats=["ALL_IP_RANGES"])],
        opts=child)


# The tunnel's IAM grant is an IAP API call (iap.googleapis.com), off in a new project: without the API the grant
# fails at `up`. Enabled here, never disabled on destroy (disable_on_destroy=False: pulumi-gcp's projects.Service,
# "If false or unset, the service will be left enabled when the Terraform resource is destroyed"; other tunnels of
# the project may use it).
IAP_API = "iap.googleapis.com"
OPERATOR_ROLE_ID_MAX = 64


def operator_role_id(prefix: str) -> str:
    """The operators' custom role's id: one per stack (its namePrefix), in IAM's role-id characters and within its
    64 (IAM API reference, projects.roles.create: roleId "[a-zA-Z0-9_\\.]{3,64}"). A longer one keeps a digest of the
    whole, so that two prefixes alike in their first characters do not name one role."""
    whole = re.sub(r"[^A-Za-z0-9_.]", "_", f"gemma4t4Operator_{prefix}")
    if len(whole) <= OPERATOR_ROLE_ID_MAX:
        return whole
    digest = hashlib.sha256(whole.encode()).hexdigest()[:8]
    return f"{whole[:OPERATOR_ROLE_ID_MAX - len(digest) - 1]}_{digest}"


def grant_operators(name: str, members: Sequence[str], instance: gcp.compute.Instance, prefix: str,
                    child: pulumi.ResourceOptions) -> None:
    """Each operator may open an IAP tunnel to this VM, log in to it (no sudo), read, stop and start it
    (catalog.GCE_OPERATOR_PERMISSIONS, a custom role granted on this instance only), and nothing more; the IAP API
    the tunnel grants need is enabled first."""
    if not members:
        return
    iap_api = gcp.projects.Service(f"{name}-iap-api", service=IAP_API, project=instance.project,
                                   disable_on_destroy=False, opts=child)
    after_api = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[iap_api]))
    role = gcp.projects.IAMCustomRole(
        f"{name}-operator-role", role_id=operator_role_id(prefix), project=instance.project,
        title="gemma4-t4 operator", permissions=list(catalog.GCE_OPERATOR_PERMISSIONS),
        description="gemma4-t4: read, stop and start the stack's VM (granted on that instance only)", opts=child)
    for member in members:
        # Named by the member, not its place in the list: removing one operator leaves the others' grants alone.
        who = re.sub(r"[^A-Za-z0-9@._-]+", "-", member)
        gcp.iap.TunnelInstanceIAMMember(f"{name}-tunnel-{who}", instance=instance.name, member=member,
                                        role=OPERATOR_TUNNEL_ROLE, project=instance.project, zone=instance.zone,
                                        opts=after_api)
        gcp.compute.InstanceIAMMember(f"{name}-login-{who}", instance_name=instance.name, member=member,
                                      role=OPERATOR_LOGIN_ROLE, project=instance.project, zone=instance.zone,
                                      opts=child)
        gcp.compute.InstanceIAMMember(f"{name}-operate-{who}", instance_name=instance.name, member=member,
                                      role=role.name, project=instance.project, zone=instance.zone, opts=child)


def first_boot_download_bytes(plan: ServingPlan) -> int:
    """What a first boot downloads that the catalog sizes: the model's checkpoint and the vLLM environment."""
    return (plan.facts.checkpoint_bytes if plan.facts else 0) + catalog.FIRST_BOOT_VLLM_ENV_BYTES


def first_boot_nat_usd(plan: ServingPlan) -> float:
    price = catalog.CLOUD_NAT_PRICES["nat:gib-processed"].usd_per_hour
    return round(first_boot_download_bytes(plan) / catalog.GIB * price, 2)



@dataclass(frozen=True)
class CheckedServer:
    """What the refusals read before anything is registered: the settings, the serving plan, the fixed names,
    and the retained data disk to adopt (its id; None: a new disk)."""

    settings: GceT4ServerSettings
    plan: ServingPlan
    prefix: str
    vm_name: str
    disk_name: str
    adopted_disk: str | None


def check_server(name: str, args: GceT4ServerArgs, opts: pulumi.ResourceOptions | None) -> CheckedServer:
    """Everything a refusal needs, checked before anything is registered: a refused setting creates no resource."""
    settings = validate(GceT4ServerSettings, args)
    plan = check_serving(settings, catalog.GCE_ACCELERATORS.get(settings.gpu_type), settings.host, settings.port)
    check_host(settings, plan)
    check_secret_key(settings)
    # Fixed names: the next `up` after a destroy finds the retained disk under its name and adopts
    # it (an import; in the state already, the engine just updates it).
    prefix = settings.name_prefix or default_name_prefix(name)
    vm_name, disk_name = gce_resource_name(prefix, "vm"), gce_resource_name(prefix, "data")
    invoke = pulumi.InvokeOptions(provider=provider_for("gcp", opts), parent=opts.parent if opts else None)
    return CheckedServer(settings, plan, prefix, vm_name, disk_name,
                         adoptable_disk(disk_name, settings, vm_name, invoke))


def check_secret_key(settings: GceT4ServerSettings) -> None:
    """apiKey as an Output (a secret, as the stack passes it): its value checked as a plain one is (settings.py),
    before anything is registered. An Output's value is read as the SDK's own synchronous invokes read theirs
    (_sync_await); one unknown at preview (another resource's output) passes, as does the offline plan's stand-in
    for ciphertext it cannot decrypt (UNDECRYPTED_SECRET); a known secret is always checked."""
    if not settings.allow_non_loopback_host or not isinstance(settings.api_key, pulumi.Output):
        return
    key = _sync_await(settings.api_key.future())
    if isinstance(key, str) and key != UNDECRYPTED_SECRET:
        check_api_key(key)


def serving_values(plan: ServingPlan, api_key: pulumi.Input[str] | None,
                   hf_token_secret: pulumi.Input[str] | None = None) -> pulumi.Input[str]:
    """The metadata value the guest starts vLLM with (and restarts it on when it changes); with hfToken, the name
    of the secret that holds it (never the token)."""
    serving = plan.serving
    checkpoint_bytes = plan.facts.checkpoint_bytes if plan.facts else 0

    def render(key: str | None, secret_name: str | None) -> str:
        return render_serving_env(serving.vllm_args(), serving.port, checkpoint_bytes, api_key=key,
                                  hf_token_secret=secret_name)

    if api_key is None and hf_token_secret is None:
        return render(None, None)
    values = pulumi.Output.all(api_key, hf_token_secret).apply(lambda both: render(both[0], both[1]))
    # With a key, a secret: the whole value is kept encrypted in the state, and the guest writes it to a file only
    # root reads (systemd hands it to vLLM as VLLM_API_KEY, out of its command line).
    return pulumi.Output.secret(values) if api_key is not None else values


def private_network(name: str, settings: GceT4ServerSettings,
                    parent: pulumi.Resource) -> tuple[pulumi.Input[str], pulumi.Input[str]]:
    """The network and subnetwork the VM joins: the caller's, else a private network of the component's own."""
    if settings.network is not None:
        return settings.network, settings.subnetwork
    project = settings.project or None
    network_id: pulumi.Input[str] = gcp.compute.Network(
        f"{name}-net", auto_create_subnetworks=False, project=project,
        description="gemma4-t4: private network, no ingress but IAP SSH", opts=pulumi.ResourceOptions(parent=parent)).id
    subnet_id: pulumi.Input[str] = gcp.compute.Subnetwork(
        f"{name}-subnet", network=network_id, region=settings.region, project=project,
        ip_cidr_range=SUBNET_CIDR, private_ip_google_access=True,
        # A zone in another region replaces the subnet, and GCE refuses a range that overlaps another
        # subnet of the network, in any region ("Invalid IPCidrRange: ... conflicts with existing
        # subnetwork '...' in region '...'", a transcript: terraform-google-modules/
        # terraform-google-network#20): the old one goes first.
        opts=pulumi.ResourceOptions(parent=parent, delete_before_replace=True)).id
    return network_id, subnet_id


def subnetwork_checked(settings: GceT4ServerSettings) -> pulumi.Output[list[pulumi.Resource]] | None:
    """A subnetwork that is an Output (another resource's id) checked against the zone once its value is known: at
    preview when it is, else in the `up`, after the subnetwork is made. What depends on it (the data disk, the
    router) waits for the check, so a refused one fails the `up` before they are made (GCE would refuse the VM only
    after the disk). None for a subnetwork known now, which settings.py checks before anything is registered."""
    subnetwork = settings.subnetwork
    if not isinstance(subnetwork, pulumi.Output):
        return None

    def check(value: str | None) -> list[pulumi.Resource]:
        refusal = subnetwork_refusal(value, settings.zone) if isinstance(value, str) else None
        if refusal is not None:
            raise InvalidOutput(refusal.for_front_end(PythonArgs(GceT4ServerArgs.__name__)))
        return []

    return subnetwork.apply(check)


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


@dataclass(frozen=True)
class VmNetwork:
    """Where the VM joins: its subnetwork, the tag its firewall rules target, and the Cloud NAT it waits for."""

    subnetwork: pulumi.Input[str]
    tag: str
    nat: gcp.compute.RouterNat | None


def guest_user_data(settings: GceT4ServerSettings) -> str:
    """The cloud-config that sets the guest up (cloudinit/): the data disk, swap, the idle stop and vLLM."""
    return render_user_data(GuestSettings(
        DATA_DISK_DEVICE_NAME, settings.swap_size_gb, idle_stop_minutes=settings.idle_stop_minutes,
        vllm_version=settings.vllm_version))


def server_vm(name: str, checked: CheckedServer, network: VmNetwork, disk: gcp.compute.Disk,
              labels: dict[str, str], parent: pulumi.Resource, token: TokenAccess | None) -> gcp.compute.Instance:
    """The VM: its boot disk, its T4s, the data disk, the network it joins and its guest's metadata; with hfToken,
    the service account that may read it."""
    settings = checked.settings
    user_data = guest_user_data(settings)
    return gcp.compute.Instance(
        name,
        name=checked.vm_name,
        zone=settings.zone,
        project=settings.project or None,
        machine_type=settings.machine_type,
        boot_disk=gcp.compute.InstanceBootDiskArgs(
            auto_delete=True,
            initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                image=settings.boot_image, size=settings.boot_disk_size_gb, type=settings.boot_disk_type),
        ),
        guest_accelerators=[gcp.compute.InstanceGuestAcceleratorArgs(type=settings.gpu_type,
                                                                     count=settings.gpu_count)],
        scheduling=scheduling(settings),
        attached_disks=[gcp.compute.InstanceAttachedDiskArgs(source=disk.self_link,
                                                             device_name=DATA_DISK_DEVICE_NAME)],
        network_interfaces=[gcp.compute.InstanceNetworkInterfaceArgs(
            subnetwork=network.subnetwork,
            # An ephemeral public address for egress only (apt, PyPI, Hugging Face): the firewall denies every
            # source but IAP's SSH. Without one, Cloud NAT (or the caller's network) carries the downloads.
            access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()] if settings.external_ip
            else [],
        )],
        # Updated in place (setMetadata): the serving values, which the guest watches and restarts vLLM
        # with, and guest attributes on, for the boot's progress (the gemma4-t4/ namespace).
        metadata={"user-data": user_data,
                  SERVING_METADATA_KEY: serving_values(checked.plan, settings.api_key,
                                                       token.secret_name if token else None),
                  "enable-oslogin": "TRUE", "enable-guest-attributes": "TRUE"},
        # Without hfToken, no account: the guest calls no Google API. Set or changed with the VM stopped
        # (allow_stopping_for_update), not replaced.
        service_account=token.service_account if token else None,
        # The provider replaces the VM when this changes (ForceNew): it is the same for every setting and release
        # (cloudinit/bootstrap.sh). The user-data above is applied on the running VM when it changes
        # (cloudinit/scripts/guest_bundle.py): only a new machine (zone, image, machine, GPUs) replaces the VM.
        metadata_startup_script=bootstrap_script(),
        # The open DKMS module is unsigned: Secure Boot would refuse to load it.
        shielded_instance_config=gcp.compute.InstanceShieldedInstanceConfigArgs(
            enable_secure_boot=False, enable_vtpm=True, enable_integrity_monitoring=True),
        tags=[network.tag],
        labels=labels,
        allow_stopping_for_update=True,
        # The data disk attaches to one VM at a time: a replaced VM goes before its successor comes.
        opts=pulumi.ResourceOptions(parent=parent, delete_before_replace=True,
                                    depends_on=[network.nat] if network.nat else None),
    )


def connect_command(instance: gcp.compute.Instance, port: int) -> pulumi.Output[str]:
    """The IAP tunnel to vLLM's port; -f: ssh goes to the background once the forward is up, so the shell
    comes back."""
    return pulumi.Output.format(
        "gcloud compute ssh {0} --project {1} --zone {2} --tunnel-through-iap -- -f -N -L {3}",
        instance.name, instance.project, instance.zone, f"{port}:127.0.0.1:{port}")


class GceT4Server(T4ServingComponent):
    """Gemma 4 on a Tesla T4 in Google Compute Engine: an N1 VM (Debian 13, NVIDIA 615 driver, vLLM with the
    Turing clamp as a service) whose OpenAI API listens on the VM's loopback, reached through an IAP SSH
    tunnel; its model cache, venv and swap on a data disk that outlives the VM."""

    data_disk_name: pulumi.Output[str]
    """The data disk's name: what stays (and bills) after destroy, unless retainDataDisk is false."""
    memory_plan: pulumi.Output[MemoryPlan] | None
    """What vLLM will find on each GPU at start-up; absent for a model that was not sized."""
    model_revision: pulumi.Output[str] | None
    """The Hugging Face Hub revision vLLM downloads the model at (modelRevision, else the catalog's commit); empty
    when none is pinned (the Hub's main at each download); absent for a checkpoint directory on the server."""
    cost_guards: pulumi.Output[list[CostGuard]]
    """The guards that stop a forgotten VM's bill (idleStopMinutes, maxRunHours): each with its value, or off with
    what that can cost per day."""
    first_boot_nat_usd: pulumi.Output[float] | None
    """With the component's Cloud NAT: what NAT processing of the first boot's downloads costs (the model's
    checkpoint and the vLLM environment, at the catalog's list price); absent without one."""


    # args: {} when omitted (read, never changed); Pulumi's analyzer reads its annotation as the package's inputs.
    def __init__(self, name: str, args: GceT4ServerArgs = {},  # noqa: B006
                 opts: pulumi.ResourceOptions | None = None) -> None:
        with refusals(GceT4ServerArgs.__name__):
            checked = check_server(name, args, opts)
        super().__init__(type_token(GceT4Server), name, None, with_alias(opts, LEGACY_TYPE))
        self._log_plan(checked)
        labels = {"app": APP_LABEL, **checked.settings.labels}
        subnetwork_in_region = subnetwork_checked(checked.settings)
        network = self._network(name, checked.settings, subnetwork_in_region)
        disk = data_disk(name, checked, labels, self, subnetwork_in_region)
        token = None if checked.settings.hf_token is None else token_secret(
            name, checked.prefix, checked.settings.project or None, checked.settings.hf_token, labels,
            pulumi.ResourceOptions(parent=self))
        vm = server_vm(name, checked, network, disk, labels, self, token)
        grant_operators(name, checked.settings.operators, vm, checked.prefix, pulumi.ResourceOptions(parent=self))
        if token is not None:
            let_operators_in(name, checked.settings.operators, token, pulumi.ResourceOptions(parent=self))
        cost = self._cost_per_hour(checked.settings)
        self._set_outputs(checked, disk, network.nat, cost)
        self._register_vm(checked, vm, cost)

    def _log_plan(self, checked: CheckedServer) -> None:
        if checked.plan.memory is not None:
            pulumi.log.info(f"memory plan: {checked.plan.memory.summary()}", resource=self)
        _log_shape(checked.settings, self)
        if checked.settings.allow_non_loopback_host:
            pulumi.log.warn(f"apiKey is in the VM's metadata ({SERVING_METADATA_KEY}): whoever may read the instance "
                            "(compute.instances.get: roles/compute.viewer and above, on the VM or its project) and "
                            "every process on the VM can read it (docs/gce.md)", resource=self)

    def _network(self, name: str, settings: GceT4ServerSettings,
                 subnetwork_in_region: pulumi.Output[list[pulumi.Resource]] | None) -> VmNetwork:
        """The VM's network, the firewall for its tag, and (without an external IP) its Cloud NAT, whose router waits
        for SUBNETWORK_IN_REGION (subnetwork_checked)."""
        child = pulumi.ResourceOptions(parent=self)
        network_id, subnet_id = private_network(name, settings, self)
        tag = f"{name}-iap-ssh"
        firewall(name, settings, network_id, tag, child)
        nat_opts = pulumi.ResourceOptions(parent=self, depends_on=subnetwork_in_region)
        return VmNetwork(subnet_id, tag, cloud_nat(name, settings, network_id, subnet_id, nat_opts))

    def _cost_per_hour(self, settings: GceT4ServerSettings) -> float | None:
        cost = cost_per_hour_usd(settings)
        if cost is None:
            missing = sorted({key for key in billed_items(settings)
                              if key not in catalog.GCE_PRICES.get(settings.region, {})})
            pulumi.log.warn(f"no catalog price for {', '.join(missing)} in {settings.region}: cost not estimated",
                            resource=self)
        return cost

    def _set_outputs(self, checked: CheckedServer, disk: gcp.compute.Disk, nat: gcp.compute.RouterNat | None,
                     cost: float | None) -> None:
        settings, plan, serving = checked.settings, checked.plan, checked.plan.serving
        guards = cost_guards(settings, catalog.health_bound_minutes(plan.facts.checkpoint_bytes if plan.facts else 0),
                             cost)
        warn_guards_off(guards, self)
        self.cost_guards = pulumi.Output.from_input(guards)
        warn_unpinned(serving, self)
        self.model_revision = pulumi.Output.from_input(serving.revision or "") if serving.from_hub else None
        self.data_disk_name = disk.name
        self.first_boot_nat_usd = pulumi.Output.from_input(first_boot_nat_usd(plan)) if nat else None
        self.memory_plan = pulumi.Output.from_input(cast(MemoryPlan, plan.memory.as_output())) if plan.memory else None

    def _register_vm(self, checked: CheckedServer, vm: gcp.compute.Instance, cost: float | None) -> None:
        settings, serving = checked.settings, checked.plan.serving
        self._register_contract(
            cloud="gce",
            port=serving.port,
            served_model_name=serving.served_model_name,
            target={"instance": vm.name, "zone": vm.zone, "project": vm.project},
            connect_command=connect_command(vm, serving.port),
            cost_per_hour_usd=cost,
            # None where the catalog has no price for the region: unknown, never $0 (the disk bills).
            billing_after_destroy_usd_per_month=data_disk_monthly_usd(settings) if settings.retain_data_disk else 0.0,
        )
