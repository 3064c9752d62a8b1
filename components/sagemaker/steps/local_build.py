"""The image build step of `imageBuilder: local`, run by `pulumi up` (a pulumi_command local Command) with boto3
and the container tool of this machine, for accounts CodeBuild will not serve.

The same image as CodeBuild's, from the same build context (the files whose hash is the tag), pushed to the
same private ECR repository under the same tag, with the same checks (components/sagemaker/steps/build.py):
1. An image with this tag already in the repository (read from ECR) is reused, not rebuilt.
2. The base image is resolved to its digest through ECR and checked against the pin; the build is FROM exactly
   that digest.
3. The tool: the configured one (imageBuilder buildah, podman or docker), else the first of buildah, podman and
   docker on PATH (docker last: with the containerd image store, Docker Engine 29's default, a push sends an image
   index unless it is told a platform). It logs in to the base's registry and ours with ECR's
   GetAuthorizationToken (buildah and podman into a temporary auth file; docker into its own config, as `aws ecr
   get-login-password | docker login` does), builds a Docker v2 schema 2 image for linux/amd64 (every build and
   push names the platform: an arm64 machine would otherwise build for itself, or emulate silently; docker
   through turing/build-image.sh, without attestations; buildah and podman with --format docker), checks the
   built image's platform (and, where the tool reports it, its manifest type) before anything is uploaded, and
   pushes it (docker with --platform: one image manifest, never an index).
4. The pushed manifest is read back from the registry by tag: SageMaker's CreateModel takes only a Docker v2
   schema 2 manifest, so anything else is refused here with the fix (its delete line names the region). Its
   digest is printed on stdout; everything else goes to stderr. Any failure exits 1 with what failed and its fix,
   which fails `pulumi up`.

Test-only override (TEST_OVERRIDE_ENV, JSON; never set by the stack): "registry" (http://HOST:PORT) stands for
every ECR registry (logins, pulls, pushes, the manifest read: a registry on loopback for a test whose ECR API is
moto), and "build_args" adds build arguments (SM75_GATE_ARGS for a stand-in base with a CPU torch).
"""

from __future__ import annotations

import base64
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from botocore.exceptions import BotoCoreError, ClientError

from gemma4_t4 import catalog

from ...step import StepRequest, malformed, run_step, say_as, step_command
from .. import build_context
from .build import BuildError, existing_digest, pinned_base, session_from_env

MODULE = "gemma4_t4.components.sagemaker.steps.local_build"
NAME = "sagemaker-local-build"  # its name in components/step.py's STEPS, which the state records
TEST_OVERRIDE_ENV = "GEMMA4_T4_LOCAL_BUILD_TEST_OVERRIDE"  # JSON: see the module's docstring
# The order imageBuilder local tries them in: buildah and podman push exactly the manifest type they are told
# (--format v2s2); docker last.
TOOLS = ("buildah", "podman", "docker")
PLATFORM = catalog.SAGEMAKER_IMAGE_PLATFORM
MANIFEST_TYPES = "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json, " \
    "application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.index.v1+json"


@dataclass(frozen=True)
class LocalBuildRequest(StepRequest):
    ENV = "GEMMA4_T4_LOCAL_BUILD"

    repository: str  # the ECR repository's name
    repository_url: str  # ACCOUNT.dkr.ecr.REGION.amazonaws.com/NAME
    tag: str
    base_image: str
    base_digest_pin: str  # "" = no pin
    builder: str = "local"  # local (the first tool found), buildah, podman or docker


@dataclass(frozen=True)
class TestOverride:
    registry: str = ""
    build_args: dict[str, str] = field(default_factory=dict)


say = say_as("local-build")


def find_tool(builder: str, path: str | None = None) -> tuple[str, str]:
    """(tool name, its path): the configured one, or the first of TOOLS on PATH."""
    wanted = TOOLS if builder == "local" else (builder,)
    for name in wanted:
        found = shutil.which(name, path=path)
        if found:
            return name, found
    if builder == "local":
        raise BuildError("imageBuilder local needs buildah, podman or docker on this machine's PATH, and none is "
                         "there: install one (e.g. sudo apt-get install buildah), or go back to CodeBuild: "
                         "pulumi config set gemma4-t4:imageBuilder codebuild")
    raise BuildError(f"imageBuilder {builder}: {builder} is not on this machine's PATH: install it, or "
                     "pulumi config set gemma4-t4:imageBuilder local (the first of buildah, podman, docker found)")


@dataclass
class Registries:
    """The ECR registries' logins (one token per region) and where each is reached."""

    session: Any
    override: TestOverride
    logins: dict[str, str] = field(default_factory=dict)  # registry host -> password

    def host(self, registry: str) -> str:
        """Where REGISTRY (ACCOUNT.dkr.ecr.REGION.amazonaws.com) is reached: itself, or the test's registry."""
        return self.override.registry.split("://", 1)[-1] if self.override.registry else registry

    def url(self, registry: str) -> str:
        return self.override.registry or f"https://{registry}"

    def password(self, registry: str) -> str:
        """ECR's GetAuthorizationToken in the registry's region: "AWS:PASSWORD", base64 (ECR API reference)."""
        if registry not in self.logins:
            region = registry.split(".")[3]
            data = self.session.client("ecr", region_name=region).get_authorization_token()["authorizationData"][0]
            user, _, password = base64.b64decode(data["authorizationToken"]).decode().partition(":")
            if user != "AWS":
                raise BuildError(f"ECR's authorization token for {registry} is not for the user AWS")
            self.logins[registry] = password
        return self.logins[registry]

    def reference(self, image: str) -> str:
        registry, _, path = image.partition("/")
        return f"{self.host(registry)}/{path}"


class Tool:
    """buildah, podman or docker, as this step drives them."""

    def __init__(self, name: str, path: str, registries: Registries, auth_file: Path) -> None:
        self.name, self.path, self.registries, self.auth_file = name, path, registries, auth_file

    def _common(self) -> list[str]:
        """buildah's and podman's registry options: the temporary auth file, and plain HTTP only for the test's
        loopback registry (docker treats a loopback registry as insecure by itself)."""
        if self.name == "docker":
            return []
        insecure = self.registries.override.registry.startswith("http://")
        return [f"--authfile={self.auth_file}", *(["--tls-verify=false"] if insecure else [])]

    def run(self, *args: str, stdin: str | None = None, cwd: Path | None = None, capture: bool = False) -> str:
        """The tool's output (CAPTURE: returned; else shown on stderr, with pulumi up's output)."""
        shown = " ".join(a for a in args if not a.startswith("--authfile"))
        say(f"{self.name} {shown}")
        result = subprocess.run([self.path, *args], input=stdin, cwd=cwd, text=True,
                                stdout=subprocess.PIPE if capture else sys.stderr)
        if result.returncode != 0:
            raise BuildError(f"`{self.name} {shown}` failed (exit {result.returncode}); its output is above")
        return result.stdout or ""

    def login(self, registry: str) -> None:
        self.run("login", *self._common(), "--username", "AWS", "--password-stdin", self.registries.host(registry),
                 stdin=self.registries.password(registry))

    def build(self, context: Path, base: str, target: str, build_args: dict[str, str]) -> None:
        args = ["--platform", PLATFORM, *(a for k, v in build_args.items() for a in ("--build-arg", f"{k}={v}"))]
        if self.name == "docker":  # the script CodeBuild runs: no attestations, a Docker v2 schema 2 image
            say(f"build-image.sh {base} {target} {' '.join(args)}")
            script = subprocess.run(["bash", "build-image.sh", base, target, *args], cwd=context, text=True,
                                    stdout=sys.stderr, env={**os.environ, "PATH": self.search_path()})
            if script.returncode != 0:
                raise BuildError(f"turing/build-image.sh failed (exit {script.returncode}); its output is above")
            return
        verb = "bud" if self.name == "buildah" else "build"
        self.run(verb, *self._common(), "--format", "docker", *ulimits(), "--build-arg", f"BASE_IMAGE={base}", *args,
                 "--tag", target, str(context))

    def search_path(self) -> str:
        """PATH with this tool's folder first: the script runs the docker this step found."""
        return os.pathsep.join([str(Path(self.path).parent), os.environ.get("PATH", "")])

    def check(self, target: str) -> None:
        """Before anything is uploaded: the built image's platform, and its manifest type where the tool tells it
        (buildah and podman; docker's push names the platform instead, below)."""
        if self.name == "buildah":
            found = self.run("inspect", "--type", "image", "--format", "{{.OCIv1.OS}}/{{.OCIv1.Architecture}} "
                             "{{.Manifest}}", target, capture=True)
            platform, _, manifest = found.strip().partition(" ")
            media_type = json.loads(manifest or "{}").get("mediaType", "")
        elif self.name == "podman":
            platform, _, media_type = self.run("image", "inspect", "--format", "{{.Os}}/{{.Architecture}} "
                                               "{{.ManifestType}}", target, capture=True).strip().partition(" ")
        else:
            platform, media_type = self.run("image", "inspect", "--format", "{{.Os}}/{{.Architecture}}", target,
                                            capture=True).strip(), ""
        if platform != PLATFORM:
            raise BuildError(f"the image was built for {platform or 'an unknown platform'}, and SageMaker's ml.g4dn "
                             f"hosts run {PLATFORM}: nothing was pushed. Build with a {self.name} that builds for "
                             f"{PLATFORM} (on an arm64 machine, with qemu-user-static's emulation), or go back to "
                             "CodeBuild: pulumi config set gemma4-t4:imageBuilder codebuild")
        if media_type and media_type != catalog.SAGEMAKER_MANIFEST_TYPE:
            raise BuildError(f"the image was built as {media_type}, and SageMaker's CreateModel accepts only "
                             f"{catalog.SAGEMAKER_MANIFEST_TYPE}: nothing was pushed")

    def push(self, target: str) -> None:
        if self.name == "docker":
            # One image manifest, never an index (the containerd image store pushes the index, attestations
            # included, unless a platform is named: `docker image push --platform`, Docker CLI reference). A
            # docker too old for the flag has no such store by default; the read-back below checks either way.
            self.run("push", *(["--platform", PLATFORM] if self.pushes_one_platform() else []), target)
        else:
            self.run("push", *self._common(), "--format", "v2s2", target, f"docker://{target}")

    def pushes_one_platform(self) -> bool:
        """Whether this docker's push takes --platform (Docker CLI 28 and later; its help lists it)."""
        found = subprocess.run([self.path, "push", "--help"], capture_output=True, text=True)
        return "--platform" in found.stdout


def ulimits() -> list[str]:
    """--ulimit at this process's own limits: buildah and podman raise a container's open files and processes
    by default, which needs CAP_SYS_RESOURCE ("setting RLIMIT_NOFILE ... operation not permitted" for a root
    without it, as in a CI container); lowering to what this process has is allowed everywhere."""
    flags = []
    for name, which, most in (("nofile", resource.RLIMIT_NOFILE, 1048576), ("nproc", resource.RLIMIT_NPROC, 32768)):
        soft, hard = (most if v == resource.RLIM_INFINITY else min(v, most) for v in resource.getrlimit(which))
        flags.append(f"--ulimit={name}={soft}:{hard}")
    return flags


def check_context(base_image: str, tag: str) -> None:
    """Refused unless the build context's hash is the tag's: the package that runs this step must be the one
    `pulumi up` planned with, or the tag would name another image."""
    if not tag.endswith(build_context.context_hash(base_image)):
        raise BuildError(f"this machine's gemma4-t4 builds another context than the tag {tag} names: run "
                         "`pulumi up` with the same gemma4-t4 that planned it")


def write_context(directory: Path) -> None:
    """The build context CodeBuild gets (the files whose hash is the tag), written out."""
    for name, source in build_context.build_context_files().items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(source.read_bytes())


def pushed_manifest(registries: Registries, repository_url: str, tag: str) -> tuple[str, str]:
    """(media type, digest) of REPOSITORY:TAG as the registry serves it (the registry API's manifest GET, with ECR's
    basic authentication), refused unless SageMaker can run it."""
    registry, _, name = repository_url.partition("/")
    credentials = base64.b64encode(f"AWS:{registries.password(registry)}".encode()).decode()
    answer = httpx.get(f"{registries.url(registry)}/v2/{name}/manifests/{tag}", timeout=60,
                       headers={"Accept": MANIFEST_TYPES, "Authorization": f"Basic {credentials}"})
    if answer.status_code != 200:
        raise BuildError(f"the registry has no {name}:{tag} after the push (HTTP {answer.status_code})")
    media_type = answer.headers.get("content-type", "").split(";")[0].strip()
    if media_type != catalog.SAGEMAKER_MANIFEST_TYPE:
        raise BuildError(
            f"{name}:{tag} was pushed as {media_type or 'an unknown manifest type'}; SageMaker's CreateModel accepts "
            f"only {catalog.SAGEMAKER_MANIFEST_TYPE}. Delete it (the tag is immutable: "
            + shlex.join(["aws", "ecr", "batch-delete-image", "--repository-name", name, "--image-ids",
                          f"imageTag={tag}", "--region", registry.split(".")[3]])
            + "), then build with buildah or podman (pulumi config set "
            "gemma4-t4:imageBuilder buildah), and `pulumi up` again")
    return media_type, answer.headers["docker-content-digest"]


def build_and_push(request: LocalBuildRequest, env: dict[str, str], override: TestOverride) -> str:
    session = session_from_env(env)
    if not session.region_name:
        raise BuildError("no AWS region: pulumi config set aws:region us-east-2")
    digest = existing_digest(session.client("ecr"), request.repository, request.tag)
    if digest:
        say(f"{request.repository}:{request.tag} already built ({digest}): not rebuilding")
        return digest
    check_context(request.base_image, request.tag)
    base = pinned_base(session, request.base_image, request.base_digest_pin)
    say(f"base image: {base}")
    name, path = find_tool(request.builder, env.get("PATH"))
    registries = Registries(session, override)
    target = registries.reference(f"{request.repository_url}:{request.tag}")
    with tempfile.TemporaryDirectory(prefix="gemma4-t4-build-") as work:
        context, auth_file = Path(work) / "context", Path(work) / "auth.json"
        write_context(context)
        tool = Tool(name, path, registries, auth_file)
        for registry in dict.fromkeys((base.split("/")[0], request.repository_url.split("/")[0])):
            tool.login(registry)
        tool.build(context, registries.reference(base), target, override.build_args)
        tool.check(target)
        tool.push(target)
    _, digest = pushed_manifest(registries, request.repository_url, request.tag)
    return digest


SETTINGS_ENV = LocalBuildRequest.ENV


def command() -> str:
    """The Command's `create`: this step by its NAME (components/step.py: the line every step records)."""
    return step_command(NAME)


def main(env: Mapping[str, str] | None = None) -> int:
    return run_step(LocalBuildRequest, build, say, env)


def build(request: LocalBuildRequest, env: dict[str, str]) -> int:
    """The pushed image's digest on stdout (the one already in the repository with this tag, if any)."""
    try:
        override = TestOverride(**json.loads(env.get(TEST_OVERRIDE_ENV) or "{}"))
    except (TypeError, ValueError) as err:
        return malformed(say, TEST_OVERRIDE_ENV, err)
    started = time.monotonic()
    try:
        digest = build_and_push(request, env, override)
    except (BotoCoreError, ClientError) as err:
        say(f"AWS: {err}")
        return 1
    except httpx.HTTPError as err:
        say(f"the registry did not answer: {err}")
        return 1
    say(f"{request.repository}:{request.tag} @ {digest} in {time.monotonic() - started:.0f}s")
    print(digest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
