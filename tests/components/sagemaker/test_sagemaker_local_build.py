"""imageBuilder local: the image built on the machine that runs `pulumi up` instead of CodeBuild.

The graph under Pulumi mocks (no CodeBuild, the Model on the local step's digest); the step
(components/sagemaker/steps/local_build.py) as `pulumi up` runs it, a subprocess, with its ECR calls against moto's
server on loopback; and once, marked `image`, for real: buildah builds the Dockerfile on the stand-in base
(the one test_sagemaker_image.py builds and keeps), pulled by digest from Debian's distribution registry
(`docker-registry`) on loopback, and pushes the result there. moto's GetAuthorizationToken answers a
proxyEndpoint of its own (ACCOUNT.dkr.ecr.REGION.amazonaws.com); the step's documented test-only override
(local_build.TEST_OVERRIDE_ENV) points every registry at the loopback one.

Budget: the mock and moto tests seconds each; the image test on a kept stand-in base (2 cores): 8.5 min alone,
17 min beside other tests (the 2.6 GB base pushed to the registry and pulled back, the Dockerfile's build)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time

import httpx
import pytest
from aws_standin import ACCOUNT, REGION, manifest
from conftest import REPO, require_tool

from gemma4_t4 import catalog
from gemma4_t4.components.sagemaker.build_context import image_tag
from gemma4_t4.components.sagemaker.steps import local_build
from gemma4_t4.core.mock_answers import MOCK_DIGEST

COMMAND = "command:local:Command"
STEP = "gemma4-t4-image-local-build"
ECR_BASE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.3"
REPOSITORY_URL = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/gemma4-t4-repo"
TAG = image_tag(catalog.PINS["vllm.sagemaker"], ECR_BASE)


# --- the graph ------------------------------------------------------------------------------------------


def test_local_builds_without_codebuild_and_the_model_runs_its_digest(run_stack):
    plan = run_stack("sagemaker-t4", "imageBuilder=local")
    assert not plan.find("aws:codebuild/project:Project") and not plan.find("aws:s3/bucket:Bucket")
    assert not plan.find(COMMAND, "gemma4-t4-image-codebuild-run")
    assert not [r for r in plan.find("aws:iam/role:Role") if "build" in r.name], "no CodeBuild role"
    step = plan.one(COMMAND, STEP)
    assert step.inputs["create"] == local_build.command()
    repository = plan.one("aws:ecr/repository:Repository").state
    request = json.loads(step.inputs["environment"][local_build.SETTINGS_ENV])
    assert request == {"repository": repository["name"], "repository_url": repository["repositoryUrl"],
                       "tag": step.inputs["triggers"][0], "base_image": catalog.PINS["sagemaker.base_image"],
                       "base_digest_pin": catalog.PINS["sagemaker.base_image_digest"], "builder": "local"}
    # The same content tag as CodeBuild's: switching builders finds the image already built.
    codebuild = run_stack("sagemaker-t4").one(COMMAND, "gemma4-t4-image-codebuild-run").inputs["triggers"]
    assert step.inputs["triggers"] == codebuild
    model = plan.one("aws:sagemaker/model:Model")
    assert f"{COMMAND}::{STEP}" in model.options["dependsOn"]
    assert model.inputs["primaryContainer"]["image"] == f"{repository['repositoryUrl']}@{MOCK_DIGEST}"
    # No CodeBuild quota to check before a build that does not use CodeBuild.
    check = json.loads(plan.one(COMMAND, "gemma4-t4-account-check").inputs["environment"]["GEMMA4_T4_ACCOUNT_CHECK"])
    assert check["compute_type"] == ""


def test_the_cost_has_no_codebuild_minutes_and_says_where_the_build_runs(run_stack):
    from gemma4_t4.clouds.sagemaker.cloud import LOCAL_BUILD_NOTE, SAGEMAKER
    from gemma4_t4.core.cost import CostEstimate

    local, codebuild = CostEstimate("sagemaker-t4", "sagemaker", 0.0, 0.0), CostEstimate("s", "sagemaker", 0.0, 0.0)
    SAGEMAKER.cost(run_stack("sagemaker-t4", "imageBuilder=local"), local)
    SAGEMAKER.cost(run_stack("sagemaker-t4"), codebuild)
    assert [i.name for i in local.extras] == ["image in ECR while the stack is up"]
    assert "image build (CodeBuild)" in [i.name for i in codebuild.extras]
    assert LOCAL_BUILD_NOTE in local.notes and LOCAL_BUILD_NOTE not in codebuild.notes


def test_a_named_tool_is_handed_to_the_step(run_stack):
    step = run_stack("sagemaker-t4", "imageBuilder=buildah").one(COMMAND, STEP)
    assert json.loads(step.inputs["environment"][local_build.SETTINGS_ENV])["builder"] == "buildah"


def test_an_unknown_builder_is_refused_with_the_choices(refused_stack):
    error, _ = refused_stack("sagemaker-t4", "imageBuilder=kaniko")
    assert error.key == "gemma4-t4:imageBuilder"
    assert "'codebuild', 'local', 'docker', 'podman' or 'buildah'" in str(error), str(error)


# --- the step against moto ----------------------------------------------------------------------------


def request(**changes) -> str:
    return json.dumps({"repository": "gemma4-t4-repo", "repository_url": REPOSITORY_URL, "tag": TAG,
                       "base_image": ECR_BASE, "base_digest_pin": "", "builder": "local", **changes})


def step(moto, request_json: str, path: str = "/nonexistent", **env) -> subprocess.CompletedProcess:
    """The step as the Command runs it; PATH: where it looks for buildah, podman and docker."""
    environment = {**moto.env(), "PATH": path, local_build.SETTINGS_ENV: request_json, **env}
    return subprocess.run([sys.executable, "-m", local_build.MODULE], cwd=REPO,
                          env=environment, capture_output=True, text=True, timeout=900)


@pytest.fixture
def account(moto):
    moto.reset()
    ecr = moto.client("ecr")
    ecr.create_repository(repositoryName="gemma4-t4-repo", imageTagMutability="IMMUTABLE")
    ecr.create_repository(repositoryName="vllm")
    return ecr


@pytest.mark.standin
def test_an_image_already_in_ecr_is_reused_without_any_tool(moto, account):
    account.put_image(repositoryName="vllm", imageManifest=manifest("base"), imageTag=ECR_BASE.rsplit(":", 1)[1])
    pushed = account.put_image(repositoryName="gemma4-t4-repo", imageManifest=manifest(TAG), imageTag=TAG)
    result = step(moto, request())
    assert result.returncode == 0, result.stderr
    assert result.stdout == pushed["image"]["imageId"]["imageDigest"] + "\n" and "already built" in result.stderr


@pytest.mark.standin
def test_without_a_tool_the_step_says_which_to_install(moto, account, tmp_path):
    account.put_image(repositoryName="vllm", imageManifest=manifest("base"), imageTag=ECR_BASE.rsplit(":", 1)[1])
    result = step(moto, request(), path=str(tmp_path))
    assert result.returncode == 1 and result.stdout == ""
    assert "needs buildah, podman or docker on this machine's PATH" in result.stderr
    assert "pulumi config set gemma4-t4:imageBuilder codebuild" in result.stderr
    named = step(moto, request(builder="podman"), path=str(tmp_path))
    assert named.returncode == 1 and "imageBuilder podman: podman is not on this machine's PATH" in named.stderr


@pytest.mark.standin
def test_a_republished_base_is_refused_before_anything_is_built(moto, account):
    account.put_image(repositoryName="vllm", imageManifest=manifest("base"), imageTag=ECR_BASE.rsplit(":", 1)[1])
    result = step(moto, request(base_digest_pin="sha256:48e605e3"))
    assert result.returncode == 1 and "not the pinned sha256:48e605e3" in result.stderr
    assert "local-build: docker" not in result.stderr and "local-build: buildah" not in result.stderr


@pytest.mark.standin
def test_a_tag_of_another_context_is_refused(moto, account):
    """The package that runs the step must build what the tag names (the context's hash)."""
    account.put_image(repositoryName="vllm", imageManifest=manifest("base"), imageTag=ECR_BASE.rsplit(":", 1)[1])
    result = step(moto, request(tag="vllm-0.30.0-sm75-ffffffffffffffff"))
    assert result.returncode == 1 and "builds another context than the tag" in result.stderr
    assert "base image:" not in result.stderr, "refused before the base is resolved"


# A stand-in for each tool that records the command line it is given (one line per call, in FAKE_LOG) and answers
# only what the step reads back: `inspect` prints the built image's platform and manifest type in the format the
# step asks for (FAKE_PLATFORM, FAKE_MEDIA_TYPE); docker's `push --help` lists --platform unless FAKE_OLD_DOCKER
# (Docker CLI 28's help: "--platform string  Push a platform-specific manifest as a single-platform image").
FAKE_TOOL = r"""#!/bin/bash
tool=${0##*/}
echo "$tool $*" >> "$FAKE_LOG"
platform=${FAKE_PLATFORM:-linux/amd64} media=${FAKE_MEDIA_TYPE:-application/vnd.docker.distribution.manifest.v2+json}
case "$tool $1 $2" in
  "buildah inspect "*) printf '%s {"schemaVersion":2,"mediaType":"%s"}\n' "$platform" "$media" ;;
  "podman image "*) echo "$platform $media" ;;
  "docker image "*) echo "$platform" ;;
  "docker push --help") [ -n "${FAKE_OLD_DOCKER:-}" ] || echo "      --platform string   Push a platform-specific manifest" ;;
esac
"""


def fake_tools(tmp_path, *names: str) -> str:
    """A PATH of one folder: stand-ins for NAMES, and bash (which runs build-image.sh), nothing else, so that no
    real tool of this machine is found."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_text(FAKE_TOOL)
        (folder / name).chmod(0o755)
    if not (folder / "bash").exists():
        (folder / "bash").symlink_to(shutil.which("bash"))
    return str(folder)


def calls(moto, account, tmp_path, tools: tuple[str, ...], builder: str = "local", **fake: str
          ) -> tuple[subprocess.CompletedProcess, list[str]]:
    """The step with stand-in TOOLS on PATH: its result and the command lines the tools were given. The registry
    the step reads back from is not there, so a step that pushed ends with "the registry did not answer"."""
    if not account.list_images(repositoryName="vllm")["imageIds"]:
        account.put_image(repositoryName="vllm", imageManifest=manifest("base"), imageTag=ECR_BASE.rsplit(":", 1)[1])
    log = tmp_path / "calls.log"
    log.unlink(missing_ok=True)
    result = step(moto, request(builder=builder), path=fake_tools(tmp_path, *tools), FAKE_LOG=str(log),
                  **{f"FAKE_{k.upper()}": v for k, v in fake.items()},
                  **{local_build.TEST_OVERRIDE_ENV: json.dumps({"registry": "http://127.0.0.1:9"})})
    return result, log.read_text().splitlines() if log.exists() else []


@pytest.mark.standin
def test_buildah_comes_first_and_builds_and_pushes_for_linux_amd64(moto, account, tmp_path):
    result, lines = calls(moto, account, tmp_path, ("docker", "podman", "buildah"))
    assert {line.split()[0] for line in lines} == {"buildah"}, lines
    (build,) = [line for line in lines if line.startswith("buildah bud ")]
    assert "--format docker" in build and "--platform linux/amd64" in build
    verbs = [line.split()[1] for line in lines]
    assert verbs[-3:] == ["bud", "inspect", "push"], "built, checked, then pushed"
    assert "--format v2s2" in lines[-1]
    assert "the registry did not answer" in result.stderr


@pytest.mark.standin
def test_podman_comes_before_docker(moto, account, tmp_path):
    _, lines = calls(moto, account, tmp_path, ("docker", "podman"))
    assert {line.split()[0] for line in lines} == {"podman"}, lines
    (build,) = [line for line in lines if line.startswith("podman build ")]
    assert "--format docker" in build and "--platform linux/amd64" in build
    assert [line.split()[1] for line in lines[-3:]] == ["build", "image", "push"], "built, checked, then pushed"
    assert lines[-2].startswith("podman image inspect ") and "--format v2s2" in lines[-1]


@pytest.mark.standin
def test_docker_last_builds_without_attestations_and_pushes_one_platform(moto, account, tmp_path):
    _, lines = calls(moto, account, tmp_path, ("docker",))
    (build,) = [line for line in lines if line.startswith("docker buildx build ")]
    assert "--provenance=false --sbom=false --output type=docker" in build and "--platform linux/amd64" in build
    assert lines[-3].startswith("docker image inspect ") and lines[-2] == "docker push --help"
    assert lines[-1].startswith("docker push --platform linux/amd64 "), "one image manifest, never an index"
    _, old = calls(moto, account, tmp_path, ("docker",), old_docker="1")
    assert old[-1].startswith("docker push ") and "--platform" not in old[-1], "a docker without the flag"


@pytest.mark.standin
@pytest.mark.parametrize("tool", ["buildah", "podman", "docker"])
def test_an_image_of_another_platform_is_refused_before_the_upload(moto, account, tmp_path, tool):
    result, lines = calls(moto, account, tmp_path, (tool,), platform="linux/arm64")
    assert result.returncode == 1 and "built for linux/arm64" in result.stderr and "nothing was pushed" in result.stderr
    assert not [line for line in lines if line.split()[1] == "push" and "--help" not in line], lines


@pytest.mark.standin
@pytest.mark.parametrize("tool", ["buildah", "podman"])
def test_an_oci_image_is_refused_before_the_upload(moto, account, tmp_path, tool):
    result, lines = calls(moto, account, tmp_path, (tool,), media_type="application/vnd.oci.image.manifest.v1+json")
    assert result.returncode == 1 and "built as application/vnd.oci.image.manifest.v1+json" in result.stderr
    assert not [line for line in lines if line.split()[1] == "push"], lines


def test_the_stack_never_sets_the_test_override():
    """Only tests set it: the component hands the step its request and the AWS environment, nothing else."""
    source = "".join(path.read_text() for path in (REPO / "components" / "sagemaker").glob("*.py"))
    assert local_build.TEST_OVERRIDE_ENV not in source and "allow-cpu-torch" not in source
    assert "allow-cpu-torch" not in (REPO / "components" / "sagemaker" / "steps" / "local_build.py").read_text()


# --- for real: buildah and a registry on loopback ---------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def registry(tmp_path):
    """Debian's distribution registry on loopback, storing under tmp_path: http://127.0.0.1:PORT."""
    port = free_port()
    config = tmp_path / "registry.yml"
    config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path / 'registry'}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n")
    log = (tmp_path / "registry.log").open("w")
    server = subprocess.Popen([require_tool("docker-registry"), "serve", str(config)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            if httpx.get(f"{url}/v2/", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    else:
        pytest.fail("docker-registry did not answer: " + (tmp_path / "registry.log").read_text()[-2000:])
    yield url
    server.terminate()
    server.wait(timeout=30)
    log.close()


def registry_manifest(url: str, name: str, reference: str) -> httpx.Response:
    return httpx.get(f"{url}/v2/{name}/manifests/{reference}", timeout=60,
                     headers={"Accept": catalog.SAGEMAKER_MANIFEST_TYPE})


@pytest.mark.standin
def test_podman_builds_checks_and_pushes_one_docker_manifest_for_real(registry, tmp_path):
    """The step's own podman command lines, run by Debian's podman on a tiny image (FROM scratch, not the 8 GB
    base): built for linux/amd64 as a Docker image, checked before the upload, pushed to the loopback registry as
    one Docker v2 schema 2 manifest."""
    podman = require_tool("podman")
    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nCOPY hello /hello\n")
    (context / "hello").write_text("hello\n")
    auth_file = tmp_path / "auth.json"
    auth_file.write_text('{"auths": {}}')
    registries = local_build.Registries(None, local_build.TestOverride(registry=registry))
    target = registries.reference(f"{REPOSITORY_URL}:podman-for-real")
    tool = local_build.Tool("podman", podman, registries, auth_file)
    try:
        tool.build(context, "scratch", target, {})
        tool.check(target)
        tool.push(target)
    finally:
        subprocess.run([podman, "rmi", "--force", target], capture_output=True)
    answer = registry_manifest(registry, "gemma4-t4-repo", "podman-for-real")
    assert answer.status_code == 200 and answer.headers["content-type"] == catalog.SAGEMAKER_MANIFEST_TYPE


@pytest.mark.standin
def test_docker_takes_the_steps_command_lines_for_real(tmp_path):
    """Debian's docker CLI parses each command line the step gives it (build-image.sh's build with the platform,
    the inspect, the one-platform push where this docker has it): with no daemon to reach, each ends at the
    connection (exit 1), never at a usage error (exit 125, "unknown flag")."""
    docker = require_tool("docker")
    env = {"PATH": f"{os.path.dirname(docker)}:/usr/bin:/bin", "DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock",
           "HOME": str(tmp_path)}
    (tmp_path / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n")
    tool = local_build.Tool("docker", docker, local_build.Registries(None, local_build.TestOverride()), tmp_path)
    lines = [["bash", str(REPO / "turing" / "build-image.sh"), "scratch", "127.0.0.1:9/x:1", "--platform",
              local_build.PLATFORM, "--build-arg", "SM75_GATE_ARGS="],
             [docker, "image", "inspect", "--format", "{{.Os}}/{{.Architecture}}", "127.0.0.1:9/x:1"]]
    if tool.pushes_one_platform():
        lines.append([docker, "push", "--platform", local_build.PLATFORM, "127.0.0.1:9/x:1"])
    for line in lines:
        result = subprocess.run(line, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1 and "unknown flag" not in result.stderr, (line, result.stderr)
        assert "Cannot connect to the Docker daemon" in result.stderr, (line, result.stderr)


@pytest.mark.image
def test_buildah_builds_the_image_pushes_it_and_the_next_up_reuses_it(moto, account, registry, tmp_path):
    from test_sagemaker_image import BASE, BUILDAH_ENV, TORCH, TRITON, VLLM

    require_tool("mmdebstrap")
    buildah = require_tool("buildah")
    # The stand-in base, kept in buildah's storage by the image test (built here if it is not yet).
    subprocess.run([str(REPO / "tests" / "fixtures" / "sagemaker-standin-base.sh"), VLLM, TRITON, TORCH, BASE],
                   env={**BUILDAH_ENV, "PIP_PYTHON": sys.executable}, check=True, timeout=1800)
    # It stands for AWS's base in its ECR repository: pushed to the registry, and its manifest put in ECR (moto)
    # under the tag and the digest the registry gives it, as ECR lists an image pushed to it.
    base_tag = ECR_BASE.rsplit(":", 1)[1]
    host = registry.removeprefix("http://")
    subprocess.run([buildah, "push", "--tls-verify=false", "--format", "v2s2", BASE, f"docker://{host}/vllm:{base_tag}"],
                   env=BUILDAH_ENV, check=True, capture_output=True, timeout=900)
    base = registry_manifest(registry, "vllm", base_tag)
    base_digest = base.headers["docker-content-digest"]
    account.put_image(repositoryName="vllm", imageManifest=base.text, imageTag=base_tag, imageDigest=base_digest)

    try:
        override = json.dumps({"registry": registry, "build_args": {"SM75_GATE_ARGS": "--allow-cpu-torch"}})
        env = {"BUILDAH_ISOLATION": BUILDAH_ENV["BUILDAH_ISOLATION"], "STORAGE_DRIVER": BUILDAH_ENV["STORAGE_DRIVER"],
               "HOME": os.environ.get("HOME", "/root"), local_build.TEST_OVERRIDE_ENV: override}
        # Only buildah on PATH (and what it runs): the local builder finds it.
        tools = tmp_path / "bin"
        tools.mkdir()
        (tools / "buildah").symlink_to(buildah)
        path = f"{tools}:/usr/sbin:/usr/bin:/sbin:/bin"
        result = step(moto, request(base_digest_pin=base_digest[:15]), path=path, **env)
        assert result.returncode == 0, result.stderr[-4000:]
        log = result.stderr
        # Built FROM the base by its digest, with the clamp's gates inside the build, by buildah.
        assert f"local-build: base image: {ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/vllm@{base_digest}" in log
        assert f"BASE_IMAGE={host}/vllm@{base_digest}" in log and "local-build: buildah bud" in log
        assert f"turing_clamp check: OK: vLLM {VLLM}" in log
        # Pushed under the content tag as a Docker v2 schema 2 manifest: the digest printed is the registry's.
        pushed = registry_manifest(registry, "gemma4-t4-repo", TAG)
        assert pushed.headers["content-type"] == catalog.SAGEMAKER_MANIFEST_TYPE
        assert result.stdout == pushed.headers["docker-content-digest"] + "\n"
        # What was pushed is what was built: the same image config (entrypoint, command, environment).
        config_digest = pushed.json()["config"]["digest"]
        config = httpx.get(f"{registry}/v2/gemma4-t4-repo/blobs/{config_digest}", timeout=60).json()["config"]
        built = json.loads(subprocess.run([buildah, "inspect", "--type", "image", f"{host}/gemma4-t4-repo:{TAG}"],
                                          env=BUILDAH_ENV, capture_output=True, text=True, check=True).stdout)
        assert config["Entrypoint"] == built["OCIv1"]["config"]["Entrypoint"] and config["Entrypoint"]
        assert config.get("Cmd") == built["OCIv1"]["config"].get("Cmd")
        # The next `up`: ECR lists the pushed image (as it does after a push), so the step reuses it, building nothing.
        account.put_image(repositoryName="gemma4-t4-repo", imageManifest=pushed.text, imageTag=TAG,
                          imageDigest=pushed.headers["docker-content-digest"])
        again = step(moto, request(), path=path, **env)
        assert again.returncode == 0 and again.stdout == result.stdout and "already built" in again.stderr
        assert "buildah bud" not in again.stderr
    finally:
        # The image built. The base as pulled is the stand-in itself (one image, another name): left alone.
        subprocess.run([buildah, "rmi", f"{host}/gemma4-t4-repo:{TAG}"], env=BUILDAH_ENV, capture_output=True)
        shutil.rmtree(tmp_path / "registry", ignore_errors=True)
