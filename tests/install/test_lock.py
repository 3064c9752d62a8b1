"""The operator environment's lock (requirements.lock, `make lock`): every third-party package exact and
hash-checked, within pyproject.toml's ranges, and current with pyproject.toml."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib

import pytest
from conftest import REPO
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

LOCK = REPO / "requirements.lock"


def locked() -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) for every requirement of the lock (a requirement spans its continuation lines)."""
    text = re.sub(r"\s*\\\n\s*", " ", LOCK.read_text())
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        spec, *options = line.split(" --")
        req = Requirement(spec)
        assert len(req.specifier) == 1 and next(iter(req.specifier)).operator == "==", f"not exact: {line}"
        pins[canonicalize_name(req.name)] = (next(iter(req.specifier)).version,
                                             [o.removeprefix("hash=") for o in options if o.startswith("hash=")])
    return pins


def test_every_locked_package_is_exact_and_carries_its_hashes():
    pins = locked()
    assert len(pins) > 50
    unhashed = [name for name, (_, hashes) in pins.items() if not hashes]
    assert not unhashed, f"no --hash for {unhashed}"
    assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for _, hashes in pins.values() for h in hashes)


def test_the_lock_holds_every_requirement_of_the_library_its_extras_and_the_dev_group_within_its_range():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    project = pyproject["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["ops"],
              *pyproject["dependency-groups"]["dev"]]
    pins = locked()
    for spec in map(Requirement, wanted):
        name = canonicalize_name(spec.name)
        if name == "gemma4-turing-clamp":  # this checkout's turing/, installed beside the lock
            assert name not in pins
            continue
        assert name in pins, f"{spec} is not in requirements.lock: run make lock"
        assert spec.specifier.contains(pins[name][0], prereleases=True), f"{name}=={pins[name][0]} is outside {spec}"


def test_what_the_wheel_publishes_is_ranges_and_the_exact_pins_stay_in_the_dev_group():
    """A library user's resolver sees the dependencies and the extras (the wheel's Requires-Dist): ranges, never an
    exact pin, which would fight the user's own. The project's tools are exact, in a dependency group (PEP 735),
    which no wheel publishes."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    project = pyproject["project"]
    published = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    exact = [spec for spec in map(Requirement, published) if any(s.operator in ("==", "===") for s in spec.specifier)]
    assert exact == [] and "dev" not in project["optional-dependencies"]
    assert all(next(iter(Requirement(r).specifier)).operator == "==" for r in pyproject["dependency-groups"]["dev"])


def lock_flags() -> list[str]:
    """The flags `make lock` passes uv (the Makefile's LOCK_FLAGS)."""
    makefile = re.sub(r"\\\n", " ", (REPO / "Makefile").read_text())
    return shlex.split(re.search(r"^LOCK_FLAGS := (.*)$", makefile, re.M).group(1))


@pytest.mark.index
def test_the_lock_is_current_with_pyproject(tmp_path):
    """What `make lock` writes now, preferring the lock's own versions as uv does for an existing output file,
    is the committed lock: a requirement added to or changed in pyproject.toml without `make lock` fails."""
    uv = shutil.which("uv", path=os.path.dirname(sys.executable))
    out = tmp_path / "requirements.lock"
    shutil.copy(LOCK, out)
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "turing").symlink_to(REPO / "turing")  # the clamp's source ([tool.uv.sources])
    subprocess.run([uv, "pip", "compile", *lock_flags(), "pyproject.toml", "-o", str(out)], cwd=tmp_path,
                   check=True, capture_output=True, env={**os.environ, "UV_SYSTEM_CERTS": "1"}, timeout=600)
    assert out.read_text() == LOCK.read_text(), "requirements.lock is not current: run make lock"
