"""What pyproject.toml cannot say: the wheel's Project-URLs, which name the repository this checkout was cloned
from. The URL is a build setting (docs/library.md, "Installing"): GEMMA4_T4_REPOSITORY_URL, else the clone's
`origin` remote; neither (a tarball, a clone without a remote): a wheel without Project-URLs. A remote's user
and password (a token in an https remote) never reach the metadata."""

import os
import re
import subprocess
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from setuptools import setup

HERE = Path(__file__).resolve().parent


def _origin() -> str:
    try:
        done = subprocess.run(["git", "-C", str(HERE), "remote", "get-url", "origin"], capture_output=True,
                              text=True, timeout=30, check=False)
    except OSError:  # no git on this machine
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def repository_url(given: str) -> str:
    """GIVEN (an https URL or an scp-like git remote, git@HOST:OWNER/NAME.git) as the https URL a browser opens;
    "" for anything else."""
    given = given.strip()
    scp = re.fullmatch(r"[\w.-]+@([\w.-]+):(?!//)(.+)", given)
    if scp:
        given = f"https://{scp[1]}/{scp[2]}"
    parts = urlsplit(given)
    if parts.scheme not in ("https", "http", "ssh") or not parts.hostname:
        return ""
    path = parts.path.rstrip("/").removesuffix(".git")
    return urlunsplit(("https", parts.hostname, path, "", ""))


def project_urls() -> dict[str, str]:
    url = repository_url(os.environ.get("GEMMA4_T4_REPOSITORY_URL") or _origin())
    return {"Repository": url} if url else {}


if __name__ == "__main__":  # as setuptools' build backend runs it; a test imports it to read repository_url
    setup(project_urls=project_urls())
