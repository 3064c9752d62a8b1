"""Who may reach the VM: each operator, on this VM only, through the IAP tunnel, OS Login (no sudo) and the
stack's custom role (read, stop, start), with the IAP API the tunnel grants need."""

import hashlib
import re
from collections.abc import Sequence

import pulumi
import pulumi_gcp as gcp

from gemma4_t4 import catalog

# What an operator needs on this VM only (iap.TunnelInstanceIAMMember, compute.InstanceIAMMember): the IAP tunnel
# to it, and OS Login without sudo. roles/compute.osAdminLogin (sudo: `gemma4-t4 logs` reads the journal) is the
# user's to grant on the instance when wanted (docs/gce.md).
OPERATOR_TUNNEL_ROLE = "roles/iap.tunnelResourceAccessor"
OPERATOR_LOGIN_ROLE = "roles/compute.osLogin"


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
