"""GCE: one n1-standard-2 with one Tesla T4 serving Gemma 4 through vLLM.

Resources (all children of the component): a private VPC with one subnet, a firewall rule that
admits SSH from Google's IAP range only (nothing opens the vLLM port), a pd-balanced data disk
that outlives the VM, and the VM itself, whose guest is set up by cloud-config (see cloudinit/).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from cloudinit.render import GuestSettings, bootstrap_script, render_user_data
from gemma4_t4 import catalog

from .errors import ConfigError
from .serving import ServingConfig

IAP_SSH_SOURCE_RANGE = "35.235.240.0/20"  # Google's IAP TCP-forwarding range
DATA_DISK_DEVICE_NAME = "gemma4-data"
SUBNET_CIDR = "10.80.0.0/24"
MIN_BOOT_DISK_GB = 32
# Data disk beyond the checkpoint and swap: the vLLM venv, pip's cache, the compile cache.
# Seed 000: 62 GB used on /opt1 with two checkpoints (18.5 GB) and the 16 GB swapfile.
DATA_DISK_FIXED_GB = 30
# Host RAM vLLM needs beyond the weights to stage them without swap (seed 000: the engine
# was OOM-killed at a 7.25 of 7.8 GB host peak staging 8.02 GiB of weights).
STAGING_RAM_OVERHEAD_GIB = 4.0
UNKNOWN_MODEL_STAGING_RAM_GIB = 16.0
MIN_IDLE_STOP_MINUTES = 5


@dataclass(frozen=True)
class GceT4Settings:
    zone: str
    machine_type: str
    gpu_type: str
    gpu_count: int
    on_host_maintenance: str
    boot_disk_size_gb: int
    boot_disk_type: str
    data_disk_size_gb: int
    data_disk_type: str
    retain_data_disk: bool
    swap_size_gb: int
    allow_non_t4_gpu: bool = False
    # Cost guard, both off by default: a run-time limit after which GCE stops (or deletes) the VM,
    # and an idle stop after that many minutes without a served request.
    max_run_hours: int = 0
    spot: bool = False
    termination_action: str = ""
    idle_stop_minutes: int = 0
    image: str = catalog.PINS["gce.image"]

    @property
    def region(self) -> str:
        return self.zone.rsplit("-", 1)[0]

    def gpu(self) -> catalog.Gpu | None:
        return catalog.GCE_ACCELERATORS.get(self.gpu_type)

    def validate(self, serving: ServingConfig) -> None:
        if self.gpu_type not in catalog.GCE_ACCELERATORS and not self.allow_non_t4_gpu:
            raise ConfigError("gpuType", f"{self.gpu_type!r} is not a Tesla T4, the GPU this project is built and "
                              "priced for", "pulumi config set gemma4-t4:gpuType nvidia-tesla-t4, or opt in with "
                              "pulumi config set gemma4-t4:allowNonT4Gpu true")
        if self.gpu_count != 1:
            raise ConfigError("gpuCount", f"must be 1 (vLLM serves on one GPU here), got {self.gpu_count}",
                              "pulumi config set gemma4-t4:gpuCount 1")
        if self.on_host_maintenance != "TERMINATE":
            raise ConfigError("onHostMaintenance", f"{self.on_host_maintenance!r} is refused by GCE for a VM with a "
                              "GPU (\"Instances with guest accelerators do not support live migration\")",
                              "pulumi config set gemma4-t4:onHostMaintenance TERMINATE")
        if self.boot_disk_size_gb < MIN_BOOT_DISK_GB:
            raise ConfigError("bootDiskSizeGb", f"{self.boot_disk_size_gb} GB is under the {MIN_BOOT_DISK_GB} GB "
                              "the driver, headers and apt cache need", f"pulumi config set gemma4-t4:bootDiskSizeGb "
                              f"{MIN_BOOT_DISK_GB}")
        if self.swap_size_gb < 0:
            raise ConfigError("swapSizeGb", f"must be 0 or more, got {self.swap_size_gb}",
                              "pulumi config set gemma4-t4:swapSizeGb 16")
        needed = self.data_disk_needed_gb(serving.model)
        if self.data_disk_size_gb < needed:
            raise ConfigError("dataDiskSizeGb", f"{self.data_disk_size_gb} GB cannot hold the model cache: "
                              f"{serving.model} + {self.swap_size_gb} GB swap + {DATA_DISK_FIXED_GB} GB for the vLLM "
                              f"venv and caches needs {needed} GB", f"pulumi config set gemma4-t4:dataDiskSizeGb {needed}")
        self._validate_swap(serving.model)
        self._validate_cost_guard()

    def _validate_cost_guard(self) -> None:
        if self.max_run_hours < 0:
            raise ConfigError("maxRunHours", f"must be 0 (off) or more, got {self.max_run_hours}",
                              "pulumi config set gemma4-t4:maxRunHours 8")
        if self.termination_action not in ("", "STOP", "DELETE"):
            raise ConfigError("terminationAction", f"{self.termination_action!r} is not STOP or DELETE",
                              "pulumi config set gemma4-t4:terminationAction STOP")
        if self.spot and self.max_run_hours and not self.termination_action:
            raise ConfigError("terminationAction", "a SPOT VM with maxRunHours needs an explicit termination action",
                              "pulumi config set gemma4-t4:terminationAction STOP (the data disk stays either way)")
        if 0 < self.idle_stop_minutes < MIN_IDLE_STOP_MINUTES:
            raise ConfigError("idleStopMinutes", f"{self.idle_stop_minutes} min would stop a VM between two requests",
                              f"pulumi config set gemma4-t4:idleStopMinutes {MIN_IDLE_STOP_MINUTES} (or 0 for off)")
        if self.idle_stop_minutes < 0:
            raise ConfigError("idleStopMinutes", "must be 0 (off) or more",
                              "pulumi config set gemma4-t4:idleStopMinutes 0")

    def scheduling(self) -> gcp.compute.InstanceSchedulingArgs:
        termination = self.termination_action or ("STOP" if self.max_run_hours or self.spot else None)
        return gcp.compute.InstanceSchedulingArgs(
            on_host_maintenance=self.on_host_maintenance,
            automatic_restart=not self.spot,
            preemptible=self.spot,
            provisioning_model="SPOT" if self.spot else "STANDARD",
            instance_termination_action=termination,
            max_run_duration=gcp.compute.InstanceSchedulingMaxRunDurationArgs(seconds=self.max_run_hours * 3600)
            if self.max_run_hours else None,
        )

    def data_disk_needed_gb(self, model_id: str) -> int:
        model = catalog.MODELS.get(model_id)
        checkpoint_gb = math.ceil(model.disk_bytes / 1e9) if model else 0
        return checkpoint_gb + self.swap_size_gb + DATA_DISK_FIXED_GB

    def _validate_swap(self, model_id: str) -> None:
        if self.swap_size_gb > 0:
            return
        ram = catalog.GCE_MACHINE_RAM_BYTES.get(self.machine_type)
        if ram is None:
            return
        model = catalog.MODELS.get(model_id)
        need_gib = model.weights_gib_loaded + STAGING_RAM_OVERHEAD_GIB if model else UNKNOWN_MODEL_STAGING_RAM_GIB
        if ram / catalog.GIB < need_gib:
            raise ConfigError("swapSizeGb", f"0 (no swap) on {self.machine_type} with {ram / catalog.GIB:.1f} GiB RAM: "
                              f"staging {model_id} needs about {need_gib:.1f} GiB, and the kernel kills vLLM without a "
                              "traceback", "pulumi config set gemma4-t4:swapSizeGb 16")

    def cost_per_hour_usd(self) -> float | None:
        """While running: machine, GPU, address and both disks; None if the catalog lacks a price."""
        prices = catalog.GCE_PRICES
        keys = [f"machine:{self.machine_type}", f"gpu:{self.gpu_type}", "ip:external-in-use",
                f"disk:{self.boot_disk_type}:gb-month", f"disk:{self.data_disk_type}:gb-month"]
        if any(key not in prices for key in keys):
            return None
        monthly_disks = self.boot_disk_size_gb * prices[keys[3]].usd_per_hour + self.data_disk_monthly_usd()
        hourly = (prices[keys[0]].usd_per_hour + prices[keys[1]].usd_per_hour * self.gpu_count
                  + prices[keys[2]].usd_per_hour + monthly_disks / catalog.HOURS_PER_MONTH)
        return round(hourly, 4)

    def data_disk_monthly_usd(self) -> float | None:
        price = catalog.GCE_PRICES.get(f"disk:{self.data_disk_type}:gb-month")
        return None if price is None else round(self.data_disk_size_gb * price.usd_per_hour, 2)


@dataclass
class GceT4ServerArgs:
    serving: ServingConfig
    settings: GceT4Settings
    labels: dict[str, str] = field(default_factory=dict)


class GceT4Server(pulumi.ComponentResource):
    instance_name: pulumi.Output[str]
    zone: pulumi.Output[str]
    data_disk_name: pulumi.Output[str]
    ssh_tunnel_command: pulumi.Output[str]
    cost_per_hour_usd: float | None
    data_disk_monthly_usd: float | None

    def __init__(self, name: str, args: GceT4ServerArgs, opts: pulumi.ResourceOptions | None = None):
        # Validate before registering anything: a refused config creates no resource.
        settings, serving = args.settings, args.serving
        settings.validate(serving)
        serving.validate(settings.gpu())
        user_data = render_user_data(serving.vllm_args(), GuestSettings(
            DATA_DISK_DEVICE_NAME, settings.swap_size_gb, idle_stop_minutes=settings.idle_stop_minutes,
            port=serving.port))

        super().__init__("gemma4-t4:gce:T4Server", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = {"app": "gemma4-t4", **args.labels}
        network_tag = f"{name}-iap-ssh"

        network = gcp.compute.Network(f"{name}-net", auto_create_subnetworks=False,
                                      description="gemma4-t4: private network, no ingress but IAP SSH", opts=child)
        subnet = gcp.compute.Subnetwork(f"{name}-subnet", network=network.id, region=settings.region,
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
        data_disk = gcp.compute.Disk(
            f"{name}-data",
            zone=settings.zone,
            type=settings.data_disk_type,
            size=settings.data_disk_size_gb,
            labels=labels,
            # The checkpoints, the vLLM venv and the compile cache outlive the VM: `pulumi destroy`
            # leaves this disk (and its storage bill) for the next VM unless retainDataDisk is false.
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=settings.retain_data_disk),
        )
        instance = gcp.compute.Instance(
            name,
            zone=settings.zone,
            machine_type=settings.machine_type,
            boot_disk=gcp.compute.InstanceBootDiskArgs(
                auto_delete=True,
                initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                    image=settings.image, size=settings.boot_disk_size_gb, type=settings.boot_disk_type),
            ),
            guest_accelerators=[gcp.compute.InstanceGuestAcceleratorArgs(type=settings.gpu_type, count=settings.gpu_count)],
            scheduling=settings.scheduling(),
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

        self.instance_name = instance.name
        self.zone = instance.zone
        self.data_disk_name = data_disk.name
        self.ssh_tunnel_command = pulumi.Output.concat(
            "gcloud compute ssh ", instance.name, " --zone ", instance.zone,
            f" --tunnel-through-iap -- -N -L {serving.port}:127.0.0.1:{serving.port}")
        self.cost_per_hour_usd = settings.cost_per_hour_usd()
        if self.cost_per_hour_usd is None:
            pulumi.log.warn(f"no catalog price for {settings.machine_type} + {settings.gpu_type}: cost not estimated",
                            resource=self)
        self.data_disk_monthly_usd = settings.data_disk_monthly_usd()
        self.register_outputs({
            "instance_name": self.instance_name,
            "zone": self.zone,
            "data_disk_name": self.data_disk_name,
            "ssh_tunnel_command": self.ssh_tunnel_command,
            "cost_per_hour_usd": self.cost_per_hour_usd,
        })
