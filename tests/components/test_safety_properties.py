"""The suite guards the project's safety properties: each one, broken on purpose in a copy of the
project, makes the graph tests fail. A property a mutation can remove without a red test is a
property nothing checks.

Each case copies the project, applies one edit to the source, and runs the components' fast tests
in the copy (run from its folder, which puts the copy's package first); the run must fail, and the
unedited copy must pass (so a failure is the mutation's doing, not the copy's).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.build

# (what is guarded, file, the source as it is, the source broken)
MUTATIONS = [
    ("the data disk outlives the VM", "components/gce/storage.py",
     "retain_on_delete=settings.retain_data_disk", "retain_on_delete=False"),
    ("GPU VMs terminate on host maintenance", "components/gce/guards.py",
     "on_host_maintenance=settings.on_host_maintenance.value", 'on_host_maintenance="MIGRATE"'),
    ("only IAP may reach SSH", "components/gce/network.py",
     "source_ranges=[IAP_SSH_SOURCE_RANGE]", 'source_ranges=["0.0.0.0/0"]'),
    ("the deny-all outranks the network's own rules", "components/gce/network.py",
     "priority=catalog.FIREWALL_DENY_PRIORITY", "priority=65535"),
    ("vLLM beyond loopback needs an API key", "components/gce/settings.py",
     "if self.api_key is None or", "if False and self.api_key is None or"),
    ("vLLM listens on loopback", "components/serving.py",
     '"--host", self.host', '"--host", "0.0.0.0"'),
    ("the endpoint is pinned to the driver-580 host image", "components/sagemaker/server.py",
     '"inference_ami_version": settings.inference_ami_version', '"inference_ami_version": None'),
    ("the build context bucket is private", "components/sagemaker/storage.py",
     "block_public_acls=True", "block_public_acls=False"),
    ("the execution role may only pull its own image", "components/sagemaker/access.py",
     '"ecr:BatchGetImage"],\n         "Resource": image.repository_arn', '"ecr:*"],\n         "Resource": "*"'),
    ("the TTL role may only delete its endpoint", "components/sagemaker/ttl.py",
     '"sagemaker:DeleteEndpoint", "Resource": endpoint_arn}', '"sagemaker:*", "Resource": "*"}'),
    ("a service assumes a role only for this account's resources", "components/sagemaker/access.py",
     '"Action": "sts:AssumeRole",\n                       "Condition": condition}', '"Action": "sts:AssumeRole"}'),
    ("the build context bucket takes TLS only", "components/sagemaker/storage.py",
     '"Condition": catalog.S3_INSECURE_TRANSPORT}', '"Condition": {}}'),
    ("an untagged image expires, a tagged one never", "components/sagemaker/storage.py",
     '"selection": {"tagStatus": "untagged"', '"selection": {"tagStatus": "any"'),
]
GRAPH_TESTS = ["tests/components/gce/test_gce_stack.py", "tests/components/gce/test_gce_access.py",
               "tests/components/sagemaker/test_sagemaker_stack.py", "tests/components/test_cost_guard.py",
               "tests/components/sagemaker/test_sagemaker_ttl.py"]


@pytest.fixture(scope="module")
def project_copy(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("mutant") / "project"
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        if (REPO / name).is_file():
            shutil.copy2(REPO / name, copy / name)
    # The copy is imported from its folder (`python -m pytest` there), not installed: its gemma4_t4.components is
    # its own components/ (the checkout's comes through pyproject.toml's package-dir; the copy's links stand for it).
    package_dir = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for package, folder in package_dir.items():
        os.symlink(copy / folder, copy / package.replace(".", "/"))
    return copy


def _graph_tests(project: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "-m", "not (wheels or server or build or image or index or boot)", *GRAPH_TESTS],
                          cwd=project, capture_output=True, text=True,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


def test_the_unedited_copy_passes(project_copy):
    result = _graph_tests(project_copy)
    assert result.returncode == 0, result.stdout[-3000:]


@pytest.mark.parametrize("guarded,path,source,broken", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_breaking_a_safety_property_fails_a_test(project_copy, guarded, path, source, broken):
    target = project_copy / path
    original = target.read_text()
    assert original.count(source) == 1, f"{path} no longer reads {source!r}: update this mutation"
    target.write_text(original.replace(source, broken))
    try:
        result = _graph_tests(project_copy)
    finally:
        target.write_text(original)
    assert result.returncode != 0, f"nothing failed with {guarded!r} broken:\n{result.stdout[-2000:]}"
    assert "failed" in result.stdout.splitlines()[-1], result.stdout[-2000:]
