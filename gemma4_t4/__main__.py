"""`python -m gemma4_t4` and the `gemma4-t4` command: the operator's command line (gemma4_t4.cli)."""

import re
import sys
from importlib import metadata

EXTRA = "ops"


def missing_extra() -> list[str]:
    """The distributions of the operator tools' extra (pyproject's [ops]) this interpreter lacks: the library
    installs without them. None when run from a checkout that was never installed (no metadata to read)."""
    try:
        requires = metadata.requires("gemma4-t4") or []
    except metadata.PackageNotFoundError:
        return []
    wanted = [req for req in requires if re.search(rf"""extra\s*==\s*["']{EXTRA}["']""", req)]
    missing = []
    for req in wanted:
        name = re.match(r"[A-Za-z0-9._-]+", req)
        try:
            metadata.version(name.group(0) if name else req)
        except metadata.PackageNotFoundError:
            missing.append(name.group(0) if name else req)
    return missing


def run() -> int:
    missing = missing_extra()
    if missing:  # one line, as every other failure (exit 1: the environment, not the command, is wrong)
        sys.stderr.write(f"gemma4-t4: the command line needs the [{EXTRA}] extra (missing: {', '.join(missing)}): "
                         f"pip install 'gemma4-t4[{EXTRA}]'\n")
        return 1
    try:  # Ctrl-C while the command line's libraries load is an interrupt too, not a traceback
        from gemma4_t4.cli import main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(run())
