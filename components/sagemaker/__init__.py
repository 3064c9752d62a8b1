"""SageMaker's room: Gemma 4 on an ml.g4dn endpoint, everything the component owns in one folder.

- component.py: SageMakerT4Endpoint and its Args, its constructor as named steps;
- settings.py: SageMakerT4EndpointSettings, the rules only SageMaker has;
- checks.py: what is refused before anything is registered, and the account check; names.py: the endpoint's names;
- server.py (model, configuration, endpoint, its logs and watch), scaling.py (autoscaling), ttl.py and guards.py
  (endpointTtl), outputs.py (the contract's target and connect command);
- image.py: TuringImage, the clamped image built into a private ECR repository (image_settings.py its Settings,
  image_build.py CodeBuild or the local build, storage.py the repository and the context bucket);
- access.py: the service roles and who may assume them, the model's execution role, the steps' AWS credentials;
- cost.py: every SageMaker price, for the component and the operator tools alike (no Pulumi);
- build_context.py: the image's build context (turing/) and its tag, a hash of it;
- container.py: the serving settings as the AWS vLLM container's SM_VLLM_* variables;
- quotas.py: the endpoint and CodeBuild quotas, shared by the account check and the operator's preflight;
- provider_answers.py: what the AWS provider's getRepository and getRegion answer, with their sources;
- steps/: the local steps `pulumi up` runs (account check, image build, endpoint watch, creation time, TTL check).

Names load on first use: a step run by `pulumi up` (python -m ...steps.build) imports this package without the
Pulumi SDKs the component needs.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = ["SageMakerT4Endpoint", "SageMakerT4EndpointArgs"]

if TYPE_CHECKING:
    from .component import SageMakerT4Endpoint, SageMakerT4EndpointArgs


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(".component", __name__), name)
