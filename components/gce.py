"""GCE: one n1-standard-2 with one Tesla T4 serving Gemma 4 through vLLM (or, with
tensorParallelSize 2 or 4, an n1-standard-4 or -8 with that many T4s and vLLM split over them).

Resources (all children of the component): a private VPC with one subnet, a firewall rule that
admits SSH from Google's IAP range only (nothing opens the vLLM port), a pd-balanced data disk
that outlives the VM, and the VM itself, whose guest is set up by cloud-config (see cloudinit/).
"""

from __future__ import annotations

import math
import re
from typing import Any

import pulumi
import pulumi_gcp as gcp

from gemma4_t4 import catalog
from gemma4_t4.errors import ConfigError

from .base import T4ServingComponent
from .config import GceT4ServerArgs, set_cmd
from .guest import GuestSettings, bootstrap_script, render_user_data
from .serving import ServingPlan, check_serving

IAP_SSH_SOURCE_RANGE = "35.235.240.0/20"  # Google's IAP TCP-forwarding range
DATA_DISK_DEVICE_NAME = "gemma4-data"
SUBNET_CIDR = "10.80.0.0/24"
# Data disk beyond the checkpoint and swap: the vLLM venv, pip's cache, the compile cache.
# Seed 000: 62 GB used on /opt1 with two checkpoints (18.5 GB) and the 16 GB swapfile.
DATA_DISK_FIXED_GB = 30
# Host RAM vLLM needs beyond the weights to stage them without swap (seed 000: the engine
# was OOM-killed at a 7.25 of 7.8 GB host peak staging 8.02 GiB of weights).
STAGING_RAM_OVERHEAD_GIB = 4.0
UNKNOWN_MODEL_STAGING_RAM_GIB = 16.0
# Every resource carries app=gemma4-t4; a retained disk is adopted only with that label.
APP_LABEL = "gemma4-t4"
# GCE resource names: a lowercase letter, then lowercase letters, digits and dashes, at most 63.
GCE_NAME_MAX = 63


def stack_resource_name(project: str, stack: str, suffix: str) -> str:
    """A fixed GCE name for one of the stack's resources: the same on every `pulumi up` of the
    stack, so the retained data disk is found again after a `pulumi destroy`."""
    base = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", f"{project}-{stack}".lower())).strip("-")
    if not base[:1].isalpha():
        base = f"g-{base}"
    return f"{base[:GCE_NAME_MAX - len(suffix) - 1].rstrip('-')}-{suffix}"


def find_disk(name: str, zone: str) -> dict[str, Any] | None:
    """The disk NAME in ZONE as the provider reads it, or None if GCE has none (a 404)."""
    try:
        found = gcp.compute.get_disk(name=name, zone=zone)
    except Exception as error:
        if "Error 404" in str(error) or "notFound" in str(error):
            return None
        raise
    return {"id": found.id, "size": found.size, "type": found.type, "users": list(found.users or []),
            "labels": dict(found.labels or {})}


def adoptable_disk(name: str, zone: str, instance_name: str, size_gb: int, disk_type: str) -> str | None:
    """The id of the stack's retained data disk when it exists (a `pulumi up` after `pulumi destroy`
    adopts it, with its checkpoints, venv and caches), None when there is none to adopt. A disk that
    another VM uses, that gemma4-t4 did not make, or that this config would shrink or change type (both
    replace a disk), is refused. A bigger dataDiskSizeGb grows the adopted disk: since pulumi/pulumi#19339
    an import whose inputs differ from the resource succeeds and is then updated to them."""
    disk = find_disk(name, zone)
    if disk is None:
        return None
    if disk["labels"].get("app") != APP_LABEL:
        raise ConfigError("retainDataDisk", f"a disk named {name} in {zone} exists but gemma4-t4 did not make it "
                          f"(no label app={APP_LABEL}); it is never adopted, nor deleted with this stack",
                          "deploy this stack under another stack name (the disk's name comes from the project and "
                          f"stack), or, if it is this stack's, label it: gcloud compute disks add-labels {name} "
                          f"--zone {zone} --labels app={APP_LABEL}")
    others = [user for user in disk["users"] if not user.endswith(f"/zones/{zone}/instances/{instance_name}")]
    if others:
        raise ConfigError("retainDataDisk", f"the data disk {name} in {zone} is attached to another VM "
                          f"({', '.join(u.rsplit('/', 1)[-1] for u in others)}); it is never taken from it",
                          f"detach it (gcloud compute instances detach-disk VM --disk {name} --zone {zone}) or "
                          "deploy this stack under another stack name")
    if disk["size"] > size_gb:
        raise ConfigError("dataDiskSizeGb", f"the retained data disk {name} is {disk['size']} GB: a disk cannot "
                          f"shrink to {size_gb} GB, and replacing it would drop its data",
                          f"pulumi config set gemma4-t4:dataDiskSizeGb {disk['size']}")
    if disk["type"].rsplit("/", 1)[-1] != disk_type:
        kind = disk["type"].rsplit("/", 1)[-1]
        raise ConfigError("dataDiskType", f"the retained data disk {name} is {kind}: changing the type replaces "
                          "the disk and drops its data", f"pulumi config set gemma4-t4:dataDiskType {kind}")
    return disk["id"]


def check_host(args: GceT4ServerArgs, plan: ServingPlan) -> None:
    """What the VM must hold for this model: the data disk, and RAM (or swap) to stage the weights."""
    checkpoint_gb = math.ceil(plan.facts.checkpoint_bytes / 1e9) if plan.facts else 0
    needed = checkpoint_gb + args.swap_size_gb + DATA_DISK_FIXED_GB
    if args.data_disk_size_gb < needed:
        raise ConfigError("dataDiskSizeGb", f"{args.data_disk_size_gb} GB cannot hold the model cache: "
                          f"{plan.serving.model} ({checkpoint_gb} GB) + {args.swap_size_gb} GB swap + "
                          f"{DATA_DISK_FIXED_GB} GB for the vLLM venv and caches needs {needed} GB",
                          set_cmd("dataDiskSizeGb", needed))
    if args.swap_size_gb > 0:
        return
    shape = catalog.N1_SHAPES[args.machine_type]
    ram = catalog.GCE_MACHINE_RAM_BYTES.get(args.machine_type, int(shape.memory_gib * catalog.GIB))
    weights_gib = plan.facts.weights_bytes(args.dtype) / catalog.GIB if plan.facts else None
    need_gib = weights_gib + STAGING_RAM_OVERHEAD_GIB if weights_gib else UNKNOWN_MODEL_STAGING_RAM_GIB
    if ram / catalog.GIB < need_gib:
        raise ConfigError("swapSizeGb", f"0 (no swap) on {args.machine_type} with {ram / catalog.GIB:.1f} GiB RAM: "
                          f"staging {plan.serving.model} needs about {need_gib:.1f} GiB, and the kernel kills vLLM "
                          "without a traceback", set_cmd("swapSizeGb", 16))


def _log_shape(args: GceT4ServerArgs, resource: pulumi.Resource) -> None:
    vcpus = catalog.N1_SHAPES[args.machine_type].vcpus
    if args.gpu_count > 1 and vcpus < catalog.VCPUS_PER_T4 * args.gpu_count:
        pulumi.log.warn(f"{args.machine_type} has {vcpus} vCPUs for {args.gpu_count} T4s: each vLLM rank is a process "
                        f"of its own, beside the API server and the engine core; the project gives each T4 "
                        f"{catalog.VCPUS_PER_T4} ({catalog.n1_standard_for(args.gpu_count)})", resource=resource)
    elif args.gpu_count > 1:
        pulumi.log.info(f"tensorParallelSize {args.tensor_parallel_size}: {args.gpu_count} T4s on {args.machine_type}",
                        resource=resource)


def scheduling(args: GceT4ServerArgs) -> gcp.compute.InstanceSchedulingArgs:
    termination = args.termination_action or ("STOP" if args.max_run_hours or args.spot else None)
    return gcp.compute.InstanceSchedulingArgs(
        on_host_maintenance=args.on_host_maintenance,
        automatic_restart=not args.spot,
        preemptible=args.spot,
        provisioning_model="SPOT" if args.spot else "STANDARD",
        instance_termination_action=termination,
        max_run_duration=gcp.compute.InstanceSchedulingMaxRunDurationArgs(seconds=args.max_run_hours * 3600)
        if args.max_run_hours else None,
    )


def cost_per_hour_usd(args: GceT4ServerArgs) -> float | None:
    """While running: machine, GPU, address and both disks, at the region's list prices; None if the
    catalog lacks one of them."""
    prices = catalog.GCE_PRICES.get(args.region, {})
    keys = [f"machine:{args.machine_type}", f"gpu:{args.gpu_type}", "ip:external-in-use",
            f"disk:{args.boot_disk_type}:gb-month", f"disk:{args.data_disk_type}:gb-month"]
    if any(key not in prices for key in keys):
        return None
    monthly_disks = (args.boot_disk_size_gb * prices[keys[3]].usd_per_hour
                     + args.data_disk_size_gb * prices[keys[4]].usd_per_hour)
    hourly = (prices[keys[0]].usd_per_hour + prices[keys[1]].usd_per_hour * args.gpu_count
              + prices[keys[2]].usd_per_hour + monthly_disks / catalog.HOURS_PER_MONTH)
    return round(hourly, 4)


def data_disk_monthly_usd(args: GceT4ServerArgs) -> float | None:
    price = catalog.GCE_PRICES.get(args.region, {}).get(f"disk:{args.data_disk_type}:gb-month")
    return None if price is None else round(args.data_disk_size_gb * price.usd_per_hour, 2)


class GceT4Server(T4ServingComponent):
    data_disk_name: pulumi.Output[str]
    memory_plan: dict | None  # components.memory.MemoryPlan.as_output(); None when unsized

    def __init__(self, name: str, args: GceT4ServerArgs, opts: pulumi.ResourceOptions | None = None):
        # Everything a refusal needs is checked before anything is registered: a refused config
        # creates no resource.
        plan = check_serving(args, catalog.GCE_ACCELERATORS.get(args.gpu_type), args.host, args.port)
        check_host(args, plan)
        serving = plan.serving
        user_data = render_user_data(serving.vllm_args(), GuestSettings(
            DATA_DISK_DEVICE_NAME, args.swap_size_gb, idle_stop_minutes=args.idle_stop_minutes,
            port=serving.port))
        # Fixed names from the stack: the next `pulumi up` after a destroy finds the retained disk
        # under its name and adopts it (an import; in the stack already, the engine just updates it).
        vm_name = stack_resource_name(pulumi.get_project(), pulumi.get_stack(), "vm")
        disk_name = stack_resource_name(pulumi.get_project(), pulumi.get_stack(), "data")
        existing = adoptable_disk(disk_name, args.zone, vm_name, args.data_disk_size_gb, args.data_disk_type)

        super().__init__("gemma4-t4:gce:T4Server", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = {"app": APP_LABEL, **args.labels}
        if plan.memory is not None:
            pulumi.log.info(f"memory plan: {plan.memory.summary()}", resource=self)
        _log_shape(args, self)
        network_tag = f"{name}-iap-ssh"

        network = gcp.compute.Network(f"{name}-net", auto_create_subnetworks=False,
                                      description="gemma4-t4: private network, no ingress but IAP SSH", opts=child)
        subnet = gcp.compute.Subnetwork(f"{name}-subnet", network=network.id, region=args.region,
                                        ip_cidr_range=SUBNET_CIDR, private_ip_google_access=True, opts=child)
        gcp.compute.Firewall(
            f"{name}-allow-iap-ssh",
            network=network.id,
            direction="INGRESS",
            source_ranges=[IAP_SSH_SOURCE_RANGE],
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
            target_tags=[network_tag],
            description="SSH through Identity-Aware Proxy only; the vLLM port stays on loopback",
            opts=child,
        )
        if existing:
            pulumi.log.info(f"adopting the retained data disk {disk_name} ({existing})", resource=self)
        data_disk = gcp.compute.Disk(
            f"{name}-data",
            name=disk_name,
            zone=args.zone,
            type=args.data_disk_type,
            size=args.data_disk_size_gb,
            labels=labels,
            # The checkpoints, the vLLM venv and the compile cache outlive the VM: `pulumi destroy`
            # leaves this disk (and its storage bill) for the next VM unless retainDataDisk is false.
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=args.retain_data_disk, import_=existing),
        )
        instance = gcp.compute.Instance(
            name,
            name=vm_name,
            zone=args.zone,
            machine_type=args.machine_type,
            boot_disk=gcp.compute.InstanceBootDiskArgs(
                auto_delete=True,
                initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                    image=catalog.PINS["gce.image"], size=args.boot_disk_size_gb, type=args.boot_disk_type),
            ),
            guest_accelerators=[gcp.compute.InstanceGuestAcceleratorArgs(type=args.gpu_type,
                                                                         count=args.gpu_count)],
            scheduling=scheduling(args),
            attached_disks=[gcp.compute.InstanceAttachedDiskArgs(source=data_disk.self_link,
                                                                 device_name=DATA_DISK_DEVICE_NAME)],
            network_interfaces=[gcp.compute.InstanceNetworkInterfaceArgs(
                subnetwork=subnet.id,
                # An ephemeral public address for egress only (apt, PyPI, Hugging Face): the
                # network has no ingress rule but IAP SSH.
                access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()],
            )],
            metadata={"user-data": user_data, "startup-script": bootstrap_script(), "enable-oslogin": "TRUE"},
            # The open DKMS module is unsigned: Secure Boot would refuse to load it.
            shielded_instance_config=gcp.compute.InstanceShieldedInstanceConfigArgs(
                enable_secure_boot=False, enable_vtpm=True, enable_integrity_monitoring=True),
            tags=[network_tag],
            labels=labels,
            allow_stopping_for_update=True,
            opts=pulumi.ResourceOptions(
                parent=self,
                # cloud-init applies user-data once per instance: a changed guest config means a
                # new VM. The data disk attaches to one VM at a time, so the old one goes first.
                replace_on_changes=["metadata"],
                delete_before_replace=True,
            ),
        )

        self.data_disk_name = data_disk.name
        cost = cost_per_hour_usd(args)
        if cost is None:
            pulumi.log.warn(f"no catalog price for {args.machine_type} + {args.gpu_type} in {args.region}: "
                            "cost not estimated", resource=self)
        self.memory_plan = plan.memory.as_output() if plan.memory else None
        forward = f"{serving.port}:127.0.0.1:{serving.port}"
        self._register_contract(
            extra={"data_disk_name": self.data_disk_name, "memory_plan": self.memory_plan},
            cloud="gce",
            port=serving.port,
            served_model_name=serving.served_model_name,
            target={"instance": instance.name, "zone": instance.zone, "project": instance.project},
            # -f: ssh goes to the background once the forward is up, so the shell comes back.
            connect_command=pulumi.Output.concat(
                "gcloud compute ssh ", instance.name, " --project ", instance.project, " --zone ", instance.zone,
                f" --tunnel-through-iap -- -f -N -L {forward}"),
            cost_per_hour_usd=cost,
            billing_after_destroy_usd_per_month=(data_disk_monthly_usd(args) or 0.0)
            if args.retain_data_disk else 0.0,
        )
