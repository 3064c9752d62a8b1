"""GCE: one n1-standard-2 with one Tesla T4 serving Gemma 4 through vLLM (or, with
tensorParallelSize 2 or 4, an n1-standard-4 or -8 with that many T4s and vLLM split over them).

Resources (all children of the component): a private VPC with one subnet (or the network and
subnetwork the caller brings); for the VM's tag, a firewall rule that admits SSH from Google's IAP range and one
that denies every other source at a priority above the network's own rules (so a caller's network, the default
one included, reaches it only through IAP; with allowNonLoopbackHost, apiSourceRanges to vLLM's port too); a
pd-balanced data disk that outlives the VM; the VM itself, whose guest is set up by cloud-config (see
cloudinit/); without an external IP, Cloud NAT for its downloads; and per-instance IAM grants for the operators.

The component's constructor names its steps; each concern is a module of this folder (docs/architecture.md):
checks.py (what is refused before anything is registered), network.py, storage.py (the data disk), server.py (the
VM), access.py (the operators' grants), guards.py, cost.py and outputs.py.
"""

from collections.abc import Sequence
from typing import cast

import pulumi
import pulumi_gcp as gcp

from gemma4_t4 import catalog

from ..base import (
    CostGuard,
    MemoryPlan,
    ServingArgs,
    T4ServingComponent,
    refusals,
    type_token,
    warn_guards_off,
    with_alias,
)
from ..serving import warn_unpinned
from . import cost
from .access import grant_operators
from .checks import CheckedServer, check_server, log_shape
from .guards import cost_guards
from .guest import SERVING_METADATA_KEY
from .hf_token import let_operators_in, token_secret
from .network import subnetwork_checked, vm_network
from .outputs import connect_command, priced_per_hour
from .server import server_vm
from .settings import OnHostMaintenance, TerminationAction
from .storage import APP_LABEL, data_disk

__all__ = ["GceT4Server", "GceT4ServerArgs"]

# Before 0.3.0 the component was registered under this type; the alias keeps deployed stacks' resources.
LEGACY_TYPE = "gemma4-t4:gce:T4Server"


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
        settings = checked.settings
        labels = {"app": APP_LABEL, **settings.labels}
        subnetwork_in_region = subnetwork_checked(settings, GceT4ServerArgs.__name__)
        network = vm_network(name, settings, subnetwork_in_region, self)
        disk = data_disk(name, checked, labels, self, subnetwork_in_region)
        token = None if settings.hf_token is None else token_secret(
            name, checked.prefix, settings.project or None, settings.hf_token, labels,
            pulumi.ResourceOptions(parent=self))
        vm = server_vm(name, checked, network, disk, labels, self, token)
        grant_operators(name, settings.operators, vm, checked.prefix, pulumi.ResourceOptions(parent=self))
        if token is not None:
            let_operators_in(name, settings.operators, token, pulumi.ResourceOptions(parent=self))
        usd_per_hour = priced_per_hour(settings, self)
        self._set_outputs(checked, disk, network.nat, usd_per_hour)
        self._register_vm(checked, vm, usd_per_hour)

    def _log_plan(self, checked: CheckedServer) -> None:
        if checked.plan.memory is not None:
            pulumi.log.info(f"memory plan: {checked.plan.memory.summary()}", resource=self)
        log_shape(checked.settings, self)
        if checked.settings.allow_non_loopback_host:
            pulumi.log.warn(f"apiKey is in the VM's metadata ({SERVING_METADATA_KEY}): whoever may read the instance "
                            "(compute.instances.get: roles/compute.viewer and above, on the VM or its project) and "
                            "every process on the VM can read it (docs/gce.md)", resource=self)

    def _set_outputs(self, checked: CheckedServer, disk: gcp.compute.Disk, nat: gcp.compute.RouterNat | None,
                     usd_per_hour: float | None) -> None:
        settings, plan, serving = checked.settings, checked.plan, checked.plan.serving
        checkpoint_bytes = plan.facts.checkpoint_bytes if plan.facts else 0
        guards = cost_guards(settings, catalog.health_bound_minutes(checkpoint_bytes), usd_per_hour)
        warn_guards_off(guards, self)
        self.cost_guards = pulumi.Output.from_input(guards)
        warn_unpinned(serving, self)
        self.model_revision = pulumi.Output.from_input(serving.revision or "") if serving.from_hub else None
        self.data_disk_name = disk.name
        self.first_boot_nat_usd = pulumi.Output.from_input(cost.first_boot_nat_usd(checkpoint_bytes)) if nat else None
        self.memory_plan = pulumi.Output.from_input(cast(MemoryPlan, plan.memory.as_output())) if plan.memory else None

    def _register_vm(self, checked: CheckedServer, vm: gcp.compute.Instance, usd_per_hour: float | None) -> None:
        settings, serving = checked.settings, checked.plan.serving
        self._register_contract(
            cloud="gce",
            port=serving.port,
            served_model_name=serving.served_model_name,
            target={"instance": vm.name, "zone": vm.zone, "project": vm.project},
            connect_command=connect_command(vm, serving.port),
            cost_per_hour_usd=usd_per_hour,
            billing_after_destroy_usd_per_month=cost.billing_after_destroy_usd_per_month(settings),
        )
