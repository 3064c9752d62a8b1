#!/usr/bin/env bash
# Log docker in to an ECR registry from CodeBuild, retried while the build role's permissions propagate:
# IAM is eventually consistent, and a role made seconds before the build may still be refused
# ecr:GetAuthorizationToken ("... is not authorized to perform: ecr:GetAuthorizationToken on resource: *").
# Still refused for permissions after the last try: exit 3, and the build step starts the build again
# (components/scripts/codebuild_run.py, LOGIN_DENIED_STATUS). Any other failure exits 1: not restarted.
# Usage: ecr-login.sh REGION REGISTRY [TRIES [WAIT_S]]
set -euo pipefail
region=$1 registry=$2 tries=${3:-6} wait_s=${4:-10}
errors=$(mktemp)
for attempt in $(seq 1 "$tries"); do
  if password=$(aws ecr get-login-password --region "$region" 2>"$errors"); then
    printf '%s' "$password" | docker login --username AWS --password-stdin "$registry"
    exit 0
  fi
  cat "$errors" >&2
  if ! grep -q -e AccessDenied -e "not authorized" "$errors"; then
    echo "ecr-login: $registry: refused for another reason than permissions: not retried" >&2
    exit 1
  fi
  if [ "$attempt" -eq "$tries" ]; then
    echo "ecr-login: $registry: still refused after $tries tries: the build role lacks ecr:GetAuthorizationToken" >&2
    exit 3
  fi
  echo "ecr-login: $registry: refused (try $attempt of $tries), the role's permissions may not have propagated;" \
       "trying again in ${wait_s}s" >&2
  sleep "$wait_s"
done
