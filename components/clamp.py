"""The Turing clamp's source, shared by both clouds: the GCE guest ships it in its user-data (gce/guest.py) and
the SageMaker image builds it (sagemaker/build_context.py). Package data: the project's turing/ folder, installed as
`gemma4_t4.turing`, in a checkout or an installed wheel."""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable

CLAMP_DIR = files("gemma4_t4.turing")


def clamp_source() -> dict[str, Traversable]:
    """The clamp's distribution as pip builds it: its pyproject.toml and package, by relative path."""
    package = CLAMP_DIR / "turing_clamp"
    sources = {"pyproject.toml": CLAMP_DIR / "pyproject.toml",
               **{f"turing_clamp/{f.name}": f for f in sorted(package.iterdir(), key=lambda f: f.name)
                  if f.name.endswith(".py")}}
    if not sources["pyproject.toml"].is_file() or len(sources) < 2:
        raise FileNotFoundError(f"the Turing clamp's source is missing from {CLAMP_DIR}: reinstall gemma4-t4")
    return sources
