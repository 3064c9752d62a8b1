#!/usr/bin/env bash
# Build the clamped image as a Docker v2 schema 2 manifest, the only kind SageMaker's CreateModel takes:
# no provenance or SBOM attestations (with them BuildKit pushes an OCI index, which CreateModel refuses:
# aws/amazon-sagemaker-feedback#180, moby/buildkit#5480), exported to docker's own store.
# The build step reads the pushed manifest's type from ECR and refuses anything else.
# Usage: build-image.sh BASE_IMAGE TARGET
set -euo pipefail
base=$1 target=$2
if docker buildx version >/dev/null 2>&1; then
  docker buildx build --provenance=false --sbom=false --output type=docker \
    --build-arg BASE_IMAGE="$base" --tag "$target" .
else
  # The classic builder makes no attestations.
  docker build --build-arg BASE_IMAGE="$base" --tag "$target" .
fi
