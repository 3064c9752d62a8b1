"""GCE's stand-ins for the offline plan and the program's unit tests: what the GCP provider answers to a
create (its computed outputs, for core.mock_answers.mock_state) and to the functions the component calls
(GceWorld: what exists before the program runs), each answer with its source beside it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...components.gce import provider_answers as answers
from ...components.provider_answers import engine_failure
from ...core.mock_answers import ProviderInvokeError, physical_name

MOCK_GCP_PROJECT = "mock-project"


def gcp_project() -> str:
    """The project the default GCP provider makes resources in: the program's gcp:project (mocks: else one)."""
    import pulumi

    return pulumi.Config("gcp").get("project") or MOCK_GCP_PROJECT


def explicit_gcp_project(provider_inputs: Mapping[str, Any]) -> str:
    """The project an explicit gcp.Provider makes resources in: its project input (source: pulumi_gcp 10.2.0
    provider.py:578, the Provider fills a missing one from GOOGLE_PROJECT, GOOGLE_CLOUD_PROJECT, GCLOUD_PROJECT or
    CLOUDSDK_CORE_PROJECT), never the stack's gcp:project, which only the default provider reads (mocks: else one)."""
    return str(provider_inputs.get("project") or MOCK_GCP_PROJECT)


# GCP resources whose provider answers no selfLink (pulumi_gcp 10.2.0: compute/router_nat.py and the IAM members'
# modules declare no `self_link` output; compute/router.py, firewall.py, subnetwork.py do).
GCP_WITHOUT_SELF_LINK = frozenset({"routernat", "instanceiammember", "tunnelinstanceiammember"})


def _outside_compute(typ: str, inputs: dict[str, Any], project: str) -> tuple[str, dict[str, Any]] | None:
    """The resources of other APIs the GCE component makes, as pulumi_gcp 10.2.0 answers a create; None: Compute's."""
    if typ == "gcp:projects/service:Service":
        # projects/service.py: no computed output the program reads; the id is PROJECT/SERVICE
        # (terraform-provider-google resource_google_project_service.go: d.SetId(projectServiceId)).
        return f"{project}/{inputs['service']}", {**inputs, "project": project}
    if typ == "gcp:secretmanager/secret:Secret":
        # secretmanager/secret.py: name "The resource name of the Secret. Format: projects/{{project}}/secrets/
        # {{secret_id}}"; the id is the same path.
        name = f"projects/{project}/secrets/{inputs['secretId']}"
        return name, {**inputs, "project": project, "name": name}
    if typ == "gcp:secretmanager/secretVersion:SecretVersion":
        # secretmanager/secret_version.py: name "projects/{{project}}/secrets/{{secret_id}}/versions/{{version}}";
        # the first version of a secret is 1.
        name = f"{inputs['secret']}/versions/1"
        return name, {**inputs, "name": name, "version": "1", "enabled": True}
    if typ == "gcp:serviceaccount/account:Account":
        # serviceaccount/account.py: email, member "serviceAccount:{email}", name (fully qualified); the email is
        # SA_NAME@PROJECT_ID.iam.gserviceaccount.com (IAM docs, "Service account overview").
        email = f"{inputs['accountId']}@{project}.iam.gserviceaccount.com"
        name = f"projects/{project}/serviceAccounts/{email}"
        return name, {**inputs, "project": project, "email": email, "member": f"serviceAccount:{email}", "name": name}
    if typ == "gcp:serviceaccount/iAMMember:IAMMember":
        # serviceaccount/iam_member.py: no computed output the program reads; the id is ACCOUNT/ROLE/MEMBER.
        return f"{inputs['serviceAccountId']}/{inputs['role']}/{inputs['member']}", {**inputs}
    if typ == "gcp:secretmanager/secretIamMember:SecretIamMember":
        # secretmanager/secret_iam_member.py: no computed output the program reads; the id is SECRET/ROLE/MEMBER.
        return f"{inputs['secretId']}/{inputs['role']}/{inputs['member']}", {**inputs, "project": project}
    return None


def gcp_state(typ: str, logical: str, inputs: dict[str, Any], suffix: str,
              provider_project: str | None = None) -> tuple[str, dict[str, Any]]:
    """A GCP resource as its provider answers a create: its id (the API's resource path), selfLink, project (its
    own, else PROVIDER_PROJECT where an explicit provider makes it, else the default provider's)."""
    project = inputs.get("project") or provider_project or gcp_project()
    outside = _outside_compute(typ, inputs, project)
    if outside is not None:
        return outside
    physical = physical_name(logical, inputs, suffix)
    kind = typ.rsplit(":", 1)[-1].lower()
    if kind == "iamcustomrole":
        # pulumi_gcp 10.2.0 projects/iam_custom_role.py: `name`, "The name of the role in the format
        # `projects/{{project}}/roles/{{role_id}}`. Like `id`, this field can be used as a reference in ... IAM role
        # bindings"; the module declares no self_link.
        role = f"projects/{project}/roles/{inputs['roleId']}"
        return role, {**inputs, "project": project, "name": role, "deleted": False}
    where = (f"zones/{inputs['zone']}" if "zone" in inputs else f"regions/{inputs['region']}" if "region" in inputs
             else "global")
    resource_id = f"projects/{project}/{where}/{kind}s/{physical}"
    computed: dict[str, Any] = {}
    if kind not in GCP_WITHOUT_SELF_LINK:
        computed["selfLink"] = f"https://www.googleapis.com/compute/v1/{resource_id}"
    computed["project"] = project  # the resource's, else the provider's gcp:project
    return resource_id, {**computed, **inputs, "name": physical}


# A disk attached now was attached at some time: RFC3339 as the Compute API writes its timestamps.
ATTACHED_AT = "2030-01-01T00:00:00.000-08:00"


@dataclass
class GceWorld:
    """What exists in GCE before the program runs, as the provider's invokes read it.
    disks: name -> {"zone", "sizeGb", "type", "users": [instance self links], "labels", "lastAttachTimestamp"}
    (the last: when a VM last attached it; default: a time if it has users now, else "" for never attached);
    forbidden: the deploying account may not read disks (compute.disks.get)."""

    disks: dict[str, dict[str, Any]] = field(default_factory=dict)
    forbidden: bool = False

    def get_disk(self, args: Mapping[str, Any]) -> dict[str, Any]:
        name, zone = args["name"], str(args.get("zone") or "")
        project = args.get("project") or gcp_project()
        if self.forbidden:
            # source: answers.disk_forbidden (resource_compute_disk.go:1311 -> transport.go:279-280, googleapi's
            # 403 text from hashicorp/packer#12159), through the bridge and the engine (engine_failure).
            raise ProviderInvokeError(engine_failure(answers.GET_DISK,
                                                             answers.disk_forbidden(project, zone, name)))
        disk = self.disks.get(name)
        if disk is None or (zone and disk["zone"] != zone):
            # source: answers.disk_not_found (terraform-provider-google data_source_google_compute_disk.go:58-59
            # at e03b7622: "<id> not found"), through the bridge and the engine (engine_failure).
            raise ProviderInvokeError(engine_failure(answers.GET_DISK,
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
