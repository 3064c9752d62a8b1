"""Where the VM joins and what reaches it: a private network of the component's own (or the caller's), the firewall
for the VM's tag (IAP's SSH above a deny-all), and, without an external IP, Cloud NAT for its downloads."""

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from gemma4_t4 import catalog
from gemma4_t4.errors import PythonArgs

from ..base import InvalidOutput
from .settings import GceT4ServerSettings, subnetwork_refusal

IAP_SSH_SOURCE_RANGE = catalog.IAP_TCP_FORWARDING_RANGE
SUBNET_CIDR = "10.80.0.0/24"


@dataclass(frozen=True)
class VmNetwork:
    """Where the VM joins: its subnetwork, the tag its firewall rules target, and the Cloud NAT it waits for."""

    subnetwork: pulumi.Input[str]
    tag: str
    nat: gcp.compute.RouterNat | None


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


def subnetwork_checked(settings: GceT4ServerSettings, args_name: str) -> pulumi.Output[list[pulumi.Resource]] | None:
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
            raise InvalidOutput(refusal.for_front_end(PythonArgs(args_name)))
        return []

    return subnetwork.apply(check)


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


def vm_network(name: str, settings: GceT4ServerSettings,
               subnetwork_in_region: pulumi.Output[list[pulumi.Resource]] | None, parent: pulumi.Resource) -> VmNetwork:
    """The VM's network, the firewall for its tag, and (without an external IP) its Cloud NAT, whose router waits
    for SUBNETWORK_IN_REGION (subnetwork_checked)."""
    child = pulumi.ResourceOptions(parent=parent)
    network_id, subnet_id = private_network(name, settings, parent)
    tag = f"{name}-iap-ssh"
    firewall(name, settings, network_id, tag, child)
    nat_opts = pulumi.ResourceOptions(parent=parent, depends_on=subnetwork_in_region)
    return VmNetwork(subnet_id, tag, cloud_nat(name, settings, network_id, subnet_id, nat_opts))
