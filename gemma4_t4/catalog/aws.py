"""AWS: SageMaker instance types and their GPUs, host images, the container contract, tag rules,
prices."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .prices import Price


@dataclass(frozen=True)
class InstanceType:
    gpu: str  # NVIDIA's name for the card
    gpus: int
    vcpus: int
    memory_gib: int


# SageMaker real-time instance types with an NVIDIA GPU (aws.amazon.com/sagemaker/pricing,
# "Instance details", transcribed 2026-12-02). The T4 ones are what this project is built for.
SAGEMAKER_INSTANCE_TYPES = {
    **{f"ml.g4dn.{size}": InstanceType("Tesla T4", gpus, vcpus, mem) for size, gpus, vcpus, mem in (
        ("xlarge", 1, 4, 16), ("2xlarge", 1, 8, 32), ("4xlarge", 1, 16, 64), ("8xlarge", 1, 32, 128),
        ("12xlarge", 4, 48, 192), ("16xlarge", 1, 64, 256))},
    **{f"ml.g5.{size}": InstanceType("A10G", gpus, vcpus, mem) for size, gpus, vcpus, mem in (
        ("xlarge", 1, 4, 16), ("2xlarge", 1, 8, 32), ("4xlarge", 1, 16, 64), ("8xlarge", 1, 32, 128),
        ("12xlarge", 4, 48, 192), ("16xlarge", 1, 64, 256), ("24xlarge", 4, 96, 384), ("48xlarge", 8, 192, 768))},
    **{f"ml.g6.{size}": InstanceType("L4", gpus, vcpus, mem) for size, gpus, vcpus, mem in (
        ("xlarge", 1, 4, 16), ("2xlarge", 1, 8, 32), ("4xlarge", 1, 16, 64), ("8xlarge", 1, 32, 128),
        ("12xlarge", 4, 48, 192), ("16xlarge", 1, 64, 256), ("24xlarge", 4, 96, 384), ("48xlarge", 8, 192, 768))},
    **{f"ml.g6e.{size}": InstanceType("L40S", gpus, vcpus, mem) for size, gpus, vcpus, mem in (
        ("xlarge", 1, 4, 32), ("2xlarge", 1, 8, 64), ("4xlarge", 1, 16, 128), ("8xlarge", 1, 32, 256),
        ("12xlarge", 4, 48, 384), ("16xlarge", 1, 64, 512), ("24xlarge", 4, 96, 768), ("48xlarge", 8, 192, 1536))},
    "ml.p3.2xlarge": InstanceType("V100", 1, 8, 61),
    "ml.p3.8xlarge": InstanceType("V100", 4, 32, 244),
    "ml.p3.16xlarge": InstanceType("V100", 8, 64, 488),
    "ml.p4d.24xlarge": InstanceType("A100", 8, 96, 1152),
    "ml.p5.48xlarge": InstanceType("H100", 8, 192, 2048),
}
# Instance types with T4s: one each, except ml.g4dn.12xlarge with four (no g4dn carries two).
SAGEMAKER_T4_INSTANCE_TYPES = tuple(name for name, it in SAGEMAKER_INSTANCE_TYPES.items() if it.gpu == "Tesla T4")


def sagemaker_t4_instance_for(t4s: int) -> str:
    """The smallest T4 instance type with at least ``t4s`` T4s (the one tensorParallelSize picks)."""
    fitting = [name for name in SAGEMAKER_T4_INSTANCE_TYPES if SAGEMAKER_INSTANCE_TYPES[name].gpus >= t4s]
    return min(fitting, key=lambda name: (SAGEMAKER_INSTANCE_TYPES[name].gpus, SAGEMAKER_INSTANCE_TYPES[name].vcpus))

# Tags (docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html and the SageMaker Tag API,
# transcribed 2026-12-02): at most 50 per resource; keys 1-128, values 0-256 characters of letters,
# digits, spaces and _ . : / = + - @; the aws: prefix is reserved for AWS (any case).
AWS_MAX_TAGS = 50
AWS_TAG_KEY_MAX, AWS_TAG_VALUE_MAX = 128, 256
# \p{Z} in AWS's pattern is the space separators, not tabs or newlines.
AWS_TAG_CHARS = re.compile(r"[\w .:/=+\-@\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*")
AWS_RESERVED_TAG_PREFIX = "aws:"

# SageMaker real-time inference, on demand, us-east-2 ([sagemaker-t4-article]: the AWS Price List API, 2026-09-30).
SAGEMAKER_PRICES = {
    "ml.g4dn.xlarge": Price(0.736, "[sagemaker-t4-article]: SageMaker real-time, us-east-2, 2026-09-30"),
    "ml.g6.xlarge": Price(1.1267, "[sagemaker-t4-article]: SageMaker real-time, us-east-2, 2026-09-30"),
}
# Region -> instance type -> price. A region not listed gets no cost estimate (the plan says so).
_TRANSCRIBED = "AWS SageMaker pricing page, real-time, {region} (transcribed 2026-12-02 without a live read)"
# ml.g4dn.12xlarge (4 T4s, what tensorParallelSize 2 and 4 pick): from the same page, without a
# live read and not in either article; the first bill shows the real rate.
_G4DN_12XLARGE = 4.89
SAGEMAKER_REGIONAL_PRICES: dict[str, dict[str, Price]] = {
    "us-east-2": {**SAGEMAKER_PRICES,
                  "ml.g4dn.12xlarge": Price(_G4DN_12XLARGE, _TRANSCRIBED.format(region="us-east-2"))},
    **{region: {"ml.g4dn.xlarge": Price(0.7364, _TRANSCRIBED.format(region=region)),
                "ml.g4dn.12xlarge": Price(_G4DN_12XLARGE, _TRANSCRIBED.format(region=region))}
       for region in ("us-east-1", "us-west-2")},
}
# Where `bench --instance-type` takes its price: the articles' region, where the T4/L4 figures were made.
BENCH_PRICE_REGION = "us-east-2"
BENCH_INSTANCE_PRICES = SAGEMAKER_REGIONAL_PRICES[BENCH_PRICE_REGION]
AWS_PRICES = {
    "ecr:gb-month": Price(0.10, "AWS list price, ECR private storage, 2026"),
    # The TTL's alarm on its dead-letter queue (components/sagemaker/ttl.py), while the stack exists.
    "cloudwatch:alarm-month": Price(0.10, "AWS list price, CloudWatch standard-resolution alarm per metric, 2026"),
    # Per build minute, Linux build.general1.medium, on demand (aws.amazon.com/codebuild/pricing, transcribed
    # 2026-12-04 without a live read); CodeBuild bills whole minutes.
    "codebuild:general1.medium-minute": Price(0.01, "AWS CodeBuild pricing, general1.medium Linux, 2026-12-04"),
    # Per GB between two AWS regions of the US (aws.amazon.com/ec2/pricing/on-demand, data transfer, transcribed
    # 2026-12-04 without a live read): what a base image pulled from another region's registry is billed at.
    "transfer:inter-region-gb": Price(0.02, "AWS data transfer between US regions, 2026-12-04"),
}
# One image build, CodeBuild's phases as [sagemaker-gemma-repo] recorded them (reference/sagemaker-gemma.md,
# "Phase times (s)": PROVISIONING 7, PRE_BUILD 17, BUILD 191, push 565).
SAGEMAKER_BUILD_SECONDS = 7 + 17 + 191 + 565
# The base image as CodeBuild pulls it ([sagemaker-t4-article]: the AWS vLLM container, ~8 GB).
SAGEMAKER_BASE_IMAGE_BYTES = 8 * 10**9
# The tags this project puts on its endpoint (and its log group and kept repository): the Pulumi organization,
# project and stack, the three that name a stack (pulumi.com/docs/iac/concepts/stacks: "The stack name must be unique
# within a project", named in full orgName/projectName/stackName; a DIY backend's organization is "organization",
# Pulumi's automation.fullyQualifiedStackName reference, read 2026-12-06). How preflight,
# status and the account check find the stack's own endpoints among the account's: all three must match, so two
# stacks named alike in other projects or organizations never see each other's.
SAGEMAKER_ORGANIZATION_TAG = "gemma4-t4:organization"
SAGEMAKER_PROJECT_TAG = "gemma4-t4:project"
SAGEMAKER_STACK_TAG = "gemma4-t4:stack"
# The tag that says which fleet an endpoint runs: a digest of everything its model and endpoint configuration are
# made from (components/sagemaker/fleet.py). The account check compares it with the running
# endpoint's to know whether an `up` rolls out a second fleet.
SAGEMAKER_FLEET_TAG = "gemma4-t4:fleet"
# How long the AWS provider waits for a new endpoint to be InService before it fails the create
# (terraform-provider-aws, internal/service/sagemaker/endpoint.go, waitEndpointInService: timeout = 60 * time.Minute;
# pulumi-aws bridges it unchanged). An endpoint not in service by then is no longer waited for by `pulumi up`.
SAGEMAKER_ENDPOINT_CREATE_TIMEOUT_S = 60 * 60
# The port the AWS vLLM container serves /ping and /invocations on (SageMaker's container contract).
SAGEMAKER_CONTAINER_PORT = 8080
# The clamped SageMaker image as pushed ([sagemaker-t4-article]: "8.34 GiB compressed").
SAGEMAKER_IMAGE_BYTES = int(8.34 * 1024**3)


# Application Auto Scaling of an endpoint variant (docs.aws.amazon.com/sagemaker/latest/dg/
# endpoint-auto-scaling-add-code-define.html, read 2026-12-02 through its stored copy): the
# scalable target is endpoint/NAME/variant/VARIANT in the sagemaker namespace, and a
# target-tracking policy keeps a predefined metric at a value per instance.
SAGEMAKER_SCALING_NAMESPACE = "sagemaker"
SAGEMAKER_SCALABLE_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
SAGEMAKER_SCALING_METRICS = {
    # ConcurrentRequestsPerModel: requests in the container, queued ones too, each counted until
    # its last token is sent; emitted every 10 s (scales out faster than the 1-minute metrics).
    "concurrentRequests": "SageMakerVariantConcurrentRequestsPerModelHighResolution",
    # InvocationsPerInstance: requests per minute per instance.
    "invocations": "SageMakerVariantInvocationsPerInstance",
}


def sagemaker_scalable_resource_id(endpoint: str, variant: str) -> str:
    return f"endpoint/{endpoint}/variant/{variant}"


@dataclass(frozen=True)
class HostImage:
    driver_branch: int
    cuda: tuple[int, int]


SAGEMAKER_AMIS = {
    "al2-ami-sagemaker-inference-gpu-2": HostImage(535, (12, 2)),
    "al2-ami-sagemaker-inference-gpu-2-1": HostImage(535, (12, 2)),
    "al2-ami-sagemaker-inference-gpu-3-1": HostImage(550, (12, 4)),
    "al2023-ami-sagemaker-inference-gpu-4-1": HostImage(580, (13, 0)),
}
# Base image (prefix up to the tag's CUDA part) -> the CUDA its NVIDIA_REQUIRE_CUDA asks for.
SAGEMAKER_BASE_IMAGE_CUDA = {"-cu130-": (13, 0), "-cu129-": (12, 9), "-cu128-": (12, 8), "-cu124-": (12, 4)}


def cuda_required_by_image(image: str) -> tuple[int, int] | None:
    for marker, cuda in SAGEMAKER_BASE_IMAGE_CUDA.items():
        if marker in image:
            return cuda
    return None



# CodeBuild: the build environment the image is built on (7 GB, 4 vCPUs: docker build of the 8 GB base),
# and the Service Quotas quota that lets the account run builds of it. New accounts are often given 0
# ("Cannot have more than 0 builds in queue for the account", AccountLimitExceededException on StartBuild:
# aws-ia/terraform-aws-control_tower_account_factory#179, hashicorp-education/learn-terraform-aws-control-
# tower-aft#7, 2022; rebuy-de/aws-nuke#1209, 2024). The quota is read by its name, as
# awslabs/landing-zone-accelerator-on-aws's pipeline prerequisites read it (service code codebuild,
# "Concurrently running builds for Linux/Medium environment", code L-2DC20C30 in its tests; Linux/Small is
# L-9D07B6EF in the same project's quota guide), read 2026-12-04. CodeBuild queues up to five times
# the limit (docs.aws.amazon.com/codebuild/latest/userguide/builds-working.html).
CODEBUILD_COMPUTE_TYPE = "BUILD_GENERAL1_MEDIUM"
CODEBUILD_SERVICE_CODE = "codebuild"
CODEBUILD_BUILD_QUOTAS = {
    "BUILD_GENERAL1_SMALL": "Concurrently running builds for Linux/Small environment",
    "BUILD_GENERAL1_MEDIUM": "Concurrently running builds for Linux/Medium environment",
}
CODEBUILD_BUILD_QUOTA_CODES = {"BUILD_GENERAL1_SMALL": "L-9D07B6EF", "BUILD_GENERAL1_MEDIUM": "L-2DC20C30"}
# StartBuild's refusal when the account's real build limit is used up, typed: botocore ClientError code
# AccountLimitExceededException, message "Cannot have more than N builds in queue for the account" (N is five
# times the limit CodeBuild applies: builds-working.html). N = 0 is a limit of 0, and the quota Service Quotas
# shows is not the one StartBuild applies: new accounts showing 60 ("I'm seeing this issue with `Concurrently
# running builds` == 60 (default for my account) ... This is a fresh account", data-dot-all/dataall#100,
# 2022-07-24) or 20 are refused; CodeBuild's team "confirmed that their is a * next to the 20 concurrent build
# default limit, as it depends on a variety of factors such as the CodeBuild instance type, size, image,
# customer usage/rating, and the state of the AWS Account. New AWS Accounts appear to have an issue"
# (aws-quickstart/saas-identity-cognito#2, 2017-12-07). A quota request at or below the shown value is refused
# by Service Quotas ("IllegalArgumentException ... You must provide a quota value greater than the current
# quota value", cloud-custodian/cloud-custodian#8939, 2023-09-12), so only an AWS Support case raises it.
CODEBUILD_ACCOUNT_LIMIT_ERROR = "AccountLimitExceededException"
CODEBUILD_QUEUE_LIMIT = re.compile(r"Cannot have more than (\d+) builds in queue for the account")
# The endpoint's wait on a first `up` ([sagemaker-t4-article], 2026-09-30): 13.2-13.3 minutes from CreateEndpoint to
# InService on ml.g4dn.xlarge. A container that crashes at start holds the endpoint in Creating for the
# whole startup health-check window (26B: Failed 36.5 minutes after Creating, with the window at 1800 s).
SAGEMAKER_IN_SERVICE_MINUTES = 13.3
# The shortest startup health-check window a T4 serves in: [sagemaker-t4-article] says a small model that loads within
# two minutes needs "a few hundred seconds"; below 300 s the endpoint fails while vLLM still downloads,
# loads and compiles (CUDA graphs) on the T4.
SAGEMAKER_MIN_STARTUP_HEALTH_CHECK_S = 300

# The manifest type SageMaker's CreateModel accepts for an ECR image. It refuses OCI manifests and
# indexes: "Unsupported manifest media type application/vnd.oci.image.manifest.v1+json for image ...
# Ensure that valid manifest media type is used for specified image." (ValidationException, 400:
# aws/amazon-sagemaker-feedback#180, 2025-04-28; moby/buildkit#5480, 2024-11-03).
SAGEMAKER_MANIFEST_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
# The platform every image for an ml.g4dn host is built and pushed for: G4dn instances run Intel Xeon (x86_64)
# processors (aws.amazon.com/ec2/instance-types/g4, "G4dn instances": 2nd Generation Intel Xeon Scalable), and
# the AWS vLLM SageMaker container is published for linux/amd64 alone. A build on an arm64 machine without it
# emulates, or builds for arm64.
SAGEMAKER_IMAGE_PLATFORM = "linux/amd64"

# The AWS provider's own config keys (aws:*), as pulumi-aws 7.51.1 reads them (pulumi_aws/config/vars.py);
# plus assumeRole, pulumi-aws 6's single role (build_environment still reads it). A test holds the list equal
# to the installed provider's. Any other aws:* key is a typo the provider ignores: aws:regoin would leave the
# endpoint in the default region.
PULUMI_AWS_CONFIG_KEYS = frozenset({
    "accessKey", "allowedAccountIds", "assumeRoleWithWebIdentity", "assumeRoles", "customCaBundle", "defaultTags",
    "ec2MetadataServiceEndpoint", "ec2MetadataServiceEndpointMode", "endpoints", "forbiddenAccountIds", "httpProxy",
    "httpsProxy", "ignoreTags", "insecure", "maxRetries", "noProxy", "profile", "region", "retryMode",
    "s3UsEast1RegionalEndpoint", "s3UsePathStyle", "secretKey", "sharedConfigFiles", "sharedCredentialsFiles",
    "skipCredentialsValidation", "skipMetadataApiCheck", "skipRegionValidation", "skipRequestingAccountId",
    "stsRegion", "tagPolicyCompliance", "token", "tokenBucketRateLimiterCapacity", "useDualstackEndpoint",
    "useFipsEndpoint", "userAgents"})
PULUMI_AWS_LEGACY_CONFIG_KEYS = frozenset({"assumeRole"})

# A private ECR image reference: ACCOUNT.dkr.ecr.REGION.amazonaws.com[.cn]/NAME(:TAG|@sha256:DIGEST).
# SageMaker pulls only from ECR ("Using a Public Gallery image ... is not supported").
ECR_IMAGE = re.compile(r"(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/"
                       r"(?P<name>[a-z0-9]+(?:[._/-][a-z0-9]+)*)"
                       r"(?::[\w][\w.-]{0,127}(?:@sha256:[0-9a-f]{64})?|@sha256:[0-9a-f]{64})")

# --- What the endpoint leaves behind, and its secrets ---------------------------------------------------

# SageMaker writes an endpoint's container logs to this group, creating it (without a retention) if it is
# missing (SageMaker developer guide, "Log Amazon SageMaker AI events with Amazon CloudWatch": log group
# /aws/sagemaker/Endpoints/[EndpointName]; [sagemaker-t4-article] read its logs there).
SAGEMAKER_ENDPOINT_LOG_GROUP = "/aws/sagemaker/Endpoints/{endpoint}"
# The retentions CloudWatch Logs accepts, in days (PutRetentionPolicy's retentionInDays, botocore's logs model,
# shape Days: "Possible values are: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827,
# 2192, 2557, 2922, 3288, and 3653"); any other number is refused by the API at `up`.
CLOUDWATCH_LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192,
                                 2557, 2922, 3288, 3653)
# SageMaker endpoint names: 1-63 letters, digits and dashes, a letter or digit at each end (CreateEndpoint,
# EndpointName: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}).
SAGEMAKER_ENDPOINT_NAME_MAX = 63

# The AWS vLLM SageMaker container's entrypoint (aws/deep-learning-containers, docker/vllm/Dockerfile, stage
# vllm-sagemaker: ENTRYPOINT ["/usr/local/bin/sagemaker_entrypoint.sh"]) and the Python library its common
# stage installs for the system Python (`uv pip install --system botocore packaging`), read 2026-12-04: the
# clamped image's wrapper reads the token's secret with that botocore, then execs that entrypoint.
SAGEMAKER_BASE_ENTRYPOINT = "/usr/local/bin/sagemaker_entrypoint.sh"
# The model's environment variable holding the token's Secrets Manager ARN (never the token itself, which
# DescribeModel would show to anyone allowed to describe models).
HF_TOKEN_SECRET_ENV = "HF_TOKEN_SECRET_ARN"

# Partitions: ARNs are written arn:aws:... and the base image lives in the aws partition's registry, so only
# that partition is served. botocore's endpoint data names the others' region prefixes (China cn-, AWS
# GovCloud us-gov-, ISO us-iso-/us-isob-/eu-isoe-/us-isof-).
AWS_PARTITION = "aws"
OTHER_PARTITION_REGION_PREFIXES = {"cn-": "aws-cn (China)", "us-gov-": "aws-us-gov (GovCloud)",
                                   "us-iso-": "aws-iso", "us-isob-": "aws-iso-b", "us-isof-": "aws-iso-f",
                                   "eu-isoe-": "aws-iso-e"}


# --- Who may assume the stack's roles, and what the stack's storage keeps ---------------------------------

# The aws:SourceArn each service sends when it assumes a role, for the trust policies against the cross-service
# confused deputy (IAM user guide, "The confused deputy problem"). Each from the service's own page, read
# 2026-12-05:
# - SageMaker AI inference (real-time, serverless, asynchronous endpoints): ArnLike aws:SourceArn
#   arn:aws:sagemaker:REGION:ACCOUNT:* and nothing narrower ("Do not replace the aws:SourceArn in this template
#   with the full ARN of a specific model or endpoint ... The asterisk in the ARN template does not stand for
#   wildcard and should not be changed"); the account is in the ARN, so "you do not need to specify an
#   aws:SourceAccount value" (SageMaker developer guide, "Cross-service confused deputy prevention", section
#   "SageMaker AI Inference", docs.aws.amazon.com/sagemaker/latest/dg/security-confused-deputy-prevention.html).
# - CodeBuild: aws:SourceAccount, the project's owner, and aws:SourceArn, the project's ARN, a wildcard where the
#   name is not known yet (CodeBuild user guide, "Allow CodeBuild to interact with other AWS services",
#   docs.aws.amazon.com/codebuild/latest/userguide/setting-up-service-role.html).
# - EventBridge Scheduler: aws:SourceAccount and aws:SourceArn, which "must be your EventBridge Scheduler schedule
#   group ARN"; "Do not scope the aws:SourceArn statement to a specific schedule" (EventBridge Scheduler user
#   guide, "Confused deputy prevention",
#   docs.aws.amazon.com/scheduler/latest/UserGuide/cross-service-confused-deputy-prevention.html). A schedule
#   made without a group name is in the account's group named default (Scheduler API reference, CreateSchedule,
#   GroupName; pulumi-aws's scheduler.Schedule, groupName: when omitted, the default schedule group).
SAGEMAKER_TRUST_SOURCE_ARN = "arn:{partition}:sagemaker:{region}:{account}:*"
CODEBUILD_TRUST_SOURCE_ARN = "arn:{partition}:codebuild:{region}:{account}:project/{project}"
SCHEDULER_TRUST_SOURCE_ARN = "arn:{partition}:scheduler:{region}:{account}:schedule-group/{group}"
SCHEDULER_DEFAULT_GROUP = "default"
# How long ECR keeps an image that lost its tag or never had one (a push cut short; a tagged image is never
# touched by a rule that selects tagStatus untagged): ECR user guide, "Examples of lifecycle policies in Amazon
# ECR" (tagStatus untagged, countType sinceImagePushed, countUnit days), docs.aws.amazon.com/AmazonECR/latest/
# userguide/lifecycle_policy_examples.html. The image the endpoint serves is tagged (IMMUTABLE tags).
ECR_UNTAGGED_EXPIRY_DAYS = 1
# A bucket policy that denies every request not made over TLS: the condition aws:SecureTransport false (S3 user
# guide, "Security best practices for Amazon S3", enforce encryption of data in transit,
# docs.aws.amazon.com/AmazonS3/latest/userguide/security-best-practices.html; AWS Knowledge Center,
# repost.aws/knowledge-center/s3-bucket-policy-for-config-rule).
S3_INSECURE_TRANSPORT = {"Bool": {"aws:SecureTransport": "false"}}


def other_partition(region: str) -> str | None:
    """The partition REGION belongs to when it is not aws (None: the aws partition)."""
    return next((name for prefix, name in OTHER_PARTITION_REGION_PREFIXES.items() if region.startswith(prefix)),
                None)


# The startup health-check window the default model needs, from measured parts (each with its source):
# - 362 s from start to a healthy server on a warm compile cache, weights already on disk ([gce-t4-article]: "vllm-t4:
#   healthy after 362s", E2B QAT on one T4, n1-standard-2);
# - 113 s more for the first torch.compile, which every new SageMaker instance pays ([gce-t4-article]: "112.77 s on the
#   first start of this stack" against 2.59 s warm);
# - the 8.3 GB QAT checkpoint downloaded from the Hub at start ([gce-t4-article]: "the QAT build is 8.3 GB"), at
#   50 MB/s:
#   below the slowest cold-CDN figure Hugging Face published for a Hub download from AWS (65 MB/s for a 100 MB
#   file, 261 MB/s for 1 GB, on m5dn.24xlarge in us-east-1: h-m-t-hf-buckets-benchmark.static.hf.space,
#   read 2026-12-04). A stated planning figure, not a measurement on g4dn.
# The sum is one run of each; the window takes half as much again (single runs, a shared Hub), rounded up to
# the minute. A container that crashes holds the endpoint in Creating for the whole window ([sagemaker-t4-article]),
# so it is not made longer than that.
SAGEMAKER_WARM_START_S = 362
SAGEMAKER_FIRST_COMPILE_S = 113
DEFAULT_MODEL_DOWNLOAD_BYTES = int(8.3e9)
HUB_DOWNLOAD_BYTES_PER_S = 50e6
STARTUP_WINDOW_MARGIN = 1.5


def startup_health_check_window_s(download_bytes: int = DEFAULT_MODEL_DOWNLOAD_BYTES) -> int:
    """Seconds for a T4 endpoint to download, load and compile the model before it answers /ping."""
    measured = SAGEMAKER_WARM_START_S + SAGEMAKER_FIRST_COMPILE_S + download_bytes / HUB_DOWNLOAD_BYTES_PER_S
    return -(-int(measured * STARTUP_WINDOW_MARGIN) // 60) * 60


SAGEMAKER_DEFAULT_STARTUP_HEALTH_CHECK_S = startup_health_check_window_s()

# pulumi-aws's aws:endpoints keys (the Terraform provider's service names) -> botocore's client names, for the
# services the local steps call with boto3 (build, account check, endpoint watch). botocore reads a service's
# endpoint from AWS_ENDPOINT_URL_<its service id, snake case> (botocore configprovider, "configured
# endpoints"), which is not the Terraform name: servicequotas is SERVICE_QUOTAS, logs is CLOUDWATCH_LOGS.
PULUMI_AWS_ENDPOINT_CLIENTS = {
    "appautoscaling": "application-autoscaling", "applicationautoscaling": "application-autoscaling",
    "cloudwatchlog": "logs", "cloudwatchlogs": "logs", "logs": "logs", "codebuild": "codebuild", "ecr": "ecr",
    "iam": "iam", "s3": "s3", "sagemaker": "sagemaker", "scheduler": "scheduler",
    "secretsmanager": "secretsmanager", "servicequotas": "service-quotas", "sqs": "sqs", "sts": "sts"}
