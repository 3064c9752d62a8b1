"""Where the image is kept: the private ECR repository (with keepImages, a fixed name that survives destroy and is
adopted again, refused where it is another stack's or where keepImages off would leave it billing), whose untagged
images expire; and the private, encrypted, TLS-only bucket CodeBuild reads the build context from."""

import json
import shlex

import pulumi
import pulumi_aws as aws

from gemma4_t4 import catalog
from gemma4_t4.errors import ConfigError, Set

from ..provider_answers import USE_PROVIDER_MOCKS, provider_message
from . import provider_answers as answers
from .build_context import build_context_files
from .scope import StackScope

APP = "gemma4-t4"


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
                          f"(it adopts a kept one): {provider_message(error)}",
                          "let the account `pulumi up` runs as call ecr:DescribeRepositories, "
                          "ecr:ListTagsForResource and ecr:DescribeImages in the region (e.g. the "
                          "AmazonEC2ContainerRegistryReadOnly policy), or check the AWS provider's region and "
                          "profile") from None
    if not found.repository_url:
        raise ConfigError("keepImages", f"{answers.GET_REPOSITORY} answered without a repository for {name}, "
                          "which the provider never does (a missing repository is its error "
                          f"'{answers.repository_not_found(name)}')", USE_PROVIDER_MOCKS)
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


def image_repository(name: str, kept: str | None, adopt: str | None, tags: dict[str, str],
                     parent: pulumi.Resource) -> aws.ecr.Repository:
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
        opts=pulumi.ResourceOptions(parent=parent, retain_on_delete=keep_images, import_=adopt),
    )
    # Images without a tag (a push cut short) expire; the tagged image the endpoint serves never does.
    aws.ecr.LifecyclePolicy(f"{name}-repo-lifecycle", repository=repository.name, policy=json.dumps(
        untagged_expiry_policy()), opts=pulumi.ResourceOptions(parent=parent))
    return repository


def untagged_expiry_policy() -> dict:
    """The repository's lifecycle: an image without a tag expires after a day; a rule that selects tagStatus
    untagged never touches a tagged image (the one the endpoint serves by digest has its immutable tag)."""
    return {"rules": [{"rulePriority": 1, "description": "Expire untagged images",
                       "selection": {"tagStatus": "untagged", "countType": "sinceImagePushed", "countUnit": "days",
                                     "countNumber": catalog.ECR_UNTAGGED_EXPIRY_DAYS},
                       "action": {"type": "expire"}}]}


def context_bucket(name: str, tag: str, tags: dict[str, str], after: list, parent: pulumi.Resource
                   ) -> tuple[aws.s3.Bucket, aws.s3.BucketObjectv2]:
    """The build context (the files whose hash is the tag) in a private, encrypted bucket that takes TLS only."""
    child = pulumi.ResourceOptions(parent=parent)
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
        opts=pulumi.ResourceOptions(parent=parent, depends_on=after))
    return bucket, context


def tls_only_policy(bucket_arn: str) -> dict:
    """The build context bucket refuses every request not made over TLS, from anyone."""
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "TlsOnly", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
        "Resource": [bucket_arn, f"{bucket_arn}/*"], "Condition": catalog.S3_INSECURE_TRANSPORT}]}
