"""The clamp's source and the SageMaker image's build context: package data of gemma4_t4, read with
importlib.resources.files("gemma4_t4.turing") (components/clamp.py). The clamp that runs is the
gemma4-turing-clamp distribution (pyproject.toml here), imported as turing_clamp."""

# Imported by its folder's name from the repository root, it would be a second copy of every module.
if __name__ != "gemma4_t4.turing":
    raise ImportError("turing/ is the package gemma4_t4.turing (pyproject.toml: package-dir)")
