"""Reusable Pulumi components for Gemma 4 on a Tesla T4, one per cloud, for any Pulumi program:

    from gemma4_t4.components import GceT4Server, GceT4ServerArgs
    server = GceT4Server("llm", GceT4ServerArgs(zone="us-central1-a", max_model_len=8192))

- ``GceT4Server``: an N1 VM with a T4 (gce/), its guest set up by cloud-config (gce/guest.py, cloudinit/);
- ``SageMakerT4Endpoint``: an ml.g4dn endpoint (sagemaker/component.py) serving the clamped image that
  ``TuringImage`` builds with CodeBuild (sagemaker/image.py).

Every setting is checked before anything is registered (config/: the rules; serving.py and memory.py:
what vLLM and the GPU would refuse). The same classes are the package other Pulumi languages use
(package.py). Names load on first use, so the settings alone (``gemma4_t4.components.config``) import
without the cloud providers' SDKs.
"""

# Imported by its folder's name from the repository root, it would be a second copy of every module.
if __name__ != "gemma4_t4.components":
    raise ImportError("components/ is the package gemma4_t4.components (pyproject.toml: package-dir)")

from importlib import import_module
from typing import TYPE_CHECKING, Any

_WHERE = {
    "GceT4Server": ".gce", "GceT4ServerArgs": ".gce",
    "SageMakerT4Endpoint": ".sagemaker", "SageMakerT4EndpointArgs": ".sagemaker",
    "TuringImage": ".sagemaker.image", "TuringImageArgs": ".sagemaker.image",
    "MemoryPlan": ".base", "ServingArgs": ".base", "InvalidArgs": ".base", "InvalidOutput": ".base",
    "DType": ".config", "OnHostMaintenance": ".config", "TerminationAction": ".config",
    "ScalingMetric": ".sagemaker.settings",
    "ImageBuilder": ".sagemaker.settings",
}

__all__ = ["DType", "GceT4Server", "GceT4ServerArgs", "ImageBuilder", "InvalidArgs", "InvalidOutput", "MemoryPlan",
           "OnHostMaintenance",
           "SageMakerT4Endpoint", "SageMakerT4EndpointArgs", "ScalingMetric", "ServingArgs", "TerminationAction",
           "TuringImage", "TuringImageArgs"]

if TYPE_CHECKING:
    from .base import InvalidArgs, InvalidOutput, MemoryPlan, ServingArgs
    from .config import DType, OnHostMaintenance, TerminationAction
    from .gce import GceT4Server, GceT4ServerArgs
    from .sagemaker import SageMakerT4Endpoint, SageMakerT4EndpointArgs
    from .sagemaker.image import TuringImage, TuringImageArgs
    from .sagemaker.settings import ImageBuilder, ScalingMetric


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_WHERE[name], __name__), name)
