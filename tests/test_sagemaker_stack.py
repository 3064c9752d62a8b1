"""The sagemaker-t4 stack's graph under Pulumi mocks, its bad input, and the image build files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import REPO, require_tool, run

from components import image_build
from gemma4_t4 import catalog
from gemma4_t4.plan import SECRET_PLACEHOLDER

MODEL = "aws:sagemaker/model:Model"
CONFIG = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
COMMAND = "command:local:Command"
POLICY = "aws:iam/rolePolicy:RolePolicy"


def _policy(plan, name: str) -> dict:
    return json.loads(plan.find(POLICY, name)[0].inputs["policy"])


def test_variant_pins_the_driver_580_host_image_on_one_g4dn_xlarge(run_stack):
    variant = run_stack("sagemaker-t4").one(CONFIG).inputs["productionVariants"]
    assert variant == [{
        "variantName": "AllTraffic", "modelName": "gemma4-t4-model", "instanceType": "ml.g4dn.xlarge",
        "initialInstanceCount": 1.0, "inferenceAmiVersion": "al2023-ami-sagemaker-inference-gpu-4-1",
        "containerStartupHealthCheckTimeoutInSeconds": 900.0, "modelDataDownloadTimeoutInSeconds": 1800.0}]


def test_model_runs_the_built_image_by_digest_after_the_build(run_stack):
    plan = run_stack("sagemaker-t4")
    model = plan.one(MODEL)
    assert f"{COMMAND}::gemma4-t4-image-codebuild-run" in model.options["dependsOn"]
    image = model.inputs["primaryContainer"]["image"]
    assert image == f"123456789012.dkr.ecr.mock.amazonaws.com/gemma4-t4-image-repo@sha256:{'0' * 64}"
    assert plan.outputs["image_uri"] == image


def test_model_environment_is_the_serving_config_as_sm_vllm(run_stack):
    env = run_stack("sagemaker-t4").one(MODEL).inputs["primaryContainer"]["environment"]
    assert env == {
        "SM_VLLM_MODEL": "google/gemma-4-E2B-it-qat-w4a16-ct",
        "SM_VLLM_SERVED_MODEL_NAME": "google/gemma-4-E2B-it-qat-w4a16-ct",
        "SM_VLLM_DTYPE": "float16", "SM_VLLM_MAX_MODEL_LEN": "8192", "SM_VLLM_GPU_MEMORY_UTILIZATION": "0.9",
        "SM_VLLM_MAX_NUM_SEQS": "8", "SM_VLLM_LANGUAGE_MODEL_ONLY": "true"}


def test_execution_role_can_only_pull_this_repository_and_write_endpoint_logs(run_stack):
    plan = run_stack("sagemaker-t4")
    statements = {s["Sid"]: s for s in _policy(plan, "gemma4-t4-execution-policy")["Statement"]}
    assert set(statements) == {"EcrLogin", "PullImage", "EndpointLogs", "Metrics"}
    assert statements["PullImage"]["Resource"] == "arn:aws:mock:::gemma4-t4-image-repo"
    assert statements["EndpointLogs"]["Resource"] == "arn:aws:logs:us-east-2:*:log-group:/aws/sagemaker/Endpoints/*"
    actions = [a for s in statements.values() for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])]
    assert not any(a.startswith(("sagemaker:", "s3:", "iam:")) or a.endswith("*") for a in actions)
    assert not plan.find("aws:iam/rolePolicyAttachment:RolePolicyAttachment"), "no managed policy (FullAccess)"
    trust = json.loads(plan.find("aws:iam/role:Role", "gemma4-t4-execution")[0].inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "sagemaker.amazonaws.com"}


def test_build_role_reads_the_context_pulls_the_base_and_pushes_only_our_repository(run_stack):
    statements = {s["Sid"]: s for s in _policy(run_stack("sagemaker-t4"), "gemma4-t4-image-build-role-policy")["Statement"]}
    assert statements["Context"]["Resource"] == "arn:aws:mock:::gemma4-t4-image-context/context/*"
    assert statements["PullBase"]["Resource"] == "arn:aws:ecr:us-east-2:763104351884:repository/vllm"
    assert statements["PushImage"]["Resource"] == "arn:aws:mock:::gemma4-t4-image-repo"
    assert "ecr:PutImage" in statements["PushImage"]["Action"]
    assert statements["Logs"]["Resource"] == "arn:aws:mock:::gemma4-t4-image-build-logs:*"


def test_source_bucket_is_private_and_encrypted(run_stack):
    plan = run_stack("sagemaker-t4")
    block = plan.one("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock").inputs
    assert all(block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls",
                                          "restrictPublicBuckets"))
    sse = plan.one("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    assert sse.inputs["rules"] == [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]
    assert plan.one("aws:s3/bucket:Bucket").inputs["forceDestroy"] is True


def test_repository_scans_on_push_has_immutable_tags_and_goes_with_destroy(run_stack):
    plan = run_stack("sagemaker-t4")
    repo = plan.one("aws:ecr/repository:Repository")
    assert repo.inputs["imageTagMutability"] == "IMMUTABLE"
    assert repo.inputs["imageScanningConfiguration"] == {"scanOnPush": True}
    assert repo.inputs["forceDelete"] is True and repo.options["retainOnDelete"] is False
    assert plan.outputs["billing_after_destroy_usd_per_month"] == 0.0
    kept = run_stack("sagemaker-t4", "keepImages=true")
    repo = kept.one("aws:ecr/repository:Repository")
    assert repo.inputs["forceDelete"] is False and repo.options["retainOnDelete"] is True
    assert kept.outputs["billing_after_destroy_usd_per_month"] > 0


def test_codebuild_builds_privileged_from_the_uploaded_context(run_stack):
    plan = run_stack("sagemaker-t4")
    project = plan.one("aws:codebuild/project:Project").inputs
    assert project["environment"]["privilegedMode"] is True
    variables = {v["name"]: v["value"] for v in project["environment"]["environmentVariables"]}
    tag = f"vllm-{catalog.PINS['vllm.sagemaker']}-sm75-{image_build.context_hash(catalog.PINS['sagemaker.base_image'])}"
    assert variables == {"BASE_IMAGE": catalog.PINS["sagemaker.base_image"],
                         "TARGET_REPO": "123456789012.dkr.ecr.mock.amazonaws.com/gemma4-t4-image-repo",
                         "TARGET_TAG": tag}
    archive = plan.one("aws:s3/bucketObjectv2:BucketObjectv2").inputs
    assert archive["key"] == f"context/{tag}.zip"
    assert project["source"] == {"type": "S3", "location": f"gemma4-t4-image-context-id/context/{tag}.zip"}
    assert set(archive["source"]["archive"]) == {"Dockerfile", "buildspec.yml", "pyproject.toml",
                                                 *[f"turing_clamp/{p.name}" for p in
                                                   (REPO / "turing" / "turing_clamp").glob("*.py")]}
    build = plan.one(COMMAND)
    assert build.inputs["triggers"] == [tag]
    assert build.inputs["create"] == "bash components/scripts/codebuild-run.sh"


def test_a_changed_clamp_changes_the_tag_and_an_unchanged_one_does_not(tmp_path, monkeypatch):
    base = catalog.PINS["sagemaker.base_image"]
    before = image_build.context_hash(base)
    assert image_build.context_hash(base) == before
    copy = tmp_path / "turing"
    shutil.copytree(REPO / "turing", copy, ignore=shutil.ignore_patterns("results", "__pycache__", "*.egg-info"))
    monkeypatch.setattr(image_build, "CONTEXT_DIR", copy)
    assert image_build.context_hash(base) == before
    (copy / "turing_clamp" / "policy.py").write_text((copy / "turing_clamp" / "policy.py").read_text() + "\n# edit\n")
    assert image_build.context_hash(base) != before
    assert image_build.context_hash(base.replace("v1.3", "v1.4")) != image_build.context_hash(base)


def test_outputs(run_stack):
    out = run_stack("sagemaker-t4").outputs
    assert out["endpoint_name"] == "gemma4-t4-endpoint" and out["region"] == "us-east-2"
    assert out["cost_per_hour_usd"] == catalog.SAGEMAKER_PRICES["ml.g4dn.xlarge"].usd_per_hour
    assert out["invoke_example"].startswith("aws sagemaker-runtime invoke-endpoint --region us-east-2 "
                                            "--endpoint-name gemma4-t4-endpoint")


def test_hf_token_only_as_a_secret(run_stack, refused_stack, tmp_path):
    error, partial = refused_stack("sagemaker-t4", "hfToken=hf_plain")
    assert error.key == "gemma4-t4:hfToken" and "--secret" in str(error) and partial.resources == []
    from gemma4_t4 import plan as plan_mod

    config = plan_mod.load_stack_config("sagemaker-t4")
    config["gemma4-t4:hfToken"] = {"secure": "AAABAGVuY3J5cHRlZA=="}
    plan = plan_mod.run_program("sagemaker-t4", config)
    # A secret inside makes the whole container a secret, as the engine stores it.
    assert plan.one(MODEL).inputs["primaryContainer"] == SECRET_PLACEHOLDER
    assert "AAABAGVuY3J5cHRlZA" not in json.dumps(plan.as_json())


REFUSED = [
    ("inferenceAmiVersion=al2-ami-sagemaker-inference-gpu-3-1", "gemma4-t4:inferenceAmiVersion",
     "inferenceAmiVersion al2023-ami-sagemaker-inference-gpu-4-1"),
    ("inferenceAmiVersion=al2-ami-sagemaker-inference-gpu-2", "gemma4-t4:inferenceAmiVersion", "gpu-4-1"),
    ("inferenceAmiVersion=some-ami", "gemma4-t4:inferenceAmiVersion", "gpu-4-1"),
    ("instanceType=ml.g6.xlarge", "gemma4-t4:instanceType", "allowNonT4Instance true"),
    ("startupHealthCheckTimeoutSeconds=30", "gemma4-t4:startupHealthCheckTimeoutSeconds", "900"),
    ("startupHealthCheckTimeoutSeconds=4000", "gemma4-t4:startupHealthCheckTimeoutSeconds", "900"),
    ("modelDataDownloadTimeoutSeconds=59", "gemma4-t4:modelDataDownloadTimeoutSeconds", "900"),
    ("dtype=bfloat16", "gemma4-t4:dtype", "dtype float16"),
    ("model=google/gemma-4-26B-A4B-it-qat-w4a16-ct", "gemma4-t4:model", "allowModelOverflow true"),
    ("model=", "gemma4-t4:model", "gemma4-t4:model"),
    ("baseImage=", "gemma4-t4:baseImage", "baseImage 763104351884"),
    ("instanceCount=0", "gemma4-t4:instanceCount", "instanceCount 1"),
]


@pytest.mark.parametrize("override,key,fix", REFUSED, ids=[r[0] for r in REFUSED])
def test_bad_input_is_refused_before_any_resource(refused_stack, override, key, fix):
    error, partial = refused_stack("sagemaker-t4", override)
    assert error.key == key and fix in str(error)
    assert partial.resources == []


def test_cu130_image_on_a_driver_550_host_names_the_reason(refused_stack):
    error, _ = refused_stack("sagemaker-t4", "inferenceAmiVersion=al2-ami-sagemaker-inference-gpu-3-1")
    assert "driver 550 (CUDA 12.4)" in str(error) and "needs CUDA 13.0" in str(error)
    assert "CannotStartContainerError" in str(error)


def test_an_l4_instance_is_allowed_with_the_opt_in(run_stack):
    plan = run_stack("sagemaker-t4", "instanceType=ml.g6.xlarge", "allowNonT4Instance=true", "dtype=bfloat16")
    assert plan.outputs["cost_per_hour_usd"] == catalog.SAGEMAKER_PRICES["ml.g6.xlarge"].usd_per_hour


def test_project_defaults_match_the_catalog_pins():
    config = yaml.safe_load((REPO / "Pulumi.yaml").read_text())["config"]
    assert config["baseImage"]["default"] == catalog.PINS["sagemaker.base_image"]
    assert config["inferenceAmiVersion"]["default"] == catalog.PINS["sagemaker.ami"]
    assert f"vllm:{catalog.PINS['vllm.sagemaker']}-" in catalog.PINS["sagemaker.base_image"]


# --- the image build files -------------------------------------------------------------------


def test_dockerfile_is_hadolint_clean():
    result = run([require_tool_in_venv("hadolint"), str(REPO / "turing" / "Dockerfile")])
    assert result.returncode == 0, result.stdout + result.stderr


def require_tool_in_venv(name: str) -> str:
    import sys

    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else require_tool(name)


def test_dockerfile_keeps_the_entrypoint_and_gates_the_build():
    text = (REPO / "turing" / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert lines[:2] == ["ARG BASE_IMAGE", "FROM ${BASE_IMAGE}"]
    assert not any(line.startswith(("ENTRYPOINT", "CMD")) for line in lines), "SM_VLLM_* need the base entrypoint"
    for gate in ("-m turing_clamp check", "-m turing_clamp fit --strict", "'sm_75' in flags"):
        assert gate in text


def test_buildspec_has_the_phases_a_push_needs():
    spec = yaml.safe_load((REPO / "turing" / "buildspec.yml").read_text())
    assert spec["version"] == 0.2
    assert spec["env"]["exported-variables"] == ["IMAGE_DIGEST"]
    phases = spec["phases"]
    assert list(phases) == ["pre_build", "build", "post_build"]
    logins = [c for c in phases["pre_build"]["commands"] if "docker login" in c]
    assert len(logins) == 2 and any("base_registry" in c for c in logins) and any("TARGET_REPO" in c for c in logins)
    assert phases["build"]["commands"] == ['docker build --build-arg BASE_IMAGE="$BASE_IMAGE" --tag '
                                           '"$TARGET_REPO:$TARGET_TAG" .']
    post = "\n".join(phases["post_build"]["commands"])
    assert 'docker push "$TARGET_REPO:$TARGET_TAG"' in post and "IMAGE_DIGEST=" in post
    assert all(phases[p].get("on-failure") == "ABORT" for p in phases)


# --- codebuild-run.sh against a stand-in aws CLI -------------------------------------------------

FAKE_AWS = r"""#!/bin/bash
echo "$*" >>"$AWS_LOG"
case "$1 $2" in
  "ecr describe-images") [ -n "${EXISTING:-}" ] && echo "$EXISTING" || { echo "ImageNotFoundException" >&2; exit 254; } ;;
  "codebuild start-build") echo "gemma4-t4-image-build:1234" ;;
  "codebuild batch-get-builds")
    if [[ "$*" == *exportedEnvironmentVariables* ]]; then echo "${DIGEST:-None}"; exit 0; fi
    n=$(($(cat "$STATE" 2>/dev/null || echo 0) + 1)); echo "$n" >"$STATE"
    [ "$n" -lt 3 ] && echo IN_PROGRESS || echo "$FINAL" ;;
esac
"""


@pytest.fixture
def fake_aws(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aws").write_text(FAKE_AWS)
    (bin_dir / "aws").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "AWS_LOG": str(tmp_path / "aws.log"),
           "STATE": str(tmp_path / "state"), "POLL_S": "0", "PROJECT": "gemma4-t4-image-build",
           "REGION": "us-east-2", "REPOSITORY_NAME": "repo", "TAG": "vllm-0.30.0-sm75-abc",
           "SOURCE_LOCATION": "bucket/context/x.zip"}

    def call(**extra):
        result = run(["bash", str(REPO / "components" / "scripts" / "codebuild-run.sh")], env={**env, **extra})
        log = (tmp_path / "aws.log").read_text() if (tmp_path / "aws.log").exists() else ""
        return result, log

    return call


def test_build_success_prints_the_digest(fake_aws):
    result, log = fake_aws(FINAL="SUCCEEDED", DIGEST="sha256:" + "a" * 64)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "sha256:" + "a" * 64
    assert "--source-location-override bucket/context/x.zip" in log


def test_build_failure_fails_with_build_id_and_log_link(fake_aws):
    result, _ = fake_aws(FINAL="FAILED")
    assert result.returncode == 1 and result.stdout == ""
    assert "gemma4-t4-image-build:1234 ended FAILED" in result.stderr
    assert ("https://us-east-2.console.aws.amazon.com/codesuite/codebuild/projects/gemma4-t4-image-build/build/"
            "gemma4-t4-image-build%3A1234/log?region=us-east-2") in result.stderr


def test_success_without_a_digest_is_a_failure(fake_aws):
    result, _ = fake_aws(FINAL="SUCCEEDED")
    assert result.returncode == 1 and "exported no image digest" in result.stderr


def test_an_existing_tag_is_reused_not_rebuilt(fake_aws):
    result, log = fake_aws(EXISTING="sha256:" + "b" * 64, FINAL="FAILED")
    assert result.returncode == 0 and result.stdout.strip() == "sha256:" + "b" * 64
    assert "start-build" not in log
