"""TuringImage's arguments checked whole (TuringImageSettings): the base image, its vLLM, the region and who builds."""

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic.alias_generators import to_camel

from gemma4_t4 import catalog
from gemma4_t4.errors import VALUE, ConfigError, Set

from ..config.schema import AnyInput, Flag
from .settings import AWS_REGION, ImageBuilder


def _none_as_empty(value: Any) -> Any:
    return {} if value is None else value


def _default_builder(value: Any) -> Any:
    """No builder given (None, ""): CodeBuild; another word is refused with the choices."""
    if not value:
        return ImageBuilder.CODEBUILD
    try:
        return ImageBuilder(value)
    except ValueError:
        raise ConfigError("imageBuilder", f"{value!r} is not one of {', '.join(ImageBuilder)}",
                          Set("imageBuilder", ImageBuilder.LOCAL.value)) from None


class TuringImageSettings(BaseModel):
    """Everything TuringImage is built from: its Args checked whole (an argument it does not have is refused with
    the one it most likely means, as the endpoint's are)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True,
                              arbitrary_types_allowed=True)

    base_image: str = catalog.PINS["sagemaker.base_image"]
    vllm_version: str = Field("", validate_default=True)
    region: str = ""
    keep_images: Flag = False
    name_prefix: str = ""
    tags: Annotated[dict[str, str], BeforeValidator(_none_as_empty)] = Field(default_factory=dict)
    image_builder: Annotated[ImageBuilder, BeforeValidator(_default_builder)] = ImageBuilder.CODEBUILD
    build_environment: AnyInput = None

    @field_validator("vllm_version")
    @classmethod
    def _base_images_vllm(cls, version: str, info: ValidationInfo) -> str:
        """The catalog's base image's vLLM, for that image (base_image is validated first: it comes first)."""
        if version or info.data.get("base_image") != catalog.PINS["sagemaker.base_image"]:
            return version
        return catalog.PINS["vllm.sagemaker"]

    @model_validator(mode="after")
    def _buildable(self) -> "TuringImageSettings":
        """A private ECR base (CodeBuild pulls from ECR), an AWS region, and the base's vLLM (the tag names it)."""
        if not catalog.ECR_IMAGE.fullmatch(self.base_image):
            raise ConfigError("baseImage", f"{self.base_image!r} is not a private ECR image "
                              "(ACCOUNT.dkr.ecr.REGION.amazonaws.com/NAME:TAG): CodeBuild pulls from ECR",
                              Set("baseImage", catalog.PINS["sagemaker.base_image"]))
        if not AWS_REGION.fullmatch(self.region):
            raise ConfigError("region", f"{self.region!r} is not an AWS region", Set("region", "us-east-2"))
        if not self.vllm_version:
            raise ConfigError("vllmVersion", f"is not set: the tag names the base image's vLLM, which gemma4-t4 knows "
                              f"only for its own ({catalog.PINS['sagemaker.base_image']})",
                              Set("vllmVersion", VALUE))
        return self
