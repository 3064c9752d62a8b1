"""The vLLM general plugin: on a GPU below compute capability 8, clamp the attention launches.

Two hooks in vLLM's Triton unified-attention module, both looked up by name at call time:
- ``_get_tile_size``: the stock tile, halved until the kernel fits the device's real
  per-block shared memory. It feeds the prefill/2D launch, the 3D decode launch and the
  segment reduce alike, so all three agree on the tile.
- ``kernel_unified_attention``: a launch proxy that gives wide heads 8 warps (spill-free on
  sm_75) when vLLM leaves warps at Triton's default, and refuses, with the numbers, any launch
  that still cannot fit (BLOCK_M grows with the query heads per KV head; the clamp cannot
  lower it) instead of letting Triton fail later with OutOfResources.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any

from . import contract, policy

log = logging.getLogger("turing_clamp")


def register() -> None:
    """Entry point (group vllm.general_plugins), run once in every vLLM process.

    vLLM swallows import errors of a plugin's module but not exceptions raised here: a clamp
    that cannot apply stops the engine with the reason."""
    capability = _device_capability()
    if capability is None or capability[0] >= policy.FIRST_UNCLAMPED_MAJOR:
        return  # CPU, ROCm, or Ampere and newer: vLLM's own launch parameters stand.
    apply(contract.load_module(), device_shared_limit)
    log.info("Turing clamp active: sm_%d%d, vLLM %s", capability[0], capability[1], contract.vllm_version())


def _device_capability() -> tuple[int, int] | None:
    from vllm.platforms import current_platform

    if not current_platform.is_cuda():
        return None
    capability = current_platform.get_device_capability()
    return None if capability is None else (capability.major, capability.minor)


@functools.cache
def _shared_limit_of(device: int) -> int:
    import triton

    return int(triton.runtime.driver.active.utils.get_device_properties(device)["max_shared_mem"])


def device_shared_limit() -> int:
    """The limit Triton's loader compares a kernel's shared memory against, for this device."""
    import torch

    return _shared_limit_of(torch.cuda.current_device())


def apply(module: ModuleType, shared_limit: Callable[[], int]) -> None:
    """Install both hooks into ``module``; idempotent; refuses on a launcher it does not know."""
    if getattr(module, "_turing_clamp_applied", False):
        return
    found = contract.problems(module)
    if found:
        raise policy.ClampError(contract.describe(found))

    stock_tile_size = module._get_tile_size

    @functools.wraps(stock_tile_size)
    def _get_tile_size(head_size: int, sliding_window: int, element_size: int, is_prefill: bool) -> int:
        stock = stock_tile_size(head_size, sliding_window, element_size, is_prefill)
        return policy.clamp_tile(stock, policy.next_power_of_2(head_size), element_size, policy.MIN_BLOCK_M,
                                 shared_limit())

    module._get_tile_size = _get_tile_size
    module.kernel_unified_attention = ClampedKernel(module.kernel_unified_attention, shared_limit)
    module._turing_clamp_applied = True


_HOOKED = ("_get_tile_size", "kernel_unified_attention", "_turing_clamp_applied")


@contextlib.contextmanager
def applied(module: ModuleType, shared_limit: Callable[[], int]):
    """The clamp in ``module`` for the duration of a block (the fit checker, GPU numerics)."""
    saved = {name: module.__dict__[name] for name in _HOOKED if name in module.__dict__}
    apply(module, shared_limit)
    try:
        yield module
    finally:
        for name in _HOOKED:
            if name in saved:
                setattr(module, name, saved[name])
            else:
                module.__dict__.pop(name, None)


class ClampedKernel:
    """Stands in for the JIT kernel: ``kernel[grid](**kwargs)`` checks and completes the launch."""

    def __init__(self, kernel: Any, shared_limit: Callable[[], int]):
        self._turing_clamp_inner = kernel
        self._shared_limit = shared_limit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._turing_clamp_inner, name)

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        def launch(*args: Any, **kwargs: Any) -> Any:
            return self._turing_clamp_inner[grid](*args, **self.launch_kwargs(kwargs))

        return launch

    def launch_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        head, block_m, tile = kwargs["HEAD_SIZE_PADDED"], kwargs["BLOCK_M"], kwargs["TILE_SIZE"]
        element_size = kwargs["query_ptr"].element_size()
        limit = self._shared_limit()
        need = policy.shared_bytes(head, element_size, block_m, tile)
        if need > limit:
            raise policy.ClampError(
                f"Turing clamp: this attention launch cannot fit: head {head}, BLOCK_M {block_m} "
                f"({kwargs.get('num_queries_per_kv')} query heads per KV head), tile {tile} needs {need:,} B of "
                f"shared memory per block; the device allows {limit:,} B"
            )
        warps = policy.num_warps_for(head)
        if warps is not None and "num_warps" not in kwargs:
            kwargs = {**kwargs, "num_warps": warps}
        return kwargs
