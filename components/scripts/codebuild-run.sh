#!/bin/bash
# Run by `pulumi up` (a pulumi_command local Command): start the CodeBuild build of the clamped
# image and wait for it. Prints the image digest on stdout. On failure exits non-zero naming the
# build id and its log link, which fails `pulumi up`. A tag already in the (immutable) repository
# is not rebuilt: its digest is reused.
set -euo pipefail

: "${PROJECT:?}" "${REGION:?}" "${REPOSITORY_NAME:?}" "${TAG:?}" "${SOURCE_LOCATION:?}"
timeout_s=${TIMEOUT_S:-5400}
poll_s=${POLL_S:-20}
say() { echo "codebuild-run: $*" >&2; }

existing=$(aws ecr describe-images --region "$REGION" --repository-name "$REPOSITORY_NAME" \
  --image-ids "imageTag=$TAG" --query 'imageDetails[0].imageDigest' --output text 2>/dev/null || true)
if [[ $existing == sha256:* ]]; then
  say "$REPOSITORY_NAME:$TAG already built ($existing): not rebuilding"
  echo "$existing"
  exit 0
fi

build_id=$(aws codebuild start-build --region "$REGION" --project-name "$PROJECT" \
  --source-location-override "$SOURCE_LOCATION" --query build.id --output text)
log_link="https://$REGION.console.aws.amazon.com/codesuite/codebuild/projects/$PROJECT/build/${build_id//:/%3A}/log?region=$REGION"
say "started $build_id; log: $log_link"

started=$SECONDS
while :; do
  status=$(aws codebuild batch-get-builds --region "$REGION" --ids "$build_id" \
    --query 'builds[0].buildStatus' --output text)
  case $status in
    SUCCEEDED) break ;;
    IN_PROGRESS) ;;
    *)
      say "build $build_id ended $status; log: $log_link"
      exit 1
      ;;
  esac
  if ((SECONDS - started > timeout_s)); then
    say "build $build_id still running after ${timeout_s}s; log: $log_link"
    exit 1
  fi
  sleep "$poll_s"
done

digest=$(aws codebuild batch-get-builds --region "$REGION" --ids "$build_id" \
  --query "builds[0].exportedEnvironmentVariables[?name=='IMAGE_DIGEST'].value | [0]" --output text)
if [[ $digest != sha256:* ]]; then
  say "build $build_id succeeded but exported no image digest ($digest); log: $log_link"
  exit 1
fi
say "built $REPOSITORY_NAME:$TAG @ $digest in $((SECONDS - started))s"
echo "$digest"
