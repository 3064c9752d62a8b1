"""The clamp's decisions, as pure functions of the launch shape and the device limit."""

from __future__ import annotations

# Below this compute-capability major the clamp is active (Turing and older).
FIRST_UNCLAMPED_MAJOR = 8
# tl.dot needs at least 16 rows and columns; vLLM's tiles are powers of two from 16.
MIN_TILE = 16
MIN_BLOCK_M = 16
# Measured with `gemma4_t4 fit` on sm_75: 4 warps spill at head 256 (tile 32) and head 512
# (tile 16); 8 warps leave 0 bytes of spills in every Gemma 4 variant.
WIDE_HEAD_WARPS = 8
WIDE_HEAD_MIN = 256


class ClampError(RuntimeError):
    """The clamp cannot make a launch fit, or cannot find what it hooks: never a silent pass."""


def next_power_of_2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def shared_bytes(head_size_padded: int, element_size: int, block_m: int, tile: int) -> int:
    """Shared memory the kernel needs per block on sm_75, measured by compiling it: Q and the
    accumulator staging (2 x BLOCK_M rows) plus K and V tiles (2 x TILE rows) of the padded head.
    (The seed's model, (BLOCK_M + 2*TILE) * head * 2, under-counts by BLOCK_M * head * 2.)"""
    return element_size * head_size_padded * (2 * block_m + 2 * tile)


def block_m_for(num_queries_per_kv: int) -> int:
    """vLLM's own choice, which the clamp cannot lower: BLOCK_M holds every query head of a KV group."""
    return MIN_BLOCK_M if num_queries_per_kv <= MIN_BLOCK_M else next_power_of_2(num_queries_per_kv)


def clamp_tile(stock_tile: int, head_size_padded: int, element_size: int, block_m: int, limit: int) -> int:
    """The largest power-of-two tile, at most the stock one, that fits ``limit`` bytes."""
    tile = stock_tile
    while tile > MIN_TILE and shared_bytes(head_size_padded, element_size, block_m, tile) > limit:
        tile //= 2
    need = shared_bytes(head_size_padded, element_size, block_m, tile)
    if need > limit:
        raise ClampError(
            f"no tile fits: head {head_size_padded}, BLOCK_M {block_m}, tile {tile} needs {need:,} B of shared "
            f"memory per block and the device allows {limit:,} B (BLOCK_M is at least the query heads per KV head)"
        )
    return tile


def num_warps_for(head_size_padded: int) -> int | None:
    """Warps for a launch vLLM leaves at Triton's default; None keeps the default."""
    return WIDE_HEAD_WARPS if head_size_padded >= WIDE_HEAD_MIN else None
