"""How the image is built: by AWS CodeBuild (its project, its role, and the step that starts the build and waits
for it: steps/build.py), or with imageBuilder local on the machine that runs `pulumi up` (steps/local_build.py);
either way into the same repository under the same tag, from a base pinned by digest."""

import pulumi
import pulumi_aws as aws
import pulumi_command as command

from gemma4_t4 import catalog

from ..base import answered
from .access import account_of, codebuild_trust, service_role, step_environment
from .image_settings import TuringImageSettings
from .steps import build, local_build
from .storage import context_bucket

CODEBUILD_IMAGE = "aws/codebuild/amazonlinux2-x86_64-standard:5.0"


def local_build_step(name: str, tag: str, settings: TuringImageSettings, repository: aws.ecr.Repository,
                     after: list, build_environment: pulumi.Output[dict[str, str]],
                     parent: pulumi.Resource) -> command.local.Command:
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
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[repository, *after]),
    )


def build_role(name: str, settings: TuringImageSettings, repository: aws.ecr.Repository,
               bucket: aws.s3.Bucket, log_group: aws.cloudwatch.LogGroup, tags: dict[str, str],
               parent: pulumi.Resource) -> tuple[aws.iam.Role, aws.iam.RolePolicy]:
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
    ], tags, parent, codebuild_trust(settings.region, account_of(repository.arn), f"{name}-build*"))


def codebuild_step(name: str, tag: str, settings: TuringImageSettings, repository: aws.ecr.Repository,
                   tags: dict[str, str], after: list, build_environment: pulumi.Output[dict[str, str]],
                   parent: pulumi.Resource) -> command.local.Command:
    """The build context in a private bucket, a CodeBuild project with a role that may read it, pull the base
    and push to REPOSITORY, and the step that starts the build and waits for it (steps/build.py)."""
    child = pulumi.ResourceOptions(parent=parent)
    bucket, context = context_bucket(name, tag, tags, after, parent)
    log_group = aws.cloudwatch.LogGroup(f"{name}-build-logs", retention_in_days=14, tags=tags, opts=child)
    role, role_policy = build_role(name, settings, repository, bucket, log_group, tags, parent)
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
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[project, context, role_policy, *after]),
    )


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
