"""The clamped vLLM image, built by AWS CodeBuild (or, with imageBuilder local, on the machine that runs
`pulumi up`: steps/local_build.py) into a private ECR repository.

The 8 GB base image never touches the user's disk: the build context (turing/'s Dockerfile,
buildspec, gate and clamp) goes to a private S3 bucket, CodeBuild builds and pushes, and the build
step (steps/build.py, a local command started by `pulumi up` with the AWS
provider's settings, from build_environment) waits for the build and hands back the image digest. The tag is a hash
of the build context, so a changed clamp rebuilds and an unchanged one does not.

With keepImages the repository has a fixed name (gemma4-t4/PREFIX), survives `pulumi destroy`, and
the next `up` adopts it (import) with its images, so a kept image is reused instead of rebuilt.

Split by concern: image_settings.py (the arguments checked), storage.py (the repository and the context bucket),
image_build.py (CodeBuild or the local build).
"""

from typing import TypedDict

import pulumi

from ..base import answered, provider_for, refusals, type_token, with_alias
from ..config import validate
from .build_context import image_tag
from .image_build import codebuild_step, local_build_step
from .image_settings import TuringImageSettings
from .names import default_prefix
from .region import provider_region
from .scope import StackScope
from .settings import ImageBuilder
from .storage import (
    APP,
    image_repository,
    kept_repository_name,
    kept_repository_tags,
    refuse_anothers_repository,
    refuse_unkeeping,
)

# Where these lived before the image was split by concern (tests and callers import them from here).
__all__ = ["TuringImage", "TuringImageArgs"]


# Before 0.3.0 the component was registered under this type; the alias keeps deployed stacks' resources.
LEGACY_TYPE = "gemma4-t4:aws:TuringImage"


class TuringImageArgs(TypedDict, total=False):
    """The arguments of TuringImage: which vLLM image to clamp, and where to keep the result. Every one is optional;
    the defaults are the catalog's AWS vLLM container, built in the AWS provider's region."""

    base_image: str
    """The AWS vLLM container (private ECR: ACCOUNT.dkr.ecr.REGION.amazonaws.com/NAME:TAG) to build from. Default: the
    catalog's, the one SageMakerT4Endpoint serves."""
    vllm_version: str
    """The vLLM version inside the base image (the image tag carries it). Default: the catalog's base image's; set it
    with any other baseImage."""
    region: str
    """AWS region of the repository, the build and its bucket. Default: the region of the AWS provider (the one in
    opts, else the default provider's aws:region)."""
    keep_images: bool
    """Keep the ECR repository and its images after the component is deleted; the next one with the same
    namePrefix adopts it and reuses a kept image instead of building it again."""
    name_prefix: str
    """With keepImages, the repository is gemma4-t4/PREFIX. Default: STACK-NAME."""
    tags: dict[str, str]
    """Tags on every resource, besides app=gemma4-t4."""
    image_builder: ImageBuilder
    """Who builds the image: codebuild (AWS CodeBuild, the default), or local (the machine that runs `pulumi up`, with
    the first of buildah, podman and docker found; or buildah, podman or docker to choose one), for an account
    CodeBuild refuses ("Cannot have more than 0 builds in queue"). Same image, repository and tag either way."""
    build_environment: pulumi.Input[dict[str, str]]
    """Environment of the build step's AWS client (AWS_REGION, AWS_PROFILE, keys...): the credentials of the
    account the resources are made in. Default: AWS_REGION alone (the rest from the environment)."""


class TuringImage(pulumi.ComponentResource):
    """The AWS vLLM SageMaker container with the Turing clamp, built by AWS CodeBuild into a private ECR
    repository (the base image never touches this machine), or with imageBuilder local on this machine into the
    same repository; tagged by a hash of its build context."""

    repository_url: pulumi.Output[str]
    """The private ECR repository's URL."""
    repository_arn: pulumi.Output[str]
    """The repository's ARN (for a role that pulls from it)."""
    image_uri: pulumi.Output[str]
    """The built image by digest: REPOSITORY@sha256:..."""
    tag: pulumi.Output[str]
    """The image's tag: vllm-VERSION-sm75-CONTEXTHASH."""

    # args: {} when omitted (read, never changed); Pulumi's analyzer reads its annotation as the package's inputs.
    def __init__(self, name: str, args: TuringImageArgs = {},  # noqa: B006
                 opts: pulumi.ResourceOptions | None = None) -> None:
        provider = provider_for("aws", opts)
        invoke = pulumi.InvokeOptions(provider=provider, parent=opts.parent if opts else None)
        with refusals(TuringImageArgs.__name__):
            region = args.get("region") or provider_region(provider, opts)
            settings = validate(TuringImageSettings, {**args, "region": region})
            fixed_name = kept_repository_name(settings.name_prefix or default_prefix(name))
            kept = kept_repository_tags(fixed_name, invoke) if settings.keep_images else None
            if kept is not None:
                refuse_anothers_repository(fixed_name, kept, StackScope.current())
            adopt = fixed_name if kept is not None else None
            if not settings.keep_images:
                refuse_unkeeping(fixed_name, settings.region, invoke)
        super().__init__(type_token(TuringImage), name, None, with_alias(opts, LEGACY_TYPE))
        # What the component was made to wait for (e.g. an account check): the upload and the build wait too,
        # since a component's depends_on does not hold back its children.
        after = list(opts.depends_on) if opts and isinstance(opts.depends_on, list) else []
        tag = image_tag(settings.vllm_version, settings.base_image)
        tags = {"app": APP, **settings.tags}
        repository = image_repository(name, fixed_name if settings.keep_images else None, adopt, tags, self)
        build_environment = pulumi.Output.from_input(settings.build_environment or {})
        if settings.image_builder == ImageBuilder.CODEBUILD:
            self.build = codebuild_step(name, tag, settings, repository, tags, after, build_environment, self)
        else:
            self.build = local_build_step(name, tag, settings, repository, after, build_environment, self)
        self.tag = pulumi.Output.from_input(tag)
        self.repository_url = repository.repository_url
        self.repository_arn = repository.arn
        self.image_uri = pulumi.Output.concat(
            answered(repository.repository_url, f"the ECR repository {name}-repo's repositoryUrl"), "@",
            answered(self.build.stdout, "the image build step's stdout (the image digest)"))
        self.register_outputs({"repository_url": self.repository_url, "repository_arn": self.repository_arn,
                               "image_uri": self.image_uri, "tag": self.tag})
