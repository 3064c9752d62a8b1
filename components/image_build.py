"""The clamped vLLM image, built by AWS CodeBuild into a private ECR repository.

The 8 GB base image never touches the user's disk: the build context (turing/'s Dockerfile,
buildspec, gate and clamp) goes to a private S3 bucket, CodeBuild builds and pushes, and the build
step (components/scripts/codebuild_run.py, a local command started by `pulumi up` with the AWS
provider's own settings) waits for the build and hands back the image digest. The tag is a hash
of the build context, so a changed clamp rebuilds and an unchanged one does not.

With keepImages the repository has a fixed name, survives `pulumi destroy`, and the next `up`
adopts it (import) with its images, so a kept image is reused instead of rebuilt.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_command as command

from gemma4_t4 import catalog

from .aws_iam import service_role

REPO = Path(__file__).resolve().parent.parent
CONTEXT_DIR = REPO / "turing"
# Relative: Pulumi runs the program from the project directory, and an absolute path would
# differ between machines and re-run the command on the next `pulumi up`. The interpreter is the
# project's virtualenv (Pulumi.yaml: runtime.options.virtualenv), which has boto3.
PYTHON = ".venv/bin/python"
BUILD_STEP = f"{PYTHON} -m components.scripts.codebuild_run"
CODEBUILD_IMAGE = "aws/codebuild/amazonlinux2-x86_64-standard:5.0"


def build_context_files() -> dict[str, Path]:
    """Archive path -> file: what the Dockerfile COPYs, plus the buildspec."""
    files = {name: CONTEXT_DIR / name for name in ("Dockerfile", "buildspec.yml", "pyproject.toml", "sm75_gate.py")}
    for source in sorted((CONTEXT_DIR / "turing_clamp").glob("*.py")):
        files[f"turing_clamp/{source.name}"] = source
    return files


def context_hash(base_image: str) -> str:
    digest = hashlib.sha256(base_image.encode())
    for name, path in sorted(build_context_files().items()):
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class ImageBuildArgs:
    base_image: str
    vllm_version: str
    region: str
    keep_images: bool
    tags: dict[str, str]
    stack: str = "dev"


def kept_repository_name(stack: str) -> str:
    """The fixed name of the repository keepImages keeps: one per stack, found again by the next up."""
    return f"gemma4-t4/{stack.lower()}"


def kept_repository_exists(name: str) -> bool:
    """Whether the kept repository is already in the account (kept by an earlier destroy, or ours)."""
    try:
        return bool(aws.ecr.get_repository(name=name).repository_url)
    except Exception:  # the provider answers "not found" with an error; anything else shows at create
        return False


def provider_environment() -> dict[str, pulumi.Input[str]]:
    """The Pulumi AWS provider's own settings (stack config aws:*) as the environment that boto3
    reads, so the build step works in the account and region the resources are made in. Unset
    keys are left out: then both fall back to the same default chain (AWS_* variables, ~/.aws)."""
    aws_config = pulumi.Config("aws")
    env: dict[str, pulumi.Input[str]] = {}
    for key, var in (("region", "AWS_REGION"), ("profile", "AWS_PROFILE")):
        if aws_config.get(key):
            env[var] = aws_config.require(key)
    for key, var in (("accessKey", "AWS_ACCESS_KEY_ID"), ("secretKey", "AWS_SECRET_ACCESS_KEY"),
                     ("token", "AWS_SESSION_TOKEN")):
        if aws_config.get(key):
            env[var] = aws_config.require_secret(key)
    for key, var in (("sharedCredentialsFiles", "AWS_SHARED_CREDENTIALS_FILE"),
                     ("sharedConfigFiles", "AWS_CONFIG_FILE")):
        files = aws_config.get_object(key)
        if files:
            env[var] = files[0]
    # aws:assumeRoles (pulumi-aws 7: a list, assumed in order); aws:assumeRole (older: one object).
    roles = aws_config.get_object("assumeRoles") or ([aws_config.get_object("assumeRole")]
                                                     if aws_config.get_object("assumeRole") else [])
    if roles:
        env["GEMMA4_T4_ASSUME_ROLES"] = json.dumps(roles)
    for entry in aws_config.get_object("endpoints") or []:
        for service, url in entry.items():
            env[f"AWS_ENDPOINT_URL_{service.upper()}"] = url
    return env


class TuringImage(pulumi.ComponentResource):
    repository_url: pulumi.Output[str]
    repository_arn: pulumi.Output[str]
    image_uri: pulumi.Output[str]  # repository@sha256:...
    build: command.local.Command

    def __init__(self, name: str, args: ImageBuildArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gemma4-t4:aws:TuringImage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tag = f"vllm-{args.vllm_version}-sm75-{context_hash(args.base_image)}"

        kept = kept_repository_name(args.stack) if args.keep_images else None
        repository = aws.ecr.Repository(
            f"{name}-repo",
            name=kept,
            image_tag_mutability="IMMUTABLE",
            image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
            # destroy deletes the images too, unless the user keeps them (then the repository stays,
            # and the next up adopts it: an import of a resource already in the state is a no-op).
            force_delete=not args.keep_images,
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=args.keep_images,
                                        import_=kept if kept and kept_repository_exists(kept) else None),
        )
        bucket = aws.s3.Bucket(f"{name}-context", force_destroy=True, tags=args.tags, opts=child)
        aws.s3.BucketPublicAccessBlock(f"{name}-context-private", bucket=bucket.id, block_public_acls=True,
                                       block_public_policy=True, ignore_public_acls=True,
                                       restrict_public_buckets=True, opts=child)
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
            opts=child)

        log_group = aws.cloudwatch.LogGroup(f"{name}-build-logs", retention_in_days=14, tags=args.tags, opts=child)
        base_repository_arn = _ecr_repository_arn(args.base_image)
        role, role_policy = service_role(f"{name}-build-role", "codebuild.amazonaws.com", [
            {"Sid": "Logs", "Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
             "Resource": pulumi.Output.concat(log_group.arn, ":*")},
            {"Sid": "Context", "Effect": "Allow", "Action": ["s3:GetObject", "s3:GetObjectVersion"],
             "Resource": pulumi.Output.concat(bucket.arn, "/context/*")},
            {"Sid": "EcrLogin", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
            {"Sid": "PullBase", "Effect": "Allow",
             "Action": ["ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage"],
             "Resource": base_repository_arn},
            {"Sid": "PushImage", "Effect": "Allow",
             "Action": ["ecr:BatchCheckLayerAvailability", "ecr:InitiateLayerUpload", "ecr:UploadLayerPart",
                        "ecr:CompleteLayerUpload", "ecr:PutImage", "ecr:BatchGetImage", "ecr:DescribeImages"],
             "Resource": repository.arn},
        ], args.tags, self)
        project = aws.codebuild.Project(
            f"{name}-build",
            service_role=role.arn,
            source=aws.codebuild.ProjectSourceArgs(type="S3",
                                                   location=pulumi.Output.concat(bucket.id, "/", context.key)),
            artifacts=aws.codebuild.ProjectArtifactsArgs(type="NO_ARTIFACTS"),
            environment=aws.codebuild.ProjectEnvironmentArgs(
                compute_type="BUILD_GENERAL1_MEDIUM",
                image=CODEBUILD_IMAGE,
                type="LINUX_CONTAINER",
                privileged_mode=True,  # Docker inside the build
                environment_variables=[
                    aws.codebuild.ProjectEnvironmentEnvironmentVariableArgs(name="BASE_IMAGE", value=args.base_image),
                    aws.codebuild.ProjectEnvironmentEnvironmentVariableArgs(name="TARGET_REPO",
                                                                           value=repository.repository_url),
                    aws.codebuild.ProjectEnvironmentEnvironmentVariableArgs(name="TARGET_TAG", value=tag),
                ],
            ),
            logs_config=aws.codebuild.ProjectLogsConfigArgs(
                cloudwatch_logs=aws.codebuild.ProjectLogsConfigCloudwatchLogsArgs(group_name=log_group.name)),
            build_timeout=90,
            tags=args.tags,
            opts=child,
        )
        request = pulumi.Output.json_dumps({
            "project": project.name, "repository": repository.name, "tag": tag,
            "source_location": pulumi.Output.concat(bucket.id, "/", context.key),
            "base_image": args.base_image, "base_digest_pin": base_digest_pin(args.base_image),
            "role_name": role.name, "policy_name": role_policy.name})
        self.build = command.local.Command(
            f"{name}-codebuild-run",
            create=BUILD_STEP,
            environment={**provider_environment(), "GEMMA4_T4_BUILD": request},
            triggers=[tag],
            # The policy too: a build started before its permissions exist fails with AccessDenied.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[project, context, role_policy]),
        )
        self.tag = tag
        self.repository_url = repository.repository_url
        self.repository_arn = repository.arn
        self.image_uri = pulumi.Output.concat(repository.repository_url, "@", self.build.stdout)
        self.register_outputs({"repository_url": self.repository_url, "image_uri": self.image_uri, "tag": tag})


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
