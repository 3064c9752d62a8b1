"""Everything the operator side knows about GCE: its registry entry (cloud.py), its target through an IAP
tunnel, its preflight and regions, stopping and starting its VM, and the offline plan's stand-ins for the
GCP provider. The component is gemma4_t4.components.gce."""

from typing import Any

from .cloud import GCE, Gce


def __getattr__(name: str) -> Any:
    """World: what exists before the program runs (standins.py), loaded on first use, so the operator commands
    import no Pulumi SDK until they run the plan."""
    if name == "World":
        from .standins import GceWorld

        return GceWorld
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["GCE", "Gce"]
