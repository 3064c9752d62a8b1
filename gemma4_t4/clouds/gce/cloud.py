"""GCE: the gce-t4 stack builds GceT4Server; its server is the VM's loopback vLLM, through an IAP tunnel."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ... import catalog
from ...checks import Check
from ...components.config import GceT4ServerSettings, gce_name
from ...components.gce import cost
from ...components.gce import provider_answers as answers
from ...core.capacity import RegionsReport
from ...core.cost import CostEstimate, CostItem
from ...core.deploy import Attempt
from ...core.failures import Failure
from ...core.lifecycle import total_usd_per_month
from ...core.mock_answers import Invoke, StateStandIn
from ...core.offers import Offer
from ...core.plan import Plan
from ...core.preflight import Needs
from ...core.targets import Target
from ...errors import PROJECT, ConfigError, Set, Unset
from ..base import Cloud, Feature, Move, Place, Placement, refuse_unknown_provider_keys
from . import capacity, failures, lifecycle, preflight, up
from .preflight import GceNeeds
from .target import GceTarget

if TYPE_CHECKING:
    from .standins import GceWorld as World

INSTANCE = "gcp:compute/instance:Instance"
DISK = "gcp:compute/disk:Disk"
def refuse_other_place(config: Mapping[str, Any]) -> None:
    """gcp:zone and gcp:region, the provider's defaults for a resource that names none, where they disagree with
    gemma4-t4:zone. Refused rather than honoured: every resource of the stack names its zone or region (from
    gemma4-t4:zone, which Pulumi.yaml's default always sets, so "unset" cannot be told from the default), the
    zone is checked against the T4 zones and the retained data disk is found by it; one key decides the place."""
    zone = str(config.get(f"{PROJECT}:zone") or "").strip()
    region = catalog.region_of(zone) if zone else ""
    for key, wanted in (("gcp:zone", zone), ("gcp:region", region)):
        given = str(config.get(key) or "").strip()
        if not given or not wanted or given == wanted:
            continue
        t4_zones = sorted(z for z in catalog.GCE_T4_ZONES if z == given or catalog.region_of(z) == given)
        move = (" && ", Set("zone", t4_zones[0])) if t4_zones else ()
        raise ConfigError(key, f"is {given}, and this stack puts every resource in {PROJECT}:zone {zone} "
                          f"(region {region}): the provider's default {key.split(':')[1]} is used by none of them",
                          (Unset(key), *move, " (the stack's place is gemma4-t4:zone alone)"))


class Gce(Cloud):
    name = "gce"
    component = "gemma4_t4.components.gce:GceT4Server"
    settings = GceT4ServerSettings
    stack = "gce-t4"
    preset: ClassVar[Mapping[str, Any]] = {}
    vm_names: ClassVar[Mapping[str, str]] = {"instance": "the VM's name", "zone": "the VM's zone",
                                             "project": "the VM's GCP project"}
    offers_note = (f"GCE: machine and GPU only, from {catalog.GCE_PRICE_LIST}; the disks and the address come on top "
                   "(`gemma4-t4 cost STACK`)")
    unsupported: ClassVar[Mapping[Feature, str]] = {
        Feature.NAMED_ENDPOINT: "a GCE server is reached through its stack (--stack) or a URL (--url)",
        Feature.REGION_CHOICE: "three calls cover every region: nothing to choose",
    }
    replaced_by: ClassVar[Mapping[str, tuple[tuple[str, ...], str]]] = {
        "gcp:compute/instance:Instance": (catalog.GCE_INSTANCE_FORCE_NEW, (
            "the VM is deleted and created again: a first boot of ~{}-{} min before it serves, and in a zone out "
            "of T4s at that moment no VM comes back").format(
                *(seconds // 60 for seconds in catalog.GCE_FIRST_BOOT_S))),
        "gcp:compute/disk:Disk": (catalog.GCE_DISK_FORCE_NEW, (
            "a new data disk: the model and the venv are downloaded again; with retainDataDisk the old disk stays in "
            "the project (and bills) until you delete it, without it it is deleted with what it holds")),
    }
    counterparts: ClassVar[Mapping[str, str]] = {
        "endpointTtl": "maxRunHours (GCE stops the VM) or idleStopMinutes",
        "instanceType": "machineType",
        **{key: "nothing: a GCE stack is one VM (docs: \"Scaling the GCE stack out\")"
           for key in ("minInstanceCount", "maxInstanceCount", "scalingMetric", "scalingTarget")},
    }

    def name_prefix(self, project: str, stack: str) -> str:
        # PROJECT-STACK: the VM's and the data disk's names since the first release, so a deployed
        # stack keeps both (and finds its retained disk again).
        return gce_name(f"{project}-{stack}")

    def provider_args(self, config: Mapping[str, Any]) -> dict[str, Any]:
        refuse_unknown_provider_keys(config, "gcp", catalog.PULUMI_GCP_CONFIG_KEYS, "GCP")
        refuse_other_place(config)
        return {}

    def mock_invokes(self, world: World | None) -> dict[str, Invoke]:
        from .standins import GceWorld as World

        return {answers.GET_DISK: (world or World()).get_disk}

    def mock_states(self) -> dict[str, StateStandIn]:
        from .standins import gcp_state

        return {"gcp": gcp_state}

    def target(self, stack: str, outputs: Mapping[str, Any], endpoint_url: str | None = None) -> Target:
        target, port = outputs["target"], int(outputs["port"])
        return GceTarget(f"http://127.0.0.1:{port}", label=f"gce:{target['instance']}", instance=target["instance"],
                         zone=target["zone"], project=target["project"], port=port)

    def vm(self, stack: str, outputs: Mapping[str, Any], api_endpoint: str | None = None) -> lifecycle.GceMachine:
        return self.named_vm(outputs["target"], api_endpoint)

    def named_vm(self, names: Mapping[str, str], api_endpoint: str | None = None) -> lifecycle.GceMachine:
        return lifecycle.GceMachine(lifecycle.Vm(names["project"], names["zone"], names["instance"]), api_endpoint)

    def watch(self, target: Target, compute_endpoint: str | None = None) -> None:
        assert isinstance(target, GceTarget), "a GCE stack's target is a GceTarget"
        vm = lifecycle.Vm(target.project, target.zone, target.instance)
        target.watch = lifecycle.VmWatch(vm, lambda: lifecycle.Compute(compute_endpoint))

    def explain(self, err: BaseException) -> Failure | None:
        return failures.explain(err)

    def is_spot(self, plan: Plan) -> bool:
        """A VM scheduled as one (scheduling.provisioningModel SPOT)."""
        return any((vm.inputs.get("scheduling") or {}).get("provisioningModel") == "SPOT" for vm in plan.find(INSTANCE))

    def user_data(self, plan: Plan) -> str | None:
        """The cloud-config in the VM's metadata (its user-data key)."""
        return next((vm.inputs["metadata"]["user-data"] for vm in plan.find(INSTANCE)
                     if isinstance(vm.inputs.get("metadata"), dict) and "user-data" in vm.inputs["metadata"]), None)

    def needs(self, plan: Plan, config: Mapping[str, Any]) -> Needs[GceNeeds]:
        vm = plan.one(INSTANCE).inputs
        accelerator = vm["guestAccelerators"][0]
        return Needs(self.name, vm["zone"].rsplit("-", 1)[0],
                     GceNeeds(vm["zone"], accelerator["type"], int(accelerator["count"])))

    def preflight(self, stack: str, config: Mapping[str, Any], needs: Needs[GceNeeds], place: Place) -> list[Check]:
        own = needs.own
        region_doc, project_doc, offering = preflight.fetch_gce(
            preflight.gcp_project(config, place.project), needs.region, own.accelerator)
        return preflight.gce_checks(needs.region, own.zone, own.accelerator, own.gpus, region_doc, project_doc,
                                    offering)

    def regions(self, stack: str, config: Mapping[str, Any], needs: Needs[GceNeeds], place: Place) -> RegionsReport:
        regions, project_doc, offers = capacity.fetch_gce_regions(preflight.gcp_project(config, place.project),
                                                                   needs.own.accelerator)
        return capacity.gce_regions(needs, regions, project_doc, offers)

    def offers(self) -> list[Offer]:
        return capacity.t4_offers()

    def cost(self, plan: Plan, estimate: CostEstimate) -> None:
        for vm in plan.find(INSTANCE):
            boot = vm.inputs.get("bootDisk", {}).get("initializeParams", {})
            estimate.disks.append(lifecycle.disk_bill(f"{vm.name} (boot)", boot["type"], int(boot["size"]),
                                                      vm.inputs["zone"]))
        estimate.disks += [lifecycle.disk_bill(d.name, d.inputs["type"], int(d.inputs["size"]), d.inputs["zone"])
                           for d in plan.find(DISK)]
        if (nat_usd := plan.outputs.get("first_boot_nat_usd")) is not None:
            estimate.extras.append(CostItem("Cloud NAT processing of the first boot's downloads", nat_usd,
                                            "first boot", cost.first_boot_nat_basis()))
            estimate.notes.append(
                "Cloud NAT: serving includes its gateway and address; while the VM is stopped, the address the "
                f"gateway allocated may still bill ({cost.nat_address_while_stopped()}) until Cloud NAT "
                "releases it; `pulumi destroy` deletes the gateway")
        estimate.stoppable = True
        estimate.stopped_usd_per_month = total_usd_per_month(estimate.disks)
        if estimate.running_usd_per_hour is None:
            self._cost_floor(plan, estimate)
        if self.is_spot(plan):
            estimate.notes.append("a Spot VM: machine and GPU at the Spot list prices (GCE may preempt it at any "
                                  "time; the disks and the address bill at the usual prices)")
        estimate.notes.append("`gemma4-t4 stop --stack STACK` ends the machine and GPU bills and keeps both disks; "
                              "`pulumi destroy` deletes the VM and its boot disk (after_destroy: what still bills)")

    def _cost_floor(self, plan: Plan, estimate: CostEstimate) -> None:
        """The serving hour's parts the catalog prices where it lacks one: machine and GPUs (as `zones` and `start`
        price them), and the items it has no price for."""
        vm = plan.one(INSTANCE).inputs
        region, spot = catalog.region_of(vm["zone"]), self.is_spot(plan)
        gpus = [(a["type"], int(a["count"])) for a in vm.get("guestAccelerators") or []]
        items = cost.running_items(vm["machineType"], [kind for kind, _ in gpus], spot,
                                   [d.type for d in estimate.disks])
        estimate.unpriced = [f"{item} in {region}" for item in cost.missing_prices(region, items)]
        estimate.running_usd_per_hour_at_least = cost.machine_and_gpus_usd_per_hour(
            vm["machineType"], gpus, spot, region)
        if estimate.running_usd_per_hour_at_least is not None:
            estimate.at_least_covers = "machine and GPUs; the VM's address or Cloud NAT is not counted"

    def user_config(self, config: Mapping[str, Any]) -> dict[str, str]:
        return up.user_config(config)

    def place(self, config: Mapping[str, Any], needs: Needs[GceNeeds], choose: bool, endpoint: str | None) -> Placement:
        return up.place(config, needs, choose, endpoint)

    def spot_offer(self, config: Mapping[str, Any]) -> str:
        return up.spot_offer(str(config.get(f"{PROJECT}:zone", "")))

    def recover(self, attempt: Attempt, config: Mapping[str, Any], placement: Placement, tried: list[str],
                endpoint: str | None) -> Move | None:
        return up.recover(attempt, config, placement, tried, endpoint)

    def after_down(self, outputs: Mapping[str, Any], delete_data: bool, endpoint: str | None) -> list[str]:
        return up.after_down(outputs, delete_data, endpoint)


GCE = Gce()
