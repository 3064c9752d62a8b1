"""The VM itself: its boot disk, its T4s, the data disk, the network it joins, and the metadata its guest is set up
(cloud-config, cloudinit/) and serves by."""

import pulumi
import pulumi_gcp as gcp

from ..serving import ServingPlan
from .checks import CheckedServer
from .guards import scheduling
from .guest import SERVING_METADATA_KEY, GuestSettings, bootstrap_script, render_serving_env, render_user_data
from .hf_token import TokenAccess
from .network import VmNetwork
from .settings import GceT4ServerSettings
from .storage import DATA_DISK_DEVICE_NAME


def guest_user_data(settings: GceT4ServerSettings) -> str:
    """The cloud-config that sets the guest up (cloudinit/): the data disk, swap, the idle stop and vLLM."""
    return render_user_data(GuestSettings(
        DATA_DISK_DEVICE_NAME, settings.swap_size_gb, idle_stop_minutes=settings.idle_stop_minutes,
        vllm_version=settings.vllm_version))


def serving_values(plan: ServingPlan, api_key: pulumi.Input[str] | None,
                   hf_token_secret: pulumi.Input[str] | None = None) -> pulumi.Input[str]:
    """The metadata value the guest starts vLLM with (and restarts it on when it changes); with hfToken, the name
    of the secret that holds it (never the token)."""
    serving = plan.serving
    checkpoint_bytes = plan.facts.checkpoint_bytes if plan.facts else 0

    def render(key: str | None, secret_name: str | None) -> str:
        return render_serving_env(serving.vllm_args(), serving.port, checkpoint_bytes, api_key=key,
                                  hf_token_secret=secret_name)

    if api_key is None and hf_token_secret is None:
        return render(None, None)
    values = pulumi.Output.all(api_key, hf_token_secret).apply(lambda both: render(both[0], both[1]))
    # With a key, a secret: the whole value is kept encrypted in the state, and the guest writes it to a file only
    # root reads (systemd hands it to vLLM as VLLM_API_KEY, out of its command line).
    return pulumi.Output.secret(values) if api_key is not None else values


def server_vm(name: str, checked: CheckedServer, network: VmNetwork, disk: gcp.compute.Disk,
              labels: dict[str, str], parent: pulumi.Resource, token: TokenAccess | None) -> gcp.compute.Instance:
    """The VM: its boot disk, its T4s, the data disk, the network it joins and its guest's metadata; with hfToken,
    the service account that may read it."""
    settings = checked.settings
    user_data = guest_user_data(settings)
    return gcp.compute.Instance(
        name,
        name=checked.vm_name,
        zone=settings.zone,
        project=settings.project or None,
        machine_type=settings.machine_type,
        boot_disk=gcp.compute.InstanceBootDiskArgs(
            auto_delete=True,
            initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                image=settings.boot_image, size=settings.boot_disk_size_gb, type=settings.boot_disk_type),
        ),
        guest_accelerators=[gcp.compute.InstanceGuestAcceleratorArgs(type=settings.gpu_type,
                                                                     count=settings.gpu_count)],
        scheduling=scheduling(settings),
        attached_disks=[gcp.compute.InstanceAttachedDiskArgs(source=disk.self_link,
                                                             device_name=DATA_DISK_DEVICE_NAME)],
        network_interfaces=[gcp.compute.InstanceNetworkInterfaceArgs(
            subnetwork=network.subnetwork,
            # An ephemeral public address for egress only (apt, PyPI, Hugging Face): the firewall denies every
            # source but IAP's SSH. Without one, Cloud NAT (or the caller's network) carries the downloads.
            access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()] if settings.external_ip
            else [],
        )],
        # Updated in place (setMetadata): the serving values, which the guest watches and restarts vLLM
        # with, and guest attributes on, for the boot's progress (the gemma4-t4/ namespace).
        metadata={"user-data": user_data,
                  SERVING_METADATA_KEY: serving_values(checked.plan, settings.api_key,
                                                       token.secret_name if token else None),
                  "enable-oslogin": "TRUE", "enable-guest-attributes": "TRUE"},
        # Without hfToken, no account: the guest calls no Google API. Set or changed with the VM stopped
        # (allow_stopping_for_update), not replaced.
        service_account=token.service_account if token else None,
        # The provider replaces the VM when this changes (ForceNew): it is the same for every setting and release
        # (cloudinit/bootstrap.sh). The user-data above is applied on the running VM when it changes
        # (cloudinit/scripts/guest_bundle.py): only a new machine (zone, image, machine, GPUs) replaces the VM.
        metadata_startup_script=bootstrap_script(),
        # The open DKMS module is unsigned: Secure Boot would refuse to load it.
        shielded_instance_config=gcp.compute.InstanceShieldedInstanceConfigArgs(
            enable_secure_boot=False, enable_vtpm=True, enable_integrity_monitoring=True),
        tags=[network.tag],
        labels=labels,
        allow_stopping_for_update=True,
        # The data disk attaches to one VM at a time: a replaced VM goes before its successor comes.
        opts=pulumi.ResourceOptions(parent=parent, delete_before_replace=True,
                                    depends_on=[network.nat] if network.nat else None),
    )
