"""`python -m gemma4_t4` and the `gemma4-t4` command: the operator's command line (gemma4_t4.cli)."""

import importlib.util
import re
import shlex
import sys
from importlib import metadata

EXTRA = "ops"


def missing_extra() -> list[str]:
    """The requirements of the operator tools' extra (pyproject's [ops]) this interpreter lacks, as the package's
    metadata states them (`rich<16,>=14`): the library installs without them. None when run from a checkout that was
    never installed (no metadata to read)."""
    try:
        requires = metadata.requires("gemma4-t4") or []
    except metadata.PackageNotFoundError:
        return []
    wanted = [req.split(";", 1)[0].strip() for req in requires
              if re.search(rf"""extra\s*==\s*["']{EXTRA}["']""", req)]
    missing = []
    for req in wanted:
        name = re.match(r"[A-Za-z0-9._-]+", req)
        try:
            metadata.version(name.group(0) if name else req)
        except metadata.PackageNotFoundError:
            missing.append(req)
    return missing


def install_line(requirements: list[str]) -> str:
    """The command that installs REQUIREMENTS into this interpreter, wherever the package came from: the packages
    themselves (all on PyPI), not `gemma4-t4[ops]`, which names a package PyPI does not have. With this interpreter's
    pip, or uv's where it has none (a virtualenv uv made)."""
    packages = " ".join(shlex.quote(req) for req in requirements)
    python = shlex.quote(sys.executable)
    if importlib.util.find_spec("pip") is None:
        return f"uv pip install --python {python} {packages}"
    return f"{python} -m pip install {packages}"


def run() -> int:
    missing = missing_extra()
    if missing:  # one line, as every other failure (exit 1: the environment, not the command, is wrong)
        names = ", ".join(re.split(r"[<>=!~ \[]", req, maxsplit=1)[0] for req in missing)
        sys.stderr.write(f"gemma4-t4: the command line needs the [{EXTRA}] extra (missing: {names}): "
                         f"{install_line(missing)}\n")
        return 1
    try:  # Ctrl-C while the command line's libraries load is an interrupt too, not a traceback
        from gemma4_t4.cli import main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(run())
