"""GCE: the gce-t4 stack builds GceT4Server; its server is the VM's loopback vLLM, through an IAP tunnel."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .. import catalog
from ..components import provider_answers as answers
from ..components.config import GceT4ServerSettings, gce_name
from ..core import capacity, lifecycle, preflight
from ..core.capacity import RegionsReport
from ..core.cost import CostEstimate, CostItem
from ..core.plan import MOCK_GCP_PROJECT, Invoke, Plan, ProviderInvokeError
from ..core.preflight import Check, Needs
from ..core.targets import GceTarget, Target
from .base import Cloud, Place

INSTANCE = "gcp:compute/instance:Instance"
DISK = "gcp:compute/disk:Disk"
# A disk attached now was attached at some time: RFC3339 as the Compute API writes its timestamps.
ATTACHED_AT = "2030-01-01T00:00:00.000-08:00"


@dataclass
class World:
    """What exists in GCE before the program runs, as the provider's invokes read it.
    disks: name -> {"zone", "sizeGb", "type", "users": [instance self links], "labels", "lastAttachTimestamp"}
    (the last: when a VM last attached it; default: a time if it has users now, else "" for never attached);
    forbidden: the deploying account may not read disks (compute.disks.get)."""

    disks: dict[str, dict[str, Any]] = field(default_factory=dict)
    forbidden: bool = False

    def get_disk(self, args: Mapping[str, Any]) -> dict[str, Any]:
        name, zone = args["name"], str(args.get("zone") or "")
        project = args.get("project") or MOCK_GCP_PROJECT
        if self.forbidden:
            # source: answers.disk_forbidden (resource_compute_disk.go:1311 -> transport.go:279-280, googleapi's
            # 403 text from hashicorp/packer#12159), through the bridge and the engine (answers.engine_failure).
            raise ProviderInvokeError(answers.engine_failure(answers.GET_DISK,
                                                             answers.disk_forbidden(project, zone, name)))
        disk = self.disks.get(name)
        if disk is None or (zone and disk["zone"] != zone):
            # source: answers.disk_not_found (terraform-provider-google data_source_google_compute_disk.go:58-59
            # at e03b7622: "<id> not found"), through the bridge and the engine (answers.engine_failure).
            raise ProviderInvokeError(answers.engine_failure(answers.GET_DISK,
                                                             answers.disk_not_found(project, zone, name)))
        link = f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{disk['zone']}"
        # source: the data source's schema is google_compute_disk's (data_source_google_compute_disk.go:30,
        # DatasourceSchemaFromResourceSchema): id, name, zone, project, size, type (a self link), users, labels,
        # and the attach timestamps ("" for a disk never attached: see answers.disk_never_attached).
        users = list(disk.get("users", []))
        return {"id": answers.disk_id(project, disk["zone"], name), "name": name,
                "zone": disk["zone"], "project": project, "size": float(disk["sizeGb"]),
                "type": f"{link}/diskTypes/{disk['type']}", "users": users,
                "selfLink": f"{link}/disks/{name}", "labels": disk.get("labels", {}),
                "lastAttachTimestamp": disk.get("lastAttachTimestamp", ATTACHED_AT if users else ""),
                "lastDetachTimestamp": disk.get("lastDetachTimestamp", "")}


class Gce(Cloud):
    name = "gce"
    title = "Google Compute Engine: an N1 VM with T4s"
    component = "gemma4_t4.components.gce:GceT4Server"
    args_type = "GceT4ServerArgs"
    settings = GceT4ServerSettings
    stack = "gce-t4"
    preset: ClassVar[Mapping[str, Any]] = {}
    every_region_at_once = True  # three calls cover every region: nothing to choose
    counterparts: ClassVar[Mapping[str, str]] = {
        "endpointTtl": "maxRunHours (GCE stops the VM) or idleStopMinutes",
        "instanceType": "machineType",
        "hfToken": "nothing: the GCE guest passes no token to vLLM (a token in instance metadata is readable by "
                   "anyone who may view the VM), and Gemma 4 is not gated",
        **{key: "nothing: a GCE stack is one VM (docs: \"Scaling the GCE stack out\")"
           for key in ("minInstanceCount", "maxInstanceCount", "scalingMetric", "scalingTarget")},
    }

    def name_prefix(self, project: str, stack: str) -> str:
        # PROJECT-STACK: the VM's and the data disk's names since the first release, so a deployed
        # stack keeps both (and finds its retained disk again).
        return gce_name(f"{project}-{stack}")

    def mock_invokes(self, world: World | None) -> dict[str, Invoke]:
        return {answers.GET_DISK: (world or World()).get_disk}

    def target(self, stack: str, outputs: Mapping[str, Any]) -> Target:
        target, port = outputs["target"], int(outputs["port"])
        return GceTarget(f"http://127.0.0.1:{port}", label=f"gce:{target['instance']}", instance=target["instance"],
                         zone=target["zone"], project=target["project"], port=port)

    def vm(self, stack: str, outputs: Mapping[str, Any]) -> lifecycle.Vm:
        target = outputs["target"]
        return lifecycle.Vm(target["project"], target["zone"], target["instance"])

    def needs(self, plan: Plan, config: Mapping[str, Any]) -> Needs:
        vm = plan.one(INSTANCE).inputs
        accelerator = vm["guestAccelerators"][0]
        return Needs(self.name, vm["zone"].rsplit("-", 1)[0], zone=vm["zone"], accelerator=accelerator["type"],
                     gpus=int(accelerator["count"]))

    def preflight(self, stack: str, config: Mapping[str, Any], needs: Needs, place: Place) -> list[Check]:
        region_doc, project_doc, offering = preflight.fetch_gce(
            preflight.gcp_project(config, place.project), needs.region, needs.accelerator)
        return preflight.gce_checks(needs.region, needs.zone, needs.accelerator, needs.gpus, region_doc,
                                    project_doc, offering)

    def regions(self, stack: str, config: Mapping[str, Any], needs: Needs, place: Place) -> RegionsReport:
        regions, project_doc, offers = capacity.fetch_gce_regions(preflight.gcp_project(config, place.project),
                                                                   needs.accelerator)
        return capacity.gce_regions(needs, regions, project_doc, offers)

    def cost(self, plan: Plan, estimate: CostEstimate) -> None:
        for vm in plan.find(INSTANCE):
            boot = vm.inputs.get("bootDisk", {}).get("initializeParams", {})
            estimate.disks.append(lifecycle.disk_bill(f"{vm.name} (boot)", boot["type"], int(boot["size"]),
                                                      vm.inputs["zone"]))
        estimate.disks += [lifecycle.disk_bill(d.name, d.inputs["type"], int(d.inputs["size"]), d.inputs["zone"])
                           for d in plan.find(DISK)]
        if (nat_usd := plan.outputs.get("first_boot_nat_usd")) is not None:
            price = catalog.CLOUD_NAT_PRICES["nat:gib-processed"]
            estimate.extras.append(CostItem(
                "Cloud NAT processing of the first boot's downloads", nat_usd, "first boot",
                f"the model's checkpoint and the vLLM environment (~{catalog.FIRST_BOOT_VLLM_ENV_BYTES / 1e9:g} GB, "
                f"catalog.FIRST_BOOT_VLLM_ENV_BYTES; the driver's packages not counted) x "
                f"${price.usd_per_hour}/GiB: {price.source}"))
            address = catalog.CLOUD_NAT_PRICES["nat:ip-hour"]
            estimate.notes.append(
                f"Cloud NAT: serving includes its gateway and address; while the VM is stopped, the address the "
                f"gateway allocated may still bill (${address.usd_per_hour}/h, "
                f"${address.usd_per_hour * catalog.HOURS_PER_MONTH:.2f}/month, not in `stopped`) until Cloud NAT "
                "releases it; `pulumi destroy` deletes the gateway")
        estimate.stoppable = True
        estimate.stopped_usd_per_month = lifecycle.total_usd_per_month(estimate.disks)
        estimate.notes.append("`gemma4-t4 stop --stack STACK` ends the machine and GPU bills and keeps both disks; "
                              "`pulumi destroy` deletes the VM and its boot disk (after_destroy: what still bills)")


GCE = Gce()
