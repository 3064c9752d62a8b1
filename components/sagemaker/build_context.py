"""The clamped image's build context (turing/'s Dockerfile, buildspec, scripts and the clamp's source) and its tag,
a hash of that context: what the image component uploads and the build steps build, and what tells them apart.
Below both (the local build step checks the context it writes is the one the tag names)."""

import hashlib
from importlib.resources.abc import Traversable

from .. import clamp

__all__ = ["build_context_files", "context_hash", "image_tag"]


def build_context_files() -> dict[str, Traversable]:
    """Archive path -> file: what the Dockerfile COPYs (the clamp's source and the gate), plus the buildspec."""
    return {**{name: clamp.CLAMP_DIR / name for name in ("Dockerfile", "buildspec.yml", "ecr-login.sh",
                                                        "build-image.sh", "sm75_gate.py",
                                                        "hf_token_entrypoint.py")},
            **clamp.clamp_source()}


def image_tag(vllm_version: str, base_image: str) -> str:
    """The clamped image's tag: a hash of its build context, so an unchanged clamp is not rebuilt."""
    return f"vllm-{vllm_version}-sm75-{context_hash(base_image)}"


def context_hash(base_image: str) -> str:
    digest = hashlib.sha256(base_image.encode())
    for name, path in sorted(build_context_files().items()):
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
