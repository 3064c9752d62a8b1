"""`make generate` writes every generated file and `make check-generated` (in `make test`, so in CI) fails while
it would change one: run on a copy of the generated files, a stale one is named, rewritten, then passes."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import REPO

from gemma4_t4 import generate


def _run(root, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gemma4_t4.generate", "--root", str(root), *args],
                          capture_output=True, text=True, cwd=REPO, timeout=300)


def test_check_names_each_stale_file_and_generate_rewrites_only_what_it_owns(tmp_path):
    for file in generate.GENERATED:
        (tmp_path / file.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / file.path, tmp_path / file.path)
    readme, project = tmp_path / "README.md", tmp_path / "Pulumi.yaml"
    readme.write_text(readme.read_text().replace("| serving, per hour | $", "| serving, per hour | $9"))
    project.write_text(project.read_text().replace("  # Both clouds", "  # hand-edited\n  # Both clouds"))
    (tmp_path / "docs/config-reference.md").write_text("stale\n")

    checked = _run(tmp_path, "--check")
    assert checked.returncode == 1
    named = sorted(line.split(":", 1)[0] for line in checked.stdout.splitlines())
    assert named == ["Pulumi.yaml", "README.md", "docs/config-reference.md"], checked.stdout

    assert _run(tmp_path).returncode == 0
    for file in generate.GENERATED:
        assert (tmp_path / file.path).read_text() == (REPO / file.path).read_text(), file.path
    assert _run(tmp_path, "--check").returncode == 0


def test_the_checkout_is_as_make_generate_leaves_it():
    checked = _run(REPO, "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr[-2000:]


def test_a_generated_block_needs_both_markers():
    with pytest.raises(SystemExit, match="end generated: cost table"):
        generate.with_block("<!-- generated: cost table -->\n| old |\n", "cost table", "| new |")
    text = "above\n<!-- generated: cost table (how) -->\n| old |\n<!-- end generated: cost table -->\nbelow\n"
    assert generate.with_block(text, "cost table", "| new |\n") == text.replace("| old |", "| new |")
