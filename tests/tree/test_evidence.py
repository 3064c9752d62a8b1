"""Evidence has stable names: each published run the code cites is defined once in docs/evidence.md (its
title, author, date and what the code takes from it), and code and docs cite it by that name, in brackets."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from conftest import REPO

EVIDENCE = REPO / "docs" / "evidence.md"
# A citation: a bracketed name whose last part is its kind, e.g. [gce-t4-article], [sagemaker-gemma-repo].
CITATION = re.compile(r"\[([a-z0-9]+(?:-[a-z0-9]+)*-(?:article|repo))\]")
DEFINITION = re.compile(r"^### `\[([a-z0-9-]+)\]` (.+)$", re.MULTILINE)
# The numbered names the code used before docs/evidence.md defined any.
NUMBERED = re.compile(r"\bseed[ _]?\d{3}", re.IGNORECASE)
# Never rewritten for a citation: their bytes are the VM's user-data and the SageMaker image's tag.
FROZEN = {"cloudinit", "turing"}
SCANNED = ("components", "gemma4_t4", "docs", "tests", "provider", "examples")
TOP_FILES = ("README.md", "CHANGELOG.md", "Makefile", "pyproject.toml", "Pulumi.yaml")
TEXT = {".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".txt", ".cfg", ".json"}


def _files() -> Iterator[Path]:
    """Every text file of the checkout that code or docs live in, outside the frozen folders (symlinked folders,
    such as a worktree's gemma4_t4/components, are not followed: their files are scanned where they live)."""
    yield from (REPO / name for name in TOP_FILES if (REPO / name).is_file())
    for top in SCANNED:
        for folder, subfolders, names in os.walk(REPO / top):
            subfolders[:] = [d for d in subfolders if d not in FROZEN and d != "__pycache__" and not d.startswith(".")]
            yield from (Path(folder) / name for name in names if Path(name).suffix in TEXT)


def _cited() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in _files():
        if path == EVIDENCE:
            continue
        for name in CITATION.findall(path.read_text(errors="replace")):
            found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return found


def _defined() -> dict[str, str]:
    return dict(DEFINITION.findall(EVIDENCE.read_text()))


def test_every_cited_name_is_defined_in_docs_evidence():
    undefined = {name: sorted(paths) for name, paths in _cited().items() if name not in _defined()}
    assert undefined == {}, "define these in docs/evidence.md (### `[name]` title) or cite a defined name"


def test_every_defined_name_is_cited_and_says_where_and_when():
    text = EVIDENCE.read_text()
    cited = _cited()
    for name in _defined():
        assert name in cited, f"[{name}] is defined in docs/evidence.md and cited nowhere"
        section = text.split(f"### `[{name}]`", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
        assert re.search(r"github\.com/|https://", section), f"[{name}]: no address"
        assert re.search(r"\b20\d\d-\d\d(-\d\d)?\b", section), f"[{name}]: no date"
        assert "What the code takes" in section, f"[{name}]: what the code takes from it"


def test_the_two_articles_are_named():
    defined = _defined()
    assert defined["gce-t4-article"].startswith("Gemma 4 on a Tesla T4, Part 2")
    assert defined["sagemaker-t4-article"].startswith("Gemma 4 on Amazon SageMaker: The NVIDIA T4")


def test_no_citation_uses_the_old_numbered_names():
    """Outside cloudinit/ and turing/ every citation uses its name (the sed script of the rooms-per-cloud merge
    rewrites components/, gemma4_t4/core and gemma4_t4/clouds)."""
    left = sorted(f"{path.relative_to(REPO)}:{number}" for path in _files() if path != Path(__file__)
                  for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
                  if NUMBERED.search(line))
    assert left == [], "cite by the names in docs/evidence.md:\n" + "\n".join(left)


def test_the_checker_sees_a_numbered_name_and_an_undefined_one():
    assert NUMBERED.search("(Seed 002: 13.3 minutes)") and NUMBERED.search("SEED_000_E2B_QAT")
    assert not NUMBERED.search("QUALITY_SEED = 20260925") and not NUMBERED.search("40 seeded questions")
    assert CITATION.findall("# [gce-t4-article]: 362 s; [ml-team] tag; [sagemaker-gemma-repo]") == [
        "gce-t4-article", "sagemaker-gemma-repo"]
