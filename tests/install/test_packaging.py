"""What `pip install .` puts into someone's site-packages: the one package gemma4_t4 with the components,
the guest's files and the clamp's source inside it, nothing named after the project's directories
(`cloudinit` is cloud-init's own module name)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.build


def test_installing_the_project_adds_only_gemma4_t4(tmp_path):
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    # --no-deps: what this project installs, not what its dependencies do.
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(REPO)], check=True,
                   capture_output=True)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    before = {"pip", "_distutils_hack", "setuptools", "pkg_resources", "distutils-precedence.pth"}
    top_level = {p.name for p in site.iterdir() if not p.name.endswith((".dist-info", "__pycache__"))} - before
    assert top_level == {"gemma4_t4"}
    files = {p.relative_to(site / "gemma4_t4").as_posix() for p in (site / "gemma4_t4").rglob("*.py")}
    assert {"cli/__init__.py", "core/plan.py", "catalog/pins.py", "contract.py", "components/gce/component.py",
            "components/package.py", "clouds/gce/cloud.py", "clouds/sagemaker/cloud.py", "program.py"} <= files
    data = {p.relative_to(site / "gemma4_t4").as_posix() for p in (site / "gemma4_t4").rglob("*") if p.is_file()}
    assert {"cloudinit/bootstrap.sh", "cloudinit/units/gemma4-vllm.service", "cloudinit/locks/vllm-gce-0.30.0.txt",
            "cloudinit/locks/vllm-gce-0.33.0.txt",
            "turing/Dockerfile", "turing/pyproject.toml", "turing/turing_clamp/plugin.py",
            "components/schema.json"} <= data
    # Everything the image's build context and the guest's user-data read, installed (a .py file goes in as a
    # module; any other one only through package-data): a file left out builds a different image, or none,
    # from an installed wheel than from a checkout.
    from gemma4_t4.components.sagemaker.build_context import build_context_files

    assert {f"turing/{name}" for name in build_context_files()} <= data
    guest = subprocess.run(["git", "ls-files", "cloudinit/bootstrap.sh", "cloudinit/scripts", "cloudinit/units",
                            "cloudinit/locks"], cwd=REPO, check=True, capture_output=True, text=True).stdout.split()
    assert guest and set(guest) <= data
    assert not [name for name in data if name.startswith(("turing/results", "turing/gpu", "turing/build/", "turing/gemma4_turing_clamp.egg-info"))]


def test_the_console_script_and_module_agree_on_the_version():
    script = Path(sys.executable).parent / "gemma4-t4"
    by_script = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=True).stdout
    by_module = subprocess.run([sys.executable, "-m", "gemma4_t4", "--version"], capture_output=True, text=True,
                               check=True).stdout
    assert by_script == by_module and by_script.startswith("gemma4-t4 0.")


def test_the_listed_packages_are_the_tree():
    """pyproject.toml lists the packages (the data folders must not be searched): every folder of code is
    listed, and each listed one exists, where package-dir puts it."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, package_dir = set(setuptools["packages"]), setuptools["package-dir"]
    code = set()
    for root in ("gemma4_t4", *package_dir):
        top = REPO / package_dir.get(root, root)
        code |= {".".join((root, *Path(folder).relative_to(top).parts))
                 for folder, _, names in os.walk(top) if "__init__.py" in names and "turing_clamp" not in folder}
    assert code == listed


def test_each_module_has_one_path():
    """No links: the design's folders are mapped into the package (package-dir), so a file has one path in
    the checkout and one import path; imported by its folder's name from the root, a folder refuses."""
    assert not [p for p in REPO.glob("gemma4_t4/**/*") if p.is_symlink()]
    for folder in ("components", "cloudinit", "turing"):
        result = subprocess.run([sys.executable, "-c", f"import {folder}"], cwd=REPO, capture_output=True, text=True)
        assert result.returncode == 1 and f"{folder}/ is the package gemma4_t4.{folder}" in result.stderr


# In a fresh interpreter: the clamp's modules, by their one name, and the package data beside them.
ONE_CLAMP = """
import importlib, importlib.resources as r, json, turing_clamp.policy
try:
    second = importlib.import_module("gemma4_t4.turing.turing_clamp.policy") is turing_clamp.policy
except ModuleNotFoundError as refused:
    second = str(refused)
data = r.files("gemma4_t4.turing")
print(json.dumps([second, (data / "Dockerfile").is_file(), (data / "turing_clamp" / "policy.py").is_file()]))
"""


def test_the_clamp_loads_under_one_module_name():
    """turing/ is gemma4_t4's package data (the clamp's source, the image's build context), the clamp's code the
    turing_clamp distribution: importing the clamp through gemma4_t4.turing, a second copy of its modules and
    state, is refused with the name to import, and the data still reads."""
    result = subprocess.run([sys.executable, "-c", ONE_CLAMP], cwd=REPO, capture_output=True, text=True, check=True)
    second, dockerfile, source = json.loads(result.stdout)
    assert second is not True, "gemma4_t4.turing.turing_clamp.policy is turing_clamp.policy: one copy, two names"
    assert second is not False, "gemma4_t4.turing.turing_clamp.policy is a second copy of turing_clamp.policy"
    assert "import turing_clamp" in second and dockerfile and source
