"""What the component checks before anything is registered (a refused setting creates no resource): the settings,
the serving plan, what the VM must hold for the model, the apiKey secret, the fixed names and the retained data
disk to adopt."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi
from pulumi.runtime.sync_await import _sync_await

from gemma4_t4 import catalog
from gemma4_t4.errors import UNDECRYPTED_SECRET, ConfigError, Set

from ..base import provider_for
from ..config import validate
from ..serving import ServingPlan, check_serving
from .names import default_name_prefix, gce_resource_name
from .settings import GceT4ServerSettings, check_api_key
from .storage import adoptable_disk

if TYPE_CHECKING:
    from .component import GceT4ServerArgs


# Data disk beyond the checkpoint and swap: the vLLM venv, pip's cache, the compile cache.
# [gce-t4-article]: 62 GB used on /opt1 with two checkpoints (18.5 GB) and the 16 GB swapfile.
DATA_DISK_FIXED_GB = 30
# Host RAM vLLM needs beyond the weights to stage them without swap ([gce-t4-article]: the engine
# was OOM-killed at a 7.25 of 7.8 GB host peak staging 8.02 GiB of weights).
STAGING_RAM_OVERHEAD_GIB = 4.0
UNKNOWN_MODEL_STAGING_RAM_GIB = 16.0


@dataclass(frozen=True)
class CheckedServer:
    """What the refusals read before anything is registered: the settings, the serving plan, the fixed names,
    and the retained data disk to adopt (its id; None: a new disk)."""

    settings: GceT4ServerSettings
    plan: ServingPlan
    prefix: str
    vm_name: str
    disk_name: str
    adopted_disk: str | None


def check_server(name: str, args: GceT4ServerArgs, opts: pulumi.ResourceOptions | None) -> CheckedServer:
    """Everything a refusal needs, checked before anything is registered: a refused setting creates no resource."""
    settings = validate(GceT4ServerSettings, args)
    plan = check_serving(settings, catalog.GCE_ACCELERATORS.get(settings.gpu_type), settings.host, settings.port)
    check_host(settings, plan)
    check_secret_key(settings)
    # Fixed names: the next `up` after a destroy finds the retained disk under its name and adopts
    # it (an import; in the state already, the engine just updates it).
    prefix = settings.name_prefix or default_name_prefix(name)
    vm_name, disk_name = gce_resource_name(prefix, "vm"), gce_resource_name(prefix, "data")
    invoke = pulumi.InvokeOptions(provider=provider_for("gcp", opts), parent=opts.parent if opts else None)
    return CheckedServer(settings, plan, prefix, vm_name, disk_name,
                         adoptable_disk(disk_name, settings, vm_name, invoke))


def check_host(settings: GceT4ServerSettings, plan: ServingPlan) -> None:
    """What the VM must hold for this model: the data disk, and RAM (or swap) to stage the weights."""
    checkpoint_gb = math.ceil(plan.facts.checkpoint_bytes / 1e9) if plan.facts else 0
    needed = checkpoint_gb + settings.swap_size_gb + DATA_DISK_FIXED_GB
    if settings.data_disk_size_gb < needed:
        raise ConfigError("dataDiskSizeGb", f"{settings.data_disk_size_gb} GB cannot hold the model cache: "
                          f"{plan.serving.model} ({checkpoint_gb} GB) + {settings.swap_size_gb} GB swap + "
                          f"{DATA_DISK_FIXED_GB} GB for the vLLM venv and caches needs {needed} GB",
                          Set("dataDiskSizeGb", needed))
    if settings.swap_size_gb > 0:
        return
    shape = catalog.N1_SHAPES[settings.machine_type]
    ram = catalog.GCE_MACHINE_RAM_BYTES.get(settings.machine_type, int(shape.memory_gib * catalog.GIB))
    weights_gib = plan.facts.weights_bytes(settings.dtype) / catalog.GIB if plan.facts else None
    need_gib = weights_gib + STAGING_RAM_OVERHEAD_GIB if weights_gib else UNKNOWN_MODEL_STAGING_RAM_GIB
    if ram / catalog.GIB < need_gib:
        raise ConfigError("swapSizeGb", f"0 (no swap) on {settings.machine_type} with {ram / catalog.GIB:.1f} GiB RAM: "
                          f"staging {plan.serving.model} needs about {need_gib:.1f} GiB, and the kernel kills vLLM "
                          "without a traceback", Set("swapSizeGb", 16))


def check_secret_key(settings: GceT4ServerSettings) -> None:
    """apiKey as an Output (a secret, as the stack passes it): its value checked as a plain one is (settings.py),
    before anything is registered. An Output's value is read as the SDK's own synchronous invokes read theirs
    (_sync_await); one unknown at preview (another resource's output) passes, as does the offline plan's stand-in
    for ciphertext it cannot decrypt (UNDECRYPTED_SECRET); a known secret is always checked."""
    if not settings.allow_non_loopback_host or not isinstance(settings.api_key, pulumi.Output):
        return
    key = _sync_await(settings.api_key.future())
    if isinstance(key, str) and key != UNDECRYPTED_SECRET:
        check_api_key(key)


def log_shape(settings: GceT4ServerSettings, resource: pulumi.Resource) -> None:
    vcpus = catalog.N1_SHAPES[settings.machine_type].vcpus
    if settings.gpu_count > 1 and vcpus < catalog.VCPUS_PER_T4 * settings.gpu_count:
        pulumi.log.warn(f"{settings.machine_type} has {vcpus} vCPUs for {settings.gpu_count} T4s: each vLLM rank is "
                        "a process of its own, beside the API server and the engine core; the project gives each T4 "
                        f"{catalog.VCPUS_PER_T4} ({catalog.n1_standard_for(settings.gpu_count)})", resource=resource)
    elif settings.gpu_count > 1:
        pulumi.log.info(f"tensorParallelSize {settings.tensor_parallel_size}: {settings.gpu_count} T4s on "
                        f"{settings.machine_type}", resource=resource)
