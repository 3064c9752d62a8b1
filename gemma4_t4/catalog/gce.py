"""Compute Engine: which zones sell a T4, the N1 shapes that take one, the disks N1 can attach,
label and scheduling limits, prices per region.

What the plan checks offline comes from here; `gemma4-t4 preflight` still asks the live cloud
(quota, and the zone's acceleratorTypes list) before `pulumi up`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .gpus import TESLA_T4
from .prices import Price

# GCE accelerator type -> GPU. Only the T4 is described: other GPUs need an explicit opt-in.
GCE_ACCELERATORS = {"nvidia-tesla-t4": TESLA_T4}

# Zones whose acceleratorTypes list nvidia-tesla-t4: the T4 column of
# cloud.google.com/compute/docs/gpus/gpu-regions-zones, transcribed 2026-12-02 on a machine that
# cannot reach it (so not re-read live: `gemma4-t4 preflight` checks the zone against the live
# accelerator-types list before `pulumi up`). A zone not listed is refused at preview, because
# GCE would reject the VM only after the data disk exists.
GCE_T4_ZONES = frozenset({
    "asia-east1-a", "asia-east1-c",
    "asia-northeast1-a", "asia-northeast1-c",
    "asia-northeast3-b", "asia-northeast3-c",
    "asia-south1-a", "asia-south1-b",
    "asia-southeast1-a", "asia-southeast1-b", "asia-southeast1-c",
    "asia-southeast2-a", "asia-southeast2-b",
    "australia-southeast1-a", "australia-southeast1-c",
    "europe-central2-b", "europe-central2-c",
    "europe-west1-b", "europe-west1-c", "europe-west1-d",
    "europe-west2-a", "europe-west2-b",
    "europe-west3-b",
    "europe-west4-a", "europe-west4-b", "europe-west4-c",
    "me-west1-b", "me-west1-c",
    "northamerica-northeast1-c",
    "southamerica-east1-a", "southamerica-east1-c",
    "us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f",
    "us-east1-c", "us-east1-d",
    "us-east4-a", "us-east4-b", "us-east4-c",
    "us-west1-a", "us-west1-b",
    "us-west2-b", "us-west2-c",   # [gce-t4-article] ran in us-west2-b
    "us-west3-b",
    "us-west4-a", "us-west4-b",
})

# GPUs an N1 VM can attach (GPU docs: "N1 general-purpose machine types"); L4 needs G2, A100 A2.
N1_ATTACHABLE_GPUS = frozenset({"nvidia-tesla-t4", "nvidia-tesla-p4", "nvidia-tesla-p100", "nvidia-tesla-v100"})
# The machine family each other GPU needs, for the refusal's reason.
GPU_MACHINE_FAMILY = {"nvidia-l4": "G2", "nvidia-tesla-a100": "A2", "nvidia-a100-80gb": "A2",
                      "nvidia-h100-80gb": "A3", "nvidia-h100-mega-80gb": "A3"}


# T4 count -> (most vCPUs, most memory in GB) of an N1 VM with that many T4s: the NVIDIA T4 rows
# of cloud.google.com/compute/docs/gpus (1 GPU: 1-48 vCPUs, up to 312 GB; 2 GPUs: the same; 4 GPUs:
# up to 96 vCPUs, 624 GB). The page cannot be read from here; transcribed 2026-12-02 through its
# copy in SkyPilot's GCP catalog (sky/clouds/service_catalog/gcp_catalog.py,
# _NUM_ACC_TO_MAX_CPU_AND_MEMORY "T4", which cites that page). N1 takes no other T4 count.
T4_VM_LIMITS = {1: (48, 312), 2: (48, 312), 4: (96, 624)}
# vCPUs the project gives each T4 when it picks the shape: [gce-t4-article]'s n1-standard-2 per T4, so
# tensorParallelSize N gets n1-standard-2N (each vLLM rank is a process of its own, beside the
# API server and the engine core).
VCPUS_PER_T4 = 2


@dataclass(frozen=True)
class MachineShape:
    vcpus: int
    memory_gib: float  # GCE writes "GB" for what is GiB: n1-standard-2 "7.5 GB" = 7.5 GiB

    def t4_counts(self) -> tuple[int, ...]:
        """The T4 counts GCE accepts on this shape (T4_VM_LIMITS)."""
        return tuple(count for count, (vcpus, memory) in T4_VM_LIMITS.items()
                     if self.vcpus <= vcpus and self.memory_gib <= memory)


def n1_standard_for(t4s: int) -> str:
    """The shape the project picks for ``t4s`` T4s: VCPUS_PER_T4 vCPUs (and 3.75 GB each) per T4."""
    return f"n1-standard-{VCPUS_PER_T4 * t4s}"


# cloud.google.com/compute/docs/general-purpose-machines#n1_machines (transcribed 2026-12-02):
# standard 3.75 GB/vCPU, highmem 6.5 GB/vCPU, highcpu 0.9 GB/vCPU. Shared-core N1 (f1-micro,
# g1-small) takes no GPU and is not listed.
N1_SHAPES: dict[str, MachineShape] = {
    **{f"n1-standard-{n}": MachineShape(n, 3.75 * n) for n in (1, 2, 4, 8, 16, 32, 64, 96)},
    **{f"n1-highmem-{n}": MachineShape(n, 6.5 * n) for n in (2, 4, 8, 16, 32, 64, 96)},
    **{f"n1-highcpu-{n}": MachineShape(n, 0.9 * n) for n in (2, 4, 8, 16, 32, 64, 96)},
}

# Host RAM the guest kernel reports (bytes), where measured: [gce-t4-article], MemTotal on n1-standard-2.
GCE_MACHINE_RAM_BYTES = {"n1-standard-2": 7797587968}


@dataclass(frozen=True)
class DiskType:
    min_gb: int
    max_gb: int


# Persistent disk types an N1 VM can attach (cloud.google.com/compute/docs/disks, "Machine type
# support", transcribed 2026-12-02): pd-extreme and every Hyperdisk type need newer families (N2, C3...).
# Zonal persistent disks: 10 GB to 64 TB.
N1_DISK_TYPES = {
    "pd-standard": DiskType(10, 65536),
    "pd-balanced": DiskType(10, 65536),
    "pd-ssd": DiskType(10, 65536),
}
# Disk types that exist but that N1 cannot attach: refused with this reason rather than "unknown".
NOT_ON_N1_DISK_TYPES = frozenset({"pd-extreme", "hyperdisk-balanced", "hyperdisk-extreme", "hyperdisk-throughput",
                                  "hyperdisk-ml", "hyperdisk-balanced-high-availability"})


# Labels (cloud.google.com/compute/docs/labeling-resources, "Requirements for labels",
# transcribed 2026-12-02): at most 64 per resource; keys 1-63 characters of lowercase letters,
# digits, `_` and `-`, starting with a lowercase letter; values 0-63 of the same characters
# (GCE also takes international letters; the ASCII rule here is the stricter one).
GCE_MAX_LABELS = 64
GCE_LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
GCE_LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")

# scheduling.maxRunDuration: 30 s to 120 days (cloud.google.com/compute/docs/instances/limit-vm-runtime).
GCE_MAX_RUN_DURATION_HOURS = 120 * 24


# --- prices ---------------------------------------------------------------------------------------

# The recorded public price list: SkyPilot's GCP catalog, which its fetcher builds from Google's Cloud Billing
# Catalog SKUs (on demand, and the Spot SKUs as SpotPrice), as the file stood at one commit. Read 2026-12-05
# through its stored copy (this machine cannot reach the live pricing pages).
GCE_PRICE_LIST = ("SkyPilot GCP catalog, github.com/skypilot-org/skypilot-catalog catalogs/v7/gcp/vms.csv at "
                  "commit 017e2502fb63, read 2026-12-05")

# Region -> (n1-standard-2, n1-standard-2 Spot, one T4, one T4 Spot), USD per hour: the n1-standard-2 rows and
# the `T4,1` rows of that file, for every region of GCE_T4_ZONES (the file lists the same T4 zones, and
# asia-east2 besides, which the zone list does not). us-central1's n1-standard-2 (0.095) and us-west2's (0.11411)
# are what this catalog held before; us-west2's T4 was 0.35 here and is 0.42074 in the list (corrected).
_N1_T4_HOURLY: dict[str, tuple[float, float, float, float]] = {
    "asia-east1": (0.11, 0.02112, 0.35, 0.14),
    "asia-northeast1": (0.12188, 0.03331, 0.37, 0.1342),
    "asia-northeast3": (0.12188, 0.02695, 0.37, 0.148),
    "asia-south1": (0.1141, 0.02341, 0.41, 0.1636),
    "asia-southeast1": (0.11719, 0.02278, 0.37, 0.1195),
    "asia-southeast2": (0.12774, 0.0242, 0.4033, 0.1266),
    "australia-southeast1": (0.13479, 0.04246, 0.44, 0.176),
    "europe-central2": (0.11495, 0.01798, 0.41, 0.164),
    "europe-west1": (0.1045, 0.0329, 0.35, 0.14),
    "europe-west2": (0.1224, 0.02546, 0.399, 0.0952),
    "europe-west3": (0.1224, 0.03478, 0.41, 0.164),
    "europe-west4": (0.10458, 0.03891, 0.3675, 0.14),
    "me-west1": (0.1045, 0.01869, 0.385, 0.0804),
    "northamerica-northeast1": (0.10458, 0.03136, 0.38538, 0.154),
    "southamerica-east1": (0.1508, 0.01977, 0.48, 0.192),
    "us-central1": (0.095, 0.02408, 0.35, 0.14),
    "us-east1": (0.095, 0.02408, 0.35, 0.14),
    "us-east4": (0.10699, 0.0226, 0.37, 0.1123),
    "us-west1": (0.095, 0.02408, 0.35, 0.14),
    "us-west2": (0.11411, 0.03511, 0.42074, 0.164),
    "us-west3": (0.11411, 0.03306, 0.42074, 0.164),
    "us-west4": (0.10699, 0.02577, 0.37, 0.1258),
}

# Persistent disks, USD per GB-month (cloud.google.com/compute/all-pricing, transcribed 2026-12-02 without a live
# read): (pd-ssd, pd-balanced, pd-standard). The price list above has no disks, and no other recorded source gives
# them per region: every other region's disks stay unknown, and so does its cost while serving (not a guess).
_DISKS_GB_MONTH = {"us-central1": (0.17, 0.10, 0.04), "us-west2": (0.204, 0.12, 0.048)}
_DISK_SOURCE = ("GCP list price, on demand, {region} (cloud.google.com/compute/all-pricing, transcribed 2026-12-02 "
                "without a live read)")

# N1 predefined types bill per vCPU and per GB at the region's rates, and every n1-standard has
# 3.75 GB per vCPU: n1-standard-N costs N/2 x n1-standard-2 (the shapes tensorParallelSize picks).
_SCALED = "{base}; n1-standard-{n} = {n}/2 x n1-standard-2 (N1 bills per vCPU and GB)"
SPOT = ":spot"  # the suffix of an item's Spot price: "gpu:nvidia-tesla-t4:spot"


def spot_item(item: str) -> str:
    """The catalog key of ITEM's Spot price (a Spot VM bills its machine and GPUs at the Spot SKUs)."""
    return item + SPOT


def _region_prices(region: str) -> dict[str, Price]:
    machine, machine_spot, t4, t4_spot = _N1_T4_HOURLY[region]
    source = f"{GCE_PRICE_LIST}, {region}"
    prices = {"ip:external-in-use": Price(0.005, "GCP list price, external IPv4 in use, all regions, 2026")}
    for suffix, hourly, kind in (("", machine, "on demand"), (SPOT, machine_spot, "Spot")):
        base = f"{source}, {kind}"
        prices[f"machine:n1-standard-2{suffix}"] = Price(hourly, base)
        for n in (4, 8):
            prices[f"machine:n1-standard-{n}{suffix}"] = Price(round(hourly * n / 2, 5),
                                                              _SCALED.format(base=base, n=n))
    prices["gpu:nvidia-tesla-t4"] = Price(t4, f"{source}, on demand")
    prices[spot_item("gpu:nvidia-tesla-t4")] = Price(t4_spot, f"{source}, Spot")
    if region in _DISKS_GB_MONTH:
        disk_source = _DISK_SOURCE.format(region=region)
        for disk, gb_month in zip(("pd-ssd", "pd-balanced", "pd-standard"), _DISKS_GB_MONTH[region], strict=True):
            prices[f"disk:{disk}:gb-month"] = Price(gb_month, disk_source)
    return prices


# Region -> item -> price. Estimates for planning: the billing report is the truth. A region or
# item not listed has no price (cost and plan say unknown) rather than another region's price.
GCE_PRICES: dict[str, dict[str, Price]] = {region: _region_prices(region) for region in sorted(_N1_T4_HOURLY)}


def region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]

# What a stopped (TERMINATED) VM still bills: "Stopped instances do not incur VM usage charges
# while they are stopped. However, resources that the VM is using, such as persistent disks and
# static IP addresses, will continue to be charged until they are deleted." (Compute Engine API,
# instances.stop, as google-cloud-compute 1.56.0 quotes it). An ephemeral external address is
# released at stop and a new one assigned at start.
GCE_BILLED_WHILE_STOPPED = ("persistent disks", "static external IP addresses")


# --- who reaches the VM ------------------------------------------------------------------------------

# IAP's TCP forwarding connects to a VM from this range, and only from it: "allow ingress traffic from the IP
# range 35.235.240.0/20" (cloud.google.com/iap/docs/using-tcp-forwarding#create-firewall-rule, 2026-12-05).
IAP_TCP_FORWARDING_RANGE = "35.235.240.0/20"
# VPC firewall rules (cloud.google.com/vpc/docs/firewalls, "Priority"): 0 is the highest priority and 65535 the
# lowest; at equal priority a deny rule wins over an allow rule (also pulumi_gcp 10.2.0 compute/firewall.py,
# `priority`: "DENY rules take precedence over ALLOW rules having equal priority"). A rule made without one gets
# 1000 (the same docstring: "When not specified, the value assumed is 1000"), and the default network's
# pre-populated rules (default-allow-internal, -ssh, -rdp, -icmp) have 65534.
FIREWALL_DEFAULT_PRIORITY = 1000
DEFAULT_NETWORK_RULE_PRIORITY = 65534
# The stack's own rules for its VM's tag. The deny-all is at 1, not just above 1000: only an allow rule at
# priority 0 can still admit anything a network's owner allows, however that rule is written (a broad
# "allow SSH from anywhere" at 500 is beaten too). What the stack admits on purpose (IAP's SSH, apiSourceRanges
# to vLLM's port) is at 0, the one priority above it. Hierarchical firewall policies (organization, folder) are
# evaluated before any VPC rule (same page, "Firewall policy rule evaluation order") and stay out of a stack's
# reach.
FIREWALL_ALLOW_PRIORITY = 0
FIREWALL_DENY_PRIORITY = 1
# What an operator may do to the stack's VM, and nothing else (the custom role the component makes and grants on this
# instance only, with the IAP tunnel and OS Login): read it (gcloud, `status`, `wait`: compute.instances.get; the
# guest's boot phases: compute.instances.getGuestAttributes) and stop and start it. Permissions: Compute Engine IAM
# permissions reference (cloud.google.com/compute/docs/access/iam-permissions). Not compute.instances.setMetadata,
# which roles/compute.instanceAdmin.v1 holds on every VM of a project it is granted on: with it an operator could
# set `enable-oslogin=FALSE` and `ssh-keys` and be root on each of them.
GCE_OPERATOR_PERMISSIONS = ("compute.instances.get", "compute.instances.getGuestAttributes",
                            "compute.instances.start", "compute.instances.stop")
# The label the GCE component puts on every resource it makes (components/gce/storage.py APP_LABEL): stop and start
# act only on a VM that carries it, so a stack whose outputs name another VM (a hand-edited state, an import) cannot
# have the tools stop someone else's machine.
GCE_APP_LABEL = ("app", "gemma4-t4")
# The widest source range apiSourceRanges admits to vLLM's port: an IPv4 /8, the largest block one organization
# holds (IANA's IPv4 address space registry allocates in /8 units; RFC 1918's 10.0.0.0/8 is the widest private
# network). Anything wider (0.0.0.0/1 and 128.0.0.0/1, which together are /0) spans unrelated networks: it is "the
# internet", however it is split. The VM has no IPv6 address, so an IPv6 range is refused outright.
API_SOURCE_MIN_PREFIX = 8

# Cloud NAT, Public NAT (cloud.google.com/nat/pricing, read 2026-12-05 through the stored copy the `search` tool
# returns): per hour "$0.0014 * the number of VM instances that are using the gateway" (up to 32), "$0.045" per
# GiB "processed, inbound and outbound data transfer", and "$0.005" per hour "for a static or an ephemeral
# external IP address used by a NAT gateway"; "The data processing price is the same across all regions".
_NAT = "Cloud NAT list price, all regions (cloud.google.com/nat/pricing, read 2026-12-05)"
CLOUD_NAT_PRICES = {
    "nat:vm-hour": Price(0.0014, _NAT),
    "nat:gib-processed": Price(0.045, _NAT),
    "nat:ip-hour": Price(0.005, _NAT),
}
# What a first boot downloads besides the model's checkpoint (which the model facts size): the vLLM environment
# the guest pip-installs (vLLM, torch cu130 and NVIDIA's CUDA runtime wheels). Neither article sizes those wheels;
# this is the AWS vLLM container that carries the same stack ([sagemaker-t4-article]: the ~8 GB base image,
# SAGEMAKER_BASE_IMAGE_BYTES), a planning figure. The driver's apt packages ([gce-t4-article]'s list: nvidia-driver,
# nvidia-kernel-open-dkms, linux-headers) are not sized by either article and not counted.
FIRST_BOOT_VLLM_ENV_BYTES = 8 * 10**9

# What makes pulumi-gcp replace a gcp.compute.Instance (the provider's schema: hashicorp/terraform-provider-google,
# google/services/compute/resource_compute_instance.go at e03b7622, which pulumi-gcp bridges): boot_disk,
# guest_accelerator, name, network_interface and zone are ForceNew; metadata_startup_script is made ForceNew by the
# resource's CustomizeDiff (customdiff.ForceNewIf); in the scheduling block, preemptible, provisioning_model,
# termination_time, max_run_duration and on_instance_stop_action are ForceNew (so spot and maxRunHours replace the VM);
# metadata is updated in place (setMetadata), machine_type with the VM stopped (allow_stopping_for_update). By the
# inputs' names, as the engine sends them; a dotted name is a key inside an input.
GCE_INSTANCE_FORCE_NEW = ("bootDisk", "guestAccelerators", "name", "networkInterfaces", "zone",
                          "metadataStartupScript", "scheduling.preemptible", "scheduling.provisioningModel",
                          "scheduling.terminationTime", "scheduling.maxRunDuration", "scheduling.onInstanceStopAction")
# And a gcp.compute.Disk (google/services/compute/resource_compute_disk.go at e03b7622): name, zone, type, image,
# snapshot and project are ForceNew, as is a smaller size (customdiff.ForceNewIfChange("size", IsDiskShrinkage)).
GCE_DISK_FORCE_NEW = ("name", "zone", "type", "image", "snapshot", "project")
