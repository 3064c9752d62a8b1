"""No comment, docstring or message in the code cites an issue number: the why is written where it applies, in
words a reader without the tracker follows (the tracker's numbers are not part of the project a user receives)."""

from __future__ import annotations

import re
import subprocess

from conftest import REPO

ISSUE = re.compile(r"\bissues? #?\d+\b", re.IGNORECASE)
CODE = ("*.py", "*.sh", "Makefile", "*.service", "*.timer", "*.toml", "*.yml", "*.yaml", "Dockerfile")


def test_no_code_cites_an_issue_number():
    tracked = subprocess.run(["git", "ls-files", "-z", "--", *CODE], cwd=REPO, capture_output=True, check=True,
                             text=True).stdout.split("\0")
    found = [f"{path}:{number}: {line.strip()}" for path in tracked if path and not path.startswith("tests/fixtures/")
             for number, line in enumerate((REPO / path).read_text(errors="replace").splitlines(), 1)
             if ISSUE.search(line)]
    assert found == [], "say the why in words, not an issue number:\n" + "\n".join(found)
