"""The clamped vLLM image, built by AWS CodeBuild (or, with imageBuilder local, on the machine that runs
`pulumi up`: steps/local_build.py) into a private ECR repository.

The 8 GB base image never touches the user's disk: the build context (turing/'s Dockerfile,
buildspec, gate and clamp) goes to a private S3 bucket, CodeBuild builds and pushes, and the build
step (steps/build.py, a local command started by `pulumi up` with the AWS
provider's settings, from build_environment) waits for the build and hands back the image digest. The tag is a hash
of the build context, so a changed clamp rebuilds and an unchanged one does not.

With keepImages the repository has a fixed name (gemma4-t4/PREFIX), survives `pulumi destroy`, and
the next `up` adopts it (import) with its images, so a kept image is reused instead of rebuilt.
"""

import json
import shlex
from typing import Annotated, Any, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_command as command
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic.alias_generators import to_camel

from gemma4_t4 import catalog
from gemma4_t4.errors import VALUE, ConfigError, Set

from ..base import answered, provider_for, refusals, type_token, with_alias
from ..config import validate
from ..config.schema import AnyInput, Flag
from ..step import StepRequest
from . import provider_answers as answers
from .build_context import build_context_files, image_tag
from .iam import account_of, codebuild_trust, service_role
from .region import provider_region
from .scope import StackScope
from .settings import AWS_REGION, ImageBuilder
from .steps import build, local_build

APP = "gemma4-t4"
# Before 0.3.0 the component was registered under this type; the alias keeps deployed stacks' resources.
LEGACY_TYPE = "gemma4-t4:aws:TuringImage"

CODEBUILD_IMAGE = "aws/codebuild/amazonlinux2-x86_64-standard:5.0"


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


def kept_repository_name(prefix: str) -> str:
    """The fixed name of the repository keepImages keeps: found again by the next up."""
    return f"{APP}/{prefix.lower()}"


def kept_repository_tags(name: str, invoke: pulumi.InvokeOptions) -> dict[str, str] | None:
    """The tags of the kept repository if it is already in the account (kept by an earlier destroy, or ours), else
    None. Only the provider's own "not found" answer means absent; any other failure is refused (read as absent,
    the create would then fail on the existing repository, or a kept one would be shadowed)."""
    try:
        found = aws.ecr.get_repository(name=name, opts=invoke)
    except Exception as error:
        if answers.is_repository_not_found(str(error), name):
            return None
        raise ConfigError("keepImages", f"gemma4-t4 could not read whether the kept ECR repository {name} exists "
                          f"(it adopts a kept one): {answers.provider_message(error)}",
                          "let the account `pulumi up` runs as call ecr:DescribeRepositories, "
                          "ecr:ListTagsForResource and ecr:DescribeImages in the region (e.g. the "
                          "AmazonEC2ContainerRegistryReadOnly policy), or check the AWS provider's region and "
                          "profile") from None
    if not found.repository_url:
        raise ConfigError("keepImages", f"{answers.GET_REPOSITORY} answered without a repository for {name}, "
                          "which the provider never does (a missing repository is its error "
                          f"'{answers.repository_not_found(name)}')", answers.USE_PROVIDER_MOCKS)
    return dict(found.tags or {})


def refuse_anothers_repository(name: str, tags: dict[str, str], scope: StackScope) -> None:
    """A kept repository whose tags name another stack (organization, project or stack): adopting it would make
    this stack's destroy, keepImages and image reuse act on another's images. One that names none (kept by a
    release before 0.4.0) is adopted as before, and tagged as this stack's."""
    theirs = StackScope.of(tags, "")
    if not theirs.tags() or scope.owns(tags):
        return
    raise ConfigError("keepImages", f"the kept ECR repository {name} is the stack {theirs}'s (its tags), not this "
                      f"stack's ({scope}): two stacks named alike in one account would share it",
                      "give this stack another namePrefix (the stack program's is the stack's name: another stack "
                      "name), or keepImages false")


def refuse_unkeeping(name: str, region: str, invoke: pulumi.InvokeOptions) -> None:
    """keepImages off while the kept repository NAME is in the account (this stack's, kept until now, or left by
    an earlier destroy): `up` would make a new repository, and the kept one, which Pulumi never deletes, would
    stay out of the stack, billing for its images. Refused with the manual step. A lookup the account may not
    make decides nothing here (keepImages off needs no lookup otherwise)."""
    try:
        found = aws.ecr.get_repository(name=name, opts=invoke)
    except Exception:
        return  # absent (the provider's not-found), or not readable
    if not found.arn:
        # The provider never answers a repository without its ARN (repository_data_source.go); an answer
        # without one is a generic test mock's `{}`, not a kept repository.
        return
    raise ConfigError("keepImages", f"is false, but the kept ECR repository {name} is in the account: `pulumi up` "
                      "would leave it outside the stack, billing for its images, and build into a new one",
                      ("keep it: ", Set("keepImages", True), ", or delete it with its images first: " + shlex.join(
                          ["aws", "ecr", "delete-repository", "--repository-name", name, "--force", "--region",
                           region])))


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
        repository = self._repository(name, fixed_name if settings.keep_images else None, adopt, tags)
        build_environment = pulumi.Output.from_input(settings.build_environment or {})
        if settings.image_builder == ImageBuilder.CODEBUILD:
            self.build = self._codebuild(name, tag, settings, repository, tags, after, build_environment)
        else:
            self.build = self._local_build(name, tag, settings, repository, after, build_environment)
        self.tag = pulumi.Output.from_input(tag)
        self.repository_url = repository.repository_url
        self.repository_arn = repository.arn
        self.image_uri = pulumi.Output.concat(
            answered(repository.repository_url, f"the ECR repository {name}-repo's repositoryUrl"), "@",
            answered(self.build.stdout, "the image build step's stdout (the image digest)"))
        self.register_outputs({"repository_url": self.repository_url, "repository_arn": self.repository_arn,
                               "image_uri": self.image_uri, "tag": self.tag})

    def _repository(self, name: str, kept: str | None, adopt: str | None, tags: dict[str, str]) -> aws.ecr.Repository:
        """The private repository (KEPT: its fixed name with keepImages; ADOPT: a kept one already in the account),
        whose untagged images expire."""
        keep_images = kept is not None
        repository = aws.ecr.Repository(
            f"{name}-repo",
            name=kept,
            image_tag_mutability="IMMUTABLE",
            image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
            # destroy deletes the images too, unless the user keeps them (then the repository stays,
            # and the next up adopts it: an import of a resource already in the state is a no-op).
            force_delete=not keep_images,
            # The stack's organization, project and stack: a kept repository is adopted only by its own stack.
            tags={**tags, **StackScope.current().tags()},
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=keep_images, import_=adopt),
        )
        # Images without a tag (a push cut short) expire; the tagged image the endpoint serves never does.
        aws.ecr.LifecyclePolicy(f"{name}-repo-lifecycle", repository=repository.name, policy=json.dumps(
            untagged_expiry_policy()), opts=pulumi.ResourceOptions(parent=self))
        return repository

    def _local_build(self, name: str, tag: str, settings: TuringImageSettings, repository: aws.ecr.Repository,
                     after: list, build_environment: pulumi.Output[dict[str, str]]) -> command.local.Command:
        """The step that builds the image on this machine and pushes it (steps/local_build.py)."""
        request = pulumi.Output.all(repository.name, repository.repository_url).apply(
            lambda found: local_build.LocalBuildRequest(
                repository=found[0], repository_url=found[1], tag=tag, base_image=settings.base_image,
                base_digest_pin=base_digest_pin(settings.base_image), builder=settings.image_builder.value))
        return command.local.Command(
            f"{name}-local-build",
            create=local_build.command(),
            environment=step_environment(build_environment, settings.region, request),
            triggers=[tag],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[repository, *after]),
        )

    def _context(self, name: str, tag: str, tags: dict[str, str], after: list
                 ) -> tuple[aws.s3.Bucket, aws.s3.BucketObjectv2]:
        """The build context (the files whose hash is the tag) in a private, encrypted bucket that takes TLS only."""
        child = pulumi.ResourceOptions(parent=self)
        bucket = aws.s3.Bucket(f"{name}-context", force_destroy=True, tags=tags, opts=child)
        aws.s3.BucketPublicAccessBlock(f"{name}-context-private", bucket=bucket.id, block_public_acls=True,
                                       block_public_policy=True, ignore_public_acls=True,
                                       restrict_public_buckets=True, opts=child)
        aws.s3.BucketPolicy(f"{name}-context-tls-only", bucket=bucket.id,
                            policy=bucket.arn.apply(lambda arn: json.dumps(tls_only_policy(arn))), opts=child)
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-context-encryption", bucket=bucket.id,
            rules=[aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                apply_server_side_encryption_by_default=aws.s3
                .BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                    sse_algorithm="AES256"))],
            opts=child)
        context = aws.s3.BucketObjectv2(
            f"{name}-context-archive", bucket=bucket.id, key=f"context/{tag}.zip",
            source=pulumi.AssetArchive({k: pulumi.FileAsset(str(v)) for k, v in build_context_files().items()}),
            opts=pulumi.ResourceOptions(parent=self, depends_on=after))
        return bucket, context

    def _build_role(self, name: str, settings: TuringImageSettings, repository: aws.ecr.Repository,
                    bucket: aws.s3.Bucket, log_group: aws.cloudwatch.LogGroup, tags: dict[str, str]
                    ) -> tuple[aws.iam.Role, aws.iam.RolePolicy]:
        """CodeBuild's role: it may write its logs, read the context, pull the base and push to REPOSITORY."""
        return service_role(f"{name}-build-role", "codebuild.amazonaws.com", [
            {"Sid": "Logs", "Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
             "Resource": pulumi.Output.concat(answered(log_group.arn, f"the log group {name}-build-logs's arn"), ":*")},
            {"Sid": "Context", "Effect": "Allow", "Action": ["s3:GetObject", "s3:GetObjectVersion"],
             "Resource": pulumi.Output.concat(answered(bucket.arn, f"the bucket {name}-context's arn"), "/context/*")},
            # What AWS's reference CodeBuild service role allows on a source bucket besides reading objects
            # (docs.aws.amazon.com/codebuild/latest/userguide/setting-up-service-role.html, read 2026-12-04).
            {"Sid": "ContextBucket", "Effect": "Allow", "Action": ["s3:GetBucketAcl", "s3:GetBucketLocation"],
             "Resource": bucket.arn},
            {"Sid": "EcrLogin", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
            {"Sid": "PullBase", "Effect": "Allow",
             "Action": ["ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage"],
             "Resource": _ecr_repository_arn(settings.base_image)},
            {"Sid": "PushImage", "Effect": "Allow",
             "Action": ["ecr:BatchCheckLayerAvailability", "ecr:InitiateLayerUpload", "ecr:UploadLayerPart",
                        "ecr:CompleteLayerUpload", "ecr:PutImage", "ecr:BatchGetImage", "ecr:DescribeImages"],
             "Resource": repository.arn},
        ], tags, self, codebuild_trust(settings.region, account_of(repository.arn), f"{name}-build*"))

    def _codebuild(self, name: str, tag: str, settings: TuringImageSettings, repository: aws.ecr.Repository,
                   tags: dict[str, str], after: list, build_environment: pulumi.Output[dict[str, str]]
                   ) -> command.local.Command:
        """The build context in a private bucket, a CodeBuild project with a role that may read it, pull the base
        and push to REPOSITORY, and the step that starts the build and waits for it (steps/build.py)."""
        child = pulumi.ResourceOptions(parent=self)
        bucket, context = self._context(name, tag, tags, after)
        log_group = aws.cloudwatch.LogGroup(f"{name}-build-logs", retention_in_days=14, tags=tags, opts=child)
        role, role_policy = self._build_role(name, settings, repository, bucket, log_group, tags)
        project = aws.codebuild.Project(
            f"{name}-build",
            service_role=role.arn,
            source=aws.codebuild.ProjectSourceArgs(type="S3",
                                                   location=pulumi.Output.concat(bucket.id, "/", context.key)),
            artifacts=aws.codebuild.ProjectArtifactsArgs(type="NO_ARTIFACTS"),
            environment=aws.codebuild.ProjectEnvironmentArgs(
                compute_type=catalog.CODEBUILD_COMPUTE_TYPE,
                image=CODEBUILD_IMAGE,
                type="LINUX_CONTAINER",
                privileged_mode=True,  # Docker inside the build
                environment_variables=[
                    aws.codebuild.ProjectEnvironmentEnvironmentVariableArgs(name="BASE_IMAGE",
                                                                           value=settings.base_image),
                    aws.codebuild.ProjectEnvironmentEnvironmentVariableArgs(name="TARGET_REPO",
                                                                           value=repository.repository_url),
                    aws.codebuild.ProjectEnvironmentEnvironmentVariableArgs(name="TARGET_TAG", value=tag),
                ],
            ),
            logs_config=aws.codebuild.ProjectLogsConfigArgs(
                cloudwatch_logs=aws.codebuild.ProjectLogsConfigCloudwatchLogsArgs(group_name=log_group.name)),
            build_timeout=90,
            tags=tags,
            opts=child,
        )
        request = pulumi.Output.all(project.name, repository.name, bucket.id, context.key, role.name,
                                    role_policy.name).apply(lambda found: build.BuildRequest(
                                        project=found[0], repository=found[1], tag=tag,
                                        source_location=f"{found[2]}/{found[3]}", base_image=settings.base_image,
                                        base_digest_pin=base_digest_pin(settings.base_image), role_name=found[4],
                                        policy_name=found[5]))
        return command.local.Command(
            f"{name}-codebuild-run",
            create=build.command(),
            environment=step_environment(build_environment, settings.region, request),
            triggers=[tag],
            # The policy too: a build started before its permissions exist fails with AccessDenied.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[project, context, role_policy, *after]),
        )


def step_environment(environment: pulumi.Input[dict[str, str]], region: str,
                     request: pulumi.Output[StepRequest]) -> pulumi.Output[dict[str, str]]:
    """A step's environment: AWS_REGION, the AWS client's settings (which may name another), and its request
    under the variable its type names."""
    return pulumi.Output.all(environment, request).apply(
        lambda found: {"AWS_REGION": region, **found[0], found[1].ENV: found[1].encode()})


def untagged_expiry_policy() -> dict:
    """The repository's lifecycle: an image without a tag expires after a day; a rule that selects tagStatus
    untagged never touches a tagged image (the one the endpoint serves by digest has its immutable tag)."""
    return {"rules": [{"rulePriority": 1, "description": "Expire untagged images",
                       "selection": {"tagStatus": "untagged", "countType": "sinceImagePushed", "countUnit": "days",
                                     "countNumber": catalog.ECR_UNTAGGED_EXPIRY_DAYS},
                       "action": {"type": "expire"}}]}


def tls_only_policy(bucket_arn: str) -> dict:
    """The build context bucket refuses every request not made over TLS, from anyone."""
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "TlsOnly", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
        "Resource": [bucket_arn, f"{bucket_arn}/*"], "Condition": catalog.S3_INSECURE_TRANSPORT}]}


def default_prefix(name: str) -> str:
    return f"{pulumi.get_stack()}-{name}"


def base_digest_pin(base_image: str) -> str:
    """The digest the base must resolve to: the one in the image reference, else the catalog's
    recorded digest for the pinned tag, else none (a user's own base, by tag)."""
    if "@" in base_image:
        return base_image.split("@", 1)[1]
    if base_image == catalog.PINS["sagemaker.base_image"]:
        return catalog.PINS["sagemaker.base_image_digest"]
    return ""


def _ecr_repository_arn(image: str) -> str:
    """arn:aws:ecr:REGION:ACCOUNT:repository/NAME of ACCOUNT.dkr.ecr.REGION.amazonaws.com/NAME:TAG."""
    registry, _, path = image.partition("/")
    account, _, _, region, *_ = registry.split(".")
    name = path.split("@")[0].rsplit(":", 1)[0]
    return f"arn:aws:ecr:{region}:{account}:repository/{name}"
