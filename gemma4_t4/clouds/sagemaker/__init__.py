"""Everything the operator side knows about SageMaker: its registry entry (cloud.py), its target through
sagemaker-runtime, its preflight and regions, what stop/start mean there, and the offline plan's stand-ins
for the AWS provider. The component is gemma4_t4.components.sagemaker."""

from typing import Any

from .cloud import SAGEMAKER, SageMaker


def __getattr__(name: str) -> Any:
    """World: what exists before the program runs (standins.py), loaded on first use, so the operator commands
    import no Pulumi SDK until they run the plan."""
    if name == "World":
        from .standins import AwsWorld

        return AwsWorld
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["SAGEMAKER", "SageMaker"]
