"""The clamped vLLM image, built by AWS CodeBuild into a private ECR repository.

The 8 GB base image never touches the user's disk: the build context (turing/'s Dockerfile,
buildspec and clamp) goes to a private S3 bucket, CodeBuild builds and pushes, and a local
command started by `pulumi up` waits for the build and hands back the image digest. The tag is
a hash of the build context, so a changed clamp rebuilds and an unchanged one does not.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_command as command

from .aws_iam import service_role

REPO = Path(__file__).resolve().parent.parent
CONTEXT_DIR = REPO / "turing"
# Relative: Pulumi runs the program from the project directory, and an absolute path would
# differ between machines and re-run the command on the next `pulumi up`.
RUN_SCRIPT = "components/scripts/codebuild-run.sh"
CODEBUILD_IMAGE = "aws/codebuild/amazonlinux2-x86_64-standard:5.0"


def build_context_files() -> dict[str, Path]:
    """Archive path -> file: what the Dockerfile COPYs, plus the buildspec."""
    files = {"Dockerfile": CONTEXT_DIR / "Dockerfile", "buildspec.yml": CONTEXT_DIR / "buildspec.yml",
             "pyproject.toml": CONTEXT_DIR / "pyproject.toml"}
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


class TuringImage(pulumi.ComponentResource):
    repository_url: pulumi.Output[str]
    repository_arn: pulumi.Output[str]
    image_uri: pulumi.Output[str]  # repository@sha256:...
    build: command.local.Command

    def __init__(self, name: str, args: ImageBuildArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gemma4-t4:aws:TuringImage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tag = f"vllm-{args.vllm_version}-sm75-{context_hash(args.base_image)}"

        repository = aws.ecr.Repository(
            f"{name}-repo",
            image_tag_mutability="IMMUTABLE",
            image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
            # destroy deletes the images too, unless the user keeps them (then the repository stays).
            force_delete=not args.keep_images,
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=args.keep_images),
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
        role, _ = service_role(f"{name}-build-role", "codebuild.amazonaws.com", [
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
            source=aws.codebuild.ProjectSourceArgs(type="S3", location=pulumi.Output.concat(bucket.id, "/", context.key)),
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
        self.build = command.local.Command(
            f"{name}-codebuild-run",
            create=f"bash {RUN_SCRIPT}",
            environment={
                "PROJECT": project.name,
                "REGION": args.region,
                "REPOSITORY_NAME": repository.name,
                "TAG": tag,
                "SOURCE_LOCATION": pulumi.Output.concat(bucket.id, "/", context.key),
            },
            triggers=[tag],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[project, context]),
        )
        self.tag = tag
        self.repository_url = repository.repository_url
        self.repository_arn = repository.arn
        self.image_uri = pulumi.Output.concat(repository.repository_url, "@", self.build.stdout)
        self.register_outputs({"repository_url": self.repository_url, "image_uri": self.image_uri, "tag": tag})


def _ecr_repository_arn(image: str) -> str:
    """arn:aws:ecr:REGION:ACCOUNT:repository/NAME of ACCOUNT.dkr.ecr.REGION.amazonaws.com/NAME:TAG."""
    registry, _, path = image.partition("/")
    account, _, _, region, *_ = registry.split(".")
    name = path.split("@")[0].rsplit(":", 1)[0]
    return f"arn:aws:ecr:{region}:{account}:repository/{name}"
