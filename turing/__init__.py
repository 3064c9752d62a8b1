"""The clamp's source and the SageMaker image's build context: package data of gemma4_t4, read with
importlib.resources.files("gemma4_t4.turing") (components/clamp.py). The clamp that runs is the
gemma4-turing-clamp distribution (pyproject.toml here), imported as turing_clamp.

Data only: nothing imports from inside this package, so the clamp loads under one module name. Through
gemma4_t4.turing.turing_clamp it would be a second copy of every module (its own policy, its own patched state)
beside turing_clamp's. An empty __path__ keeps the import system out (an installed wheel); setuptools' editable
finder maps a mapped package's children by name whatever __path__ says, so the finder first on sys.meta_path
refuses them in a checkout too. importlib.resources reads the files from the package's own folder (its loader's
path, and find_spec's submodule_search_locations are left as they were)."""

from __future__ import annotations

import sys
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from typing import Any

# Imported by its folder's name from the repository root, it would be a second copy of every module.
if __name__ != "gemma4_t4.turing":
    raise ImportError("turing/ is the package gemma4_t4.turing (pyproject.toml: package-dir)")


class DataOnly(MetaPathFinder):
    """Refuses every module under gemma4_t4.turing, naming the one to import instead."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if not fullname.startswith("gemma4_t4.turing."):
            return None
        wanted = fullname.removeprefix("gemma4_t4.turing.")
        raise ModuleNotFoundError(f"gemma4_t4.turing is package data, not code: import {wanted} (the "
                                  f"gemma4-turing-clamp distribution), not {fullname}", name=fullname)


__path__ = []
if not any(type(finder).__name__ == "DataOnly" and type(finder).__module__ == __name__ for finder in sys.meta_path):
    sys.meta_path.insert(0, DataOnly())
