"""The GCE guest's files (the bootstrap, scripts, systemd units, the vLLM locks): package data of
gemma4_t4, read with importlib.resources.files("gemma4_t4.cloudinit") (components/gce/guest.py). Nothing here
is imported; this file makes the folder the package the data belongs to, and keeps `import cloudinit` at
the repository root from meaning cloud-init's module."""

# Imported by its folder's name from the repository root, it would be a second copy of every module.
if __name__ != "gemma4_t4.cloudinit":
    raise ImportError("cloudinit/ is the package gemma4_t4.cloudinit (pyproject.toml: package-dir)")
