"""Every generated file of the checkout, written from one place: `make generate` (`python -m gemma4_t4.generate`)
writes them, `make check-generated` (`--check`, part of `make test`) exits 1 naming each file that differs.

- components/schema.json: the package schema, as Pulumi's analyzer makes it (components/package.py, in a
  process of its own: pulumi.provider cannot load beside google-cloud-compute).
- Pulumi.yaml: its `config:` section, from `config:` to the end (everything above it is kept as it is).
- docs/config-reference.md: every key as that section has it.
- README.md: each block between `<!-- generated: NAME -->` and `<!-- end generated: NAME -->` (the cost table).

The section and the reference read their descriptions from the schema made in the same run, so one run
after a change to the components' Args leaves every file current.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import project_file
from .cli.cost import readme_table

Schema = Mapping[str, Any]


@dataclass(frozen=True)
class Generated:
    """One generated file: its path in the checkout, and its full text from the file's current text and
    the package schema."""

    path: str
    make: Callable[[str, Schema], str]


def schema_text() -> str:
    """components/schema.json as the analyzer makes it now (`python -m gemma4_t4.components.package`)."""
    done = subprocess.run([sys.executable, "-m", "gemma4_t4.components.package"],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"generate: the package schema could not be made:\n{done.stderr[-3000:]}")
    return done.stdout


def with_config_section(current: str, schema: Schema) -> str:
    """CURRENT (Pulumi.yaml) with its `config:` section, to the end of the file, made anew."""
    found = re.search(r"^config:", current, re.MULTILINE)
    if found is None:
        raise SystemExit("generate: Pulumi.yaml has no `config:` line to replace from")
    return current[:found.start()] + project_file.section_text(schema)


def with_block(current: str, name: str, body: str) -> str:
    """CURRENT with the lines between `<!-- generated: NAME ...-->` and `<!-- end generated: NAME -->`
    replaced by BODY (the markers stay)."""
    start = re.search(rf"^<!-- generated: {re.escape(name)}\b.*-->\n", current, re.MULTILINE)
    end = re.search(rf"^<!-- end generated: {re.escape(name)} -->$", current, re.MULTILINE)
    if start is None or end is None or end.start() < start.end():
        raise SystemExit(f"generate: no `<!-- generated: {name} -->` ... `<!-- end generated: {name} -->` block")
    return current[:start.end()] + body.rstrip("\n") + "\n" + current[end.start():]


GENERATED = [
    Generated("components/schema.json", lambda current, schema: json.dumps(schema, indent=2, sort_keys=True) + "\n"),
    Generated("Pulumi.yaml", with_config_section),
    Generated("docs/config-reference.md", lambda current, schema: project_file.reference(schema)),
    Generated("README.md", lambda current, schema: with_block(current, "cost table", readme_table())),
]


def made(root: Path) -> dict[str, tuple[str, str]]:
    """{path: (its text in ROOT, its text as generated)} for every generated file."""
    schema = json.loads(schema_text())
    result: dict[str, tuple[str, str]] = {}
    for file in GENERATED:
        current = (root / file.path).read_text()
        result[file.path] = (current, file.make(current, schema))
    return result


def stale(root: Path) -> list[str]:
    """The generated files in ROOT that `make generate` would change."""
    return [path for path, (current, fresh) in made(root).items() if current != fresh]


def write(root: Path) -> list[str]:
    """Write every generated file that differs in ROOT; the paths written."""
    written: list[str] = []
    for path, (current, fresh) in made(root).items():
        if current != fresh:
            (root / path).write_text(fresh)
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gemma4_t4.generate",
                                     description="Write every generated file of the checkout (make generate).")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each file that differs")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the checkout (default: the current folder)")
    args = parser.parse_args(argv)
    if args.check:
        differ = stale(args.root)
        for path in differ:
            print(f"{path}: differs from what `make generate` writes; run `make generate` and commit it")
        return 1 if differ else 0
    for path in write(args.root):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
