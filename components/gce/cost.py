"""What a GCE stack costs, in one place: the component's outputs (cost_per_hour_usd, the cost guards, the bill after
destroy, the first boot's Cloud NAT), the offline plan's `cost` (the disks, NAT, the floor where a price is
missing), `stop`/`start` and `zones` all price through these functions, at the catalog's list prices.

Plain values and the catalog only, no Pulumi: the operator tools import it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from gemma4_t4 import catalog

if TYPE_CHECKING:
    from .settings import GceT4ServerSettings

T4_GPU = "nvidia-tesla-t4"


def prices_in(region: str) -> Mapping[str, catalog.Price]:
    """The catalog's list prices in REGION (empty where it has none)."""
    return catalog.GCE_PRICES.get(region, {})


def disk_item(disk_type: str) -> str:
    return f"disk:{disk_type}:gb-month"


def missing_prices(region: str, items: Iterable[str]) -> list[str]:
    """The ITEMS the catalog has no price for in REGION, each once, in their order."""
    prices = prices_in(region)
    return [item for item in dict.fromkeys(items) if item not in prices]


def running_items(machine_type: str, gpu_types: Iterable[str], spot: bool, disk_types: Iterable[str]) -> list[str]:
    """The catalog items a VM bills while running, without its way out: machine, GPUs (a Spot VM: their Spot
    prices) and disks."""
    billed = catalog.spot_item if spot else str
    return [billed(f"machine:{machine_type}"), *(billed(f"gpu:{kind}") for kind in gpu_types),
            *(disk_item(kind) for kind in disk_types)]


def billed_items(settings: GceT4ServerSettings) -> list[str]:
    """The catalog items the VM bills while running: machine, GPU (a Spot VM: their Spot prices), address,
    boot and data disk."""
    billed = catalog.spot_item if settings.spot else str
    return [billed(f"machine:{settings.machine_type}"), billed(f"gpu:{settings.gpu_type}"), "ip:external-in-use",
            disk_item(settings.boot_disk_type), disk_item(settings.data_disk_type)]


def _machine_and_gpus(prices: Mapping[str, catalog.Price], machine_type: str, gpus: Iterable[tuple[str, int]],
                      spot: bool) -> float | None:
    billed = catalog.spot_item if spot else str
    keys = [(billed(f"machine:{machine_type}"), 1), *((billed(f"gpu:{kind}"), count) for kind, count in gpus)]
    found = [(prices.get(key), count) for key, count in keys]
    if any(price is None for price, _ in found):
        return None
    return sum(price.usd_per_hour * count for price, count in found if price is not None)


def machine_and_gpus_usd_per_hour(machine_type: str, gpus: Iterable[tuple[str, int]], spot: bool, region: str,
                                  digits: int = 4) -> float | None:
    """MACHINE_TYPE with GPUS ([(accelerator type, count)]) in REGION at catalog list prices (Spot's where SPOT);
    None if the catalog lacks one."""
    hourly = _machine_and_gpus(prices_in(region), machine_type, gpus, spot)
    return None if hourly is None else round(hourly, digits)


def t4_offer_usd_per_hour(region: str, spot: bool) -> float | None:
    """What `zones` lists: the smallest N1 with one T4, machine and GPU."""
    return machine_and_gpus_usd_per_hour(catalog.n1_standard_for(1), [(T4_GPU, 1)], spot, region, digits=5)


def egress_usd_per_hour(settings: GceT4ServerSettings, external_ip: float) -> float:
    """The VM's way out: its external address, or the component's Cloud NAT (one VM on the gateway, and the
    address the gateway allocates); 0 where a caller's network carries it (billed to that network)."""
    if settings.external_ip:
        return external_ip
    if settings.network is None or settings.cloud_nat:
        nat = catalog.CLOUD_NAT_PRICES
        return nat["nat:vm-hour"].usd_per_hour + nat["nat:ip-hour"].usd_per_hour
    return 0.0


def cost_per_hour_usd(settings: GceT4ServerSettings) -> float | None:
    """While running: machine, GPU, address and both disks, at the region's list prices (a Spot VM: its machine
    and GPUs at the Spot prices); None if the catalog lacks one of them."""
    prices = prices_in(settings.region)
    keys = billed_items(settings)
    machine_and_gpus = _machine_and_gpus(prices, settings.machine_type, [(settings.gpu_type, settings.gpu_count)],
                                         settings.spot)
    if machine_and_gpus is None or any(key not in prices for key in keys):
        return None
    monthly_disks = (settings.boot_disk_size_gb * prices[keys[3]].usd_per_hour
                     + settings.data_disk_size_gb * prices[keys[4]].usd_per_hour)
    hourly = (machine_and_gpus + egress_usd_per_hour(settings, prices[keys[2]].usd_per_hour)
              + monthly_disks / catalog.HOURS_PER_MONTH)
    return round(hourly, 4)


def disk_usd_per_month(region: str, disk_type: str, size_gb: int) -> float | None:
    """A disk's monthly bill at the region's list price; None where the catalog has none."""
    price = prices_in(region).get(disk_item(disk_type))
    return None if price is None else round(size_gb * price.usd_per_hour, 2)


def billing_after_destroy_usd_per_month(settings: GceT4ServerSettings) -> float | None:
    """The retained data disk (retainDataDisk), else nothing; None where the catalog has no price for it: unknown,
    never $0 (the disk bills)."""
    if not settings.retain_data_disk:
        return 0.0
    return disk_usd_per_month(settings.region, settings.data_disk_type, settings.data_disk_size_gb)


def first_boot_download_bytes(checkpoint_bytes: int) -> int:
    """What a first boot downloads that the catalog sizes: the model's checkpoint and the vLLM environment."""
    return checkpoint_bytes + catalog.FIRST_BOOT_VLLM_ENV_BYTES


def first_boot_nat_usd(checkpoint_bytes: int) -> float:
    price = catalog.CLOUD_NAT_PRICES["nat:gib-processed"].usd_per_hour
    return round(first_boot_download_bytes(checkpoint_bytes) / catalog.GIB * price, 2)


def first_boot_nat_basis() -> str:
    """How first_boot_nat_usd is reckoned, as `cost` explains it."""
    price = catalog.CLOUD_NAT_PRICES["nat:gib-processed"]
    return (f"the model's checkpoint and the vLLM environment (~{catalog.FIRST_BOOT_VLLM_ENV_BYTES / 1e9:g} GB, "
            f"catalog.FIRST_BOOT_VLLM_ENV_BYTES; the driver's packages not counted) x "
            f"${price.usd_per_hour}/GiB: {price.source}")


def nat_address_while_stopped() -> str:
    """The Cloud NAT address's bill while the VM is stopped, which `stopped` does not count."""
    address = catalog.CLOUD_NAT_PRICES["nat:ip-hour"]
    return (f"${address.usd_per_hour}/h, ${address.usd_per_hour * catalog.HOURS_PER_MONTH:.2f}/month, "
            "not in `stopped`")
