"""GceT4Server's settings: the rules only a GCE VM has (zone, N1 shape and GPU, disks, scheduling, the listener
and its firewall, egress, operators, GCE's label rule), on top of the rules every component shares
(components/config). Each setting's name is the camelCase alias the schema and the stack config use.
"""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator, model_validator

from gemma4_t4 import catalog
from gemma4_t4.errors import ConfigError, Set, Unset

from ..config.schema import (
    AnyInput,
    Flag,
    ServingSettings,
    TextList,
    _default_from_tensor_parallel,
    _none_if_empty,
)

MIN_BOOT_DISK_GB = 32  # the driver, kernel headers and apt cache ([gce-t4-article]'s boot disk)
MIN_IDLE_STOP_MINUTES = 5
UNPRIVILEGED_PORTS = 1024  # vLLM runs as an unprivileged user on the VM
# vLLM's API key, the one check on its /v1: 32 hex characters are 128 random bits (`openssl rand -hex 32` gives 64).
MIN_API_KEY_CHARS = 32


class OnHostMaintenance(StrEnum):
    """What GCE does to the VM during host maintenance; a VM with a GPU must terminate."""

    TERMINATE = "TERMINATE"
    MIGRATE = "MIGRATE"


class TerminationAction(StrEnum):
    """What GCE does when maxRunHours ends or a SPOT VM is preempted."""

    STOP = "STOP"
    DELETE = "DELETE"


# A subnetwork is regional: its id is projects/P/regions/REGION/subnetworks/NAME (terraform-provider-google
# resource_compute_subnetwork.go sets that id), its self link the same path under the Compute API's URL.
SUBNETWORK_REGION = re.compile(r"(?:^|/)regions/([^/]+)/subnetworks/")


def subnetwork_refusal(subnetwork: str, zone: str) -> ConfigError | None:
    """The refusal of SUBNETWORK for a VM in ZONE when it names another region (a VM joins only a subnetwork of its
    own region); None when it is in the zone's region or names none (a bare name)."""
    where, region = SUBNETWORK_REGION.search(subnetwork), catalog.region_of(zone)
    if where is None or where[1] == region:
        return None
    there = sorted(z for z in catalog.GCE_T4_ZONES if catalog.region_of(z) == where[1])
    return ConfigError("subnetwork", f"{subnetwork} is in {where[1]}, and zone {zone} is in {region}: a VM joins "
                       "only a subnetwork of its own region",
                       (Set("zone", there[0]), f" (a T4 zone of {where[1]}), or a subnetwork in {region}")
                       if there else f"a subnetwork in {region} ({where[1]} sells no T4s)")


class GceT4ServerSettings(ServingSettings):
    """Everything GceT4Server is built from."""

    project: str = ""
    network: AnyInput = None
    subnetwork: AnyInput = None
    zone: str = "us-west2-b"
    machine_type: str = ""
    gpu_type: str = "nvidia-tesla-t4"
    allow_non_t4_gpu: Flag = False
    on_host_maintenance: OnHostMaintenance = OnHostMaintenance.TERMINATE
    boot_disk_size_gb: int = Field(32, ge=MIN_BOOT_DISK_GB, le=65536)
    boot_disk_type: str = "pd-ssd"
    boot_image: str = catalog.PINS["gce.image"]
    data_disk_size_gb: int = Field(250, ge=10, le=65536)
    data_disk_type: str = "pd-balanced"
    retain_data_disk: Flag = True
    swap_size_gb: int = Field(16, ge=0, le=65536)
    max_run_hours: int = Field(catalog.DEFAULT_MAX_RUN_HOURS, ge=0, le=catalog.GCE_MAX_RUN_DURATION_HOURS)
    spot: Flag = False
    termination_action: Annotated[TerminationAction | None, BeforeValidator(_none_if_empty)] = None
    idle_stop_minutes: int = Field(catalog.DEFAULT_IDLE_STOP_MINUTES, ge=0)
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    allow_non_loopback_host: Flag = False
    api_key: AnyInput = None
    api_source_ranges: TextList = Field("", validate_default=True)
    external_ip: Flag = True
    cloud_nat: Flag = False
    operators: TextList = Field("", validate_default=True)
    vllm_version: str = catalog.PINS["vllm.gce"]

    @property
    def region(self) -> str:
        return catalog.region_of(self.zone)

    @property
    def gpu_count(self) -> int:
        """One GPU per tensor-parallel rank."""
        return self.tensor_parallel_size

    @model_validator(mode="before")
    @classmethod
    def _shape_for_the_gpus(cls, data: Any) -> Any:
        return _default_from_tensor_parallel(data, "machineType", "machine_type", catalog.n1_standard_for)

    @field_validator("vllm_version")
    @classmethod
    def _locked_vllm(cls, version: str) -> str:
        if version not in catalog.GCE_VLLM_VERSIONS:
            known = ", ".join(f"{v} ({why})" for v, why in catalog.GCE_VLLM_VERSIONS.items())
            raise ConfigError("vllmVersion", f"{version!r} has no lock and no fit results for the Turing clamp; the "
                              f"guest installs only a locked, clamp-verified vLLM: {known}",
                              Set("vllmVersion", catalog.PINS["vllm.gce"]))
        return version

    @field_validator("port")
    @classmethod
    def _unprivileged_port(cls, port: int) -> int:
        if port < UNPRIVILEGED_PORTS:
            raise ConfigError("port", f"{port} is a privileged port: vLLM runs as an unprivileged user and could not "
                              "bind it (the idle stop would then count no answer as busy)", Set("port", 8000))
        return port

    @model_validator(mode="after")
    def _gce_facts(self) -> GceT4ServerSettings:
        self._check_network()
        self._check_gpu_and_shape()
        for key, disk_type, size in (("bootDiskType", self.boot_disk_type, self.boot_disk_size_gb),
                                     ("dataDiskType", self.data_disk_type, self.data_disk_size_gb)):
            _check_n1_disk(key, disk_type, size)
        self._check_scheduling()
        self._check_listener()
        self._check_exposure()
        self._check_egress()
        _check_operators(self.operators)
        _check_gce_labels(self.labels)
        return self

    def _check_network(self) -> None:
        # The VM takes the subnetwork; the IAP SSH firewall rule goes on its network.
        if (self.network is None) != (self.subnetwork is None):
            given, missing = ("network", "subnetwork") if self.subnetwork is None else ("subnetwork", "network")
            raise ConfigError(missing, f"{given} is set without {missing}: an existing network comes with the "
                              f"subnetwork the VM joins, in the zone's region {self.region}",
                              (Set(missing), f" (or leave out {given} for a network of the component's own)"))
        # One known now is checked against the zone here; one that is an Output (another resource's id), when its
        # value is known, before the data disk is made (components/gce/network.py subnetwork_checked).
        if isinstance(self.subnetwork, str) and (refusal := subnetwork_refusal(self.subnetwork, self.zone)):
            raise refusal

    def _check_gpu_and_shape(self) -> None:
        t4 = self.gpu_type in catalog.GCE_ACCELERATORS
        if not t4 and not self.allow_non_t4_gpu:
            raise ConfigError("gpuType", f"{self.gpu_type!r} is not a Tesla T4, the GPU this project is built and "
                              "priced for", (Set("gpuType", "nvidia-tesla-t4"), ", or opt in with ",
                                             Set("allowNonT4Gpu", True)))
        if not t4 and self.dtype in ("bfloat16", "auto") and self.gpu_type in catalog.NO_BFLOAT16_GPUS:
            raise ConfigError("dtype", f"'{self.dtype}' needs bfloat16, which {self.gpu_type} (compute capability "
                              "below 8.0) does not have", Set("dtype", "float16"))
        if not t4 and self.gpu_type not in catalog.N1_ATTACHABLE_GPUS:
            family = catalog.GPU_MACHINE_FAMILY.get(self.gpu_type)
            why = f"it comes only on {family} machine types" if family else "it is not one of the GPUs N1 takes"
            raise ConfigError("gpuType", f"an N1 VM cannot attach {self.gpu_type}: {why} "
                              f"(N1 takes {', '.join(sorted(catalog.N1_ATTACHABLE_GPUS))})",
                              Set("gpuType", "nvidia-tesla-t4"))
        zone_region = self.zone.rsplit("-", 1)
        if len(zone_region) != 2 or len(zone_region[1]) != 1 or not zone_region[1].isalpha():
            raise ConfigError("zone", f"{self.zone!r} is not a GCE zone (REGION-LETTER, e.g. us-west2-b)",
                              Set("zone", "us-west2-b"))
        if t4 and self.zone not in catalog.GCE_T4_ZONES:
            same_region = sorted(z for z in catalog.GCE_T4_ZONES if catalog.region_of(z) == self.region)
            where = (f"in {self.region}: {', '.join(same_region)}" if same_region
                     else f"in no zone of {self.region}; e.g. us-west2-b, us-central1-a")
            raise ConfigError("zone", f"{self.zone} does not sell T4s (GCE would reject the VM after the data disk "
                              f"exists); T4s are sold {where}",
                              Set("zone", same_region[0] if same_region else "us-west2-b"))
        shape = catalog.N1_SHAPES.get(self.machine_type)
        if shape is None:
            family = self.machine_type.split("-")[0]
            if family in ("a2", "a3", "a4", "g2", "g4"):
                why = "comes with its own GPUs (A100, H100, L4...), not a T4"
            elif self.machine_type in ("f1-micro", "g1-small") or family == "e2":
                why = "is a shared-core or E2 type, which takes no GPU"
            elif family == "n1":
                why = "is not an N1 shape GCE offers"
            else:
                why = "cannot attach a GPU: only N1 machine types take a T4"
            raise ConfigError("machineType", f"{self.machine_type} {why}", Set("machineType", "n1-standard-2"))
        if t4 and self.gpu_count not in shape.t4_counts():
            counts = shape.t4_counts()
            pick = catalog.n1_standard_for(self.gpu_count)
            vcpus, memory = catalog.T4_VM_LIMITS[self.gpu_count]
            raise ConfigError(
                "machineType", f"{self.machine_type} takes {' or '.join(map(str, counts)) or 'no'} T4s, and "
                f"tensorParallelSize {self.tensor_parallel_size} needs {self.gpu_count} (GCE: a VM with "
                f"{self.gpu_count} T4{'s' * (self.gpu_count > 1)} has at most {vcpus} vCPUs and {memory} GB)",
                (Set("machineType", pick), " (or ", Unset("machineType"), ", which picks it)"))
        if self.on_host_maintenance != "TERMINATE":
            raise ConfigError("onHostMaintenance", f"'{self.on_host_maintenance}' is refused by GCE for a VM with a "
                              "GPU (\"Instances with guest accelerators do not support live migration\")",
                              Set("onHostMaintenance", "TERMINATE"))

    def _check_scheduling(self) -> None:
        if self.termination_action and not (self.spot or self.max_run_hours):
            raise ConfigError("terminationAction", f"{self.termination_action} applies only to a SPOT VM or one with "
                              "maxRunHours; GCE refuses a termination action on a standard VM without a run limit",
                              (Unset("terminationAction"), " (or ", Set("maxRunHours", 8), ")"))
        if 0 < self.idle_stop_minutes < MIN_IDLE_STOP_MINUTES:
            raise ConfigError("idleStopMinutes", f"{self.idle_stop_minutes} min would stop a VM between two requests",
                              (Set("idleStopMinutes", MIN_IDLE_STOP_MINUTES), " (or 0 for off)"))

    def _check_listener(self) -> None:
        # The IAP tunnel (connect_command) and the idle stop both reach vLLM at 127.0.0.1:PORT.
        try:
            address = ipaddress.ip_address(self.host)
        except ValueError:
            raise ConfigError("host", f"{self.host!r} is not an IP address (a name such as localhost may resolve "
                              "to ::1, which the tunnel and the idle stop do not reach)",
                              Set("host", "127.0.0.1")) from None
        if str(address) == "127.0.0.1":
            return
        if address.is_loopback:
            raise ConfigError("host", f"vLLM on {self.host} is not reached by the tunnel or the idle stop, which "
                              "use 127.0.0.1 (the idle stop counts no answer as busy: the VM would never stop)",
                              Set("host", "127.0.0.1"))
        if not self.allow_non_loopback_host:
            raise ConfigError(
                "host", f"vLLM would listen on {self.host}, reachable beyond the VM: the OpenAI API has no auth",
                ("keep 127.0.0.1 and use the IAP tunnel, or opt in with ", Set("allowNonLoopbackHost", True)))
        if str(address) != "0.0.0.0":
            raise ConfigError("host", f"vLLM on {self.host} only is not reached by the tunnel or the idle stop, which "
                              "use 127.0.0.1", (Set("host", "0.0.0.0"), " (with allowNonLoopbackHost)"))

    def _check_exposure(self) -> None:
        """vLLM beyond the VM's loopback: only with a key on its API and the address ranges the firewall admits to
        its port (the stack's deny-all rule keeps everything else out)."""
        _check_source_ranges("apiSourceRanges", self.api_source_ranges, self.port)
        if not self.allow_non_loopback_host:
            if self.api_source_ranges:
                raise ConfigError("apiSourceRanges", f"admits {', '.join(self.api_source_ranges)} to port {self.port}, "
                                  "where nothing listens: vLLM is on the VM's loopback without allowNonLoopbackHost",
                                  (Unset("apiSourceRanges"), " (the IAP tunnel reaches vLLM), or ",
                                   Set("allowNonLoopbackHost", True), " with ", Set("host", "0.0.0.0")))
            return
        if self.api_key is None or (isinstance(self.api_key, str) and not self.api_key.strip()):
            raise ConfigError("allowNonLoopbackHost", "true without apiKey: vLLM's OpenAI API would answer anyone who "
                              "reaches the port, with no authentication",
                              (Set("apiKey", "$(openssl rand -hex 32)", secret=True), " (clients send it as "
                               "Authorization: Bearer KEY; vLLM checks it on /v1 only), or ",
                               Unset("allowNonLoopbackHost"), " and use the IAP tunnel"))
        if isinstance(self.api_key, str):
            check_api_key(self.api_key)  # a secret Output is checked where its value is known (checks.py)
        if not self.api_source_ranges:
            raise ConfigError("allowNonLoopbackHost", f"true without apiSourceRanges: the firewall admits no one to "
                              f"port {self.port} (the stack denies every source but IAP's SSH), and vLLM's routes "
                              "beyond /v1 (/tokenize, /pause, /metrics...) answer without the key",
                              (Set("apiSourceRanges", "10.0.0.0/8"), " (the CIDRs that call vLLM, comma-separated)"))

    def _check_egress(self) -> None:
        if self.cloud_nat and self.external_ip:
            raise ConfigError("cloudNat", "true for a VM with an external IP: Cloud NAT serves only VMs without one, "
                              "so it would bill and carry nothing",
                              (Set("externalIp", False), " (or ", Unset("cloudNat"), ")"))


# IAM members a role can be granted to (cloud.google.com/iam/docs/principal-identifiers); allUsers and
# allAuthenticatedUsers are anyone.
IAM_MEMBER = re.compile(r"(user|group|serviceAccount):[^@\s:]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"
                        r"|domain:[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+"
                        r"|principal(Set)?://[!-~]+")
ANYONE = ("allUsers", "allAuthenticatedUsers")


def _check_operators(members: tuple[str, ...]) -> None:
    if len(set(members)) != len(members):
        twice = next(member for member in members if members.count(member) > 1)
        raise ConfigError("operators", f"{twice} is listed twice", Set("operators", ",".join(dict.fromkeys(members))))
    for member in members:
        if member in ANYONE:
            raise ConfigError("operators", f"{member} is anyone: it would let anyone open an IAP tunnel to the VM "
                              "and log in", Set("operators", "user:YOU@example.com"))
        if not IAM_MEMBER.fullmatch(member):
            raise ConfigError("operators", f"{member!r} is not an IAM member (user:EMAIL, group:EMAIL, "
                              "serviceAccount:EMAIL, domain:DOMAIN, principal://... or principalSet://...)",
                              Set("operators", f"user:{member}" if "@" in member and ":" not in member
                                  else "user:YOU@example.com"))


def _check_source_ranges(key: str, ranges: tuple[str, ...], port: int) -> None:
    """CIDRs a firewall rule takes as its sources: IPv4 (the VM has no IPv6 address, and one rule takes no mix),
    a network address, and never the whole internet (vLLM answers there beyond the key's /v1)."""
    for text in ranges:
        try:
            network = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise ConfigError(key, f"{text!r} is not an IPv4 CIDR range (ADDRESS/PREFIX)",
                              Set(key, "10.0.0.0/8")) from None
        if network.version != 4:
            raise ConfigError(key, f"{text} is IPv6: the VM has only an IPv4 address", Set(key, "10.0.0.0/8"))
        if network.network_address != ipaddress.ip_interface(text).ip:
            raise ConfigError(key, f"{text} has host bits set; the range it names is {network}", Set(key, str(network)))
        if network.prefixlen < catalog.API_SOURCE_MIN_PREFIX:
            whole = "every address on the internet" if network.prefixlen == 0 else \
                f"{network.num_addresses:,} addresses, wider than any one organization's network"
            widest = catalog.API_SOURCE_MIN_PREFIX
            raise ConfigError(key, f"{text} is {whole}: the firewall admits at most a /{widest} to port {port} "
                              "(catalog.API_SOURCE_MIN_PREFIX)",
                              (Set(key, "CIDR"), f" (the networks that call vLLM, each /{widest} or narrower)"))


def check_api_key(key: str) -> None:
    """vLLM's key, in whatever form it arrived (a plain string, or a secret's value once known): at least
    MIN_API_KEY_CHARS, one line. The value is never shown: it is a credential."""
    if len(key) < MIN_API_KEY_CHARS or any(c.isspace() for c in key):
        raise ConfigError("apiKey", f"is shorter than {MIN_API_KEY_CHARS} characters or holds whitespace (it is "
                          "one line of vLLM's environment file)", Set("apiKey", "$(openssl rand -hex 32)", secret=True))


def _check_n1_disk(key: str, disk_type: str, size_gb: int) -> None:
    size_key = key.replace("Type", "SizeGb")
    limits = catalog.N1_DISK_TYPES.get(disk_type)
    if limits is None:
        why = ("exists, but an N1 VM cannot attach it" if disk_type in catalog.NOT_ON_N1_DISK_TYPES
               else "is not a persistent disk type")
        raise ConfigError(key, f"{disk_type!r} {why} (N1 takes {', '.join(sorted(catalog.N1_DISK_TYPES))})",
                          Set(key, "pd-balanced"))
    if not limits.min_gb <= size_gb <= limits.max_gb:
        raise ConfigError(size_key, f"{size_gb} GB is outside {disk_type}'s {limits.min_gb}-{limits.max_gb} GB",
                          Set(size_key, min(max(size_gb, limits.min_gb), limits.max_gb)))


def _gce_label(text: str, key: bool = False) -> str:
    """TEXT made to follow GCE's label rule, for a fix that works: lowercase letters, digits, _ and
    -, at most 63, a key starting with a letter."""
    cleaned = re.sub(r"[^a-z0-9_-]", "_", text.lower())[:63]
    if key and not cleaned[:1].isalpha():
        cleaned = f"l{cleaned}"[:63] if cleaned else "team"
    return cleaned


# The labels the GCE component sets itself: app on every resource, and the data disk's retainDataDisk as its
# last `up` saved it (storage.py RETAIN_LABEL).
GCE_OWN_LABELS = {"app": "app=gemma4-t4", "gemma4-t4-retain-data-disk": "gemma4-t4-retain-data-disk=true|false"}


def _check_gce_labels(labels: dict[str, str]) -> None:
    user_max = catalog.GCE_MAX_LABELS - len(GCE_OWN_LABELS)
    if len(labels) > user_max:
        raise ConfigError("labels", f"{len(labels)} labels, and GCE allows {catalog.GCE_MAX_LABELS} per resource "
                          f"including {' and '.join(GCE_OWN_LABELS.values())}",
                          (Unset("labels.NAME"), f" (keep {user_max})"))
    for name, value in labels.items():
        fix = Set(f"labels.{_gce_label(name, key=True)}", _gce_label(value) or "VALUE")
        if name in GCE_OWN_LABELS:
            raise ConfigError("labels", f"{name} is the project's own label ({GCE_OWN_LABELS[name]})",
                              "use another label name")
        if not catalog.GCE_LABEL_KEY.fullmatch(name):
            raise ConfigError(f"labels.{name}", f"label key {name!r} breaks GCE's rule: 1-63 lowercase letters, "
                              "digits, _ or -, starting with a letter", fix)
        if not catalog.GCE_LABEL_VALUE.fullmatch(value):
            raise ConfigError(f"labels.{name}", f"label value {value!r} breaks GCE's rule: 0-63 lowercase letters, "
                              "digits, _ or -", fix)
