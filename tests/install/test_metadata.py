"""The wheel's metadata that pyproject.toml cannot hold: the repository's URL (setup.py), taken from the setting
GEMMA4_T4_REPOSITORY_URL or the clone's origin, as a browser opens it and never with a remote's credentials."""

from __future__ import annotations

import importlib.util
import tomllib

import pytest
from conftest import REPO


def _setup_module():
    spec = importlib.util.spec_from_file_location("gemma4_t4_setup", REPO / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("given", "url"), [
    ("https://github.com/acme/gemma4-t4", "https://github.com/acme/gemma4-t4"),
    ("https://github.com/acme/gemma4-t4.git/", "https://github.com/acme/gemma4-t4"),
    ("git@github.com:acme/gemma4-t4.git", "https://github.com/acme/gemma4-t4"),
    ("ssh://git@gitlab.example.com/team/gemma4-t4.git", "https://gitlab.example.com/team/gemma4-t4"),
    # A token in an https remote (git's credential in the URL) never reaches the metadata.
    ("https://oauth2:glpat-SECRET@gitlab.example.com/team/gemma4-t4.git", "https://gitlab.example.com/team/gemma4-t4"),
    ("/srv/git/gemma4-t4", ""), ("", ""),
])
def test_the_repository_url_is_what_a_browser_opens_without_credentials(given, url):
    assert _setup_module().repository_url(given) == url


def test_the_project_says_its_readme_and_takes_its_urls_from_setup_py():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["readme"] == "README.md" and project["dynamic"] == ["urls"] and "urls" not in project
