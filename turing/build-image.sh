#!/usr/bin/env bash
# Build the clamped image as a Docker v2 schema 2 manifest, the only kind SageMaker's CreateModel takes:
# no provenance or SBOM attestations (with them BuildKit pushes an OCI index, which CreateModel refuses:
# aws/amazon-sagemaker-feedback#180, moby/buildkit#5480), exported to docker's own store.
# The build step reads the pushed manifest's type from ECR and refuses anything else.
# Used by CodeBuild (buildspec.yml) and by imageBuilder docker on the user's machine
# (components/scripts/local_build.py), which may add build arguments.
# Usage: build-image.sh BASE_IMAGE TARGET [--build-arg NAME=VALUE ...]
set -euo pipefail
base=$1 target=$2
shift 2
if docker buildx version >/dev/null 2>&1; then
  docker buildx build --provenance=false --sbom=false --output type=docker \
    --build-arg BASE_IMAGE="$base" "$@" --tag "$target" .
else
  # The classic builder makes no attestations.
  docker build --build-arg BASE_IMAGE="$base" "$@" --tag "$target" .
fi
