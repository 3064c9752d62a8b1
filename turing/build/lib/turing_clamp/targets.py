"""What the clamp must fit: the Turing target and the attention shapes Gemma 4 launches.

Standard library only; gemma4_t4.catalog re-exports these, so each fact is written once.
"""

SM75 = (7, 5)
# cudaDevAttrMaxSharedMemoryPerBlockOptin on a Tesla T4: "Hardware limit: 65536".
SM75_SHARED_LIMIT = 65536
WARP_SIZE = 32

# Gemma 4: sliding-window layers use head 256, global layers head 512, with a 512-token window
# on E2B/E4B. Every query-per-KV ratio up to 16 is covered: vLLM keeps BLOCK_M at 16 for all
# of them, so any Gemma 4 build with such a ratio is covered without naming its config.
GEMMA4_HEAD_SIZES = (256, 512)
GEMMA4_SLIDING_WINDOW = 512
GEMMA4_QUERIES_PER_KV = (1, 2, 4, 8, 16)
KV_BLOCK_SIZE = 16

# --- tensor parallelism -------------------------------------------------------------------------
# vLLM splits the query heads evenly over the ranks and the KV heads too, or, where there are
# fewer KV heads than ranks, gives every rank one (replicated) KV head (vllm/config/model.py
# get_num_kv_heads; the attention layer asserts that one count divides the other). Each rank then
# launches the attention kernel with its own head counts, and num_query_heads is a constexpr of
# the kernel: every per-rank shape is a kernel of its own, which the fit checker compiles.
TENSOR_PARALLEL_SIZES = (1, 2, 4)
# (query heads, KV heads) of each Gemma 4 build's attention, per head size: config.json's
# num_attention_heads with num_key_value_heads (head_dim 256, sliding layers) and
# num_global_key_value_heads (global_head_dim 512, global layers; num_key_value_heads where
# absent). The same configs as gemma4_t4.catalog.models (a test holds the two equal).
GEMMA4_ATTENTION = {
    "E2B": {256: (8, 1), 512: (8, 1)},
    "E4B": {256: (8, 2), 512: (8, 2)},
    "26B-A4B": {256: (16, 8), 512: (16, 2)},
}


def heads_per_rank(query_heads: int, kv_heads: int, tensor_parallel_size: int) -> tuple[int, int]:
    """(query heads, KV heads) one rank holds, as vLLM splits them; ValueError where vLLM refuses."""
    if query_heads % tensor_parallel_size:
        raise ValueError(f"{query_heads} query heads do not split over {tensor_parallel_size} ranks")
    if kv_heads >= tensor_parallel_size and kv_heads % tensor_parallel_size:
        raise ValueError(f"{kv_heads} KV heads do not split over {tensor_parallel_size} ranks")
    if kv_heads < tensor_parallel_size and tensor_parallel_size % kv_heads:
        raise ValueError(f"{kv_heads} KV heads cannot be replicated evenly over {tensor_parallel_size} ranks")
    return query_heads // tensor_parallel_size, max(1, kv_heads // tensor_parallel_size)


def per_rank_shapes() -> dict[tuple[int, int, int], list[tuple[str, int]]]:
    """{(head size, query heads, KV heads) of one rank: [(build, tensor parallel size), ...]} for
    every Gemma 4 build at every tensor parallel size."""
    shapes: dict[tuple[int, int, int], list[tuple[str, int]]] = {}
    for build, by_head in GEMMA4_ATTENTION.items():
        for head, (query_heads, kv_heads) in by_head.items():
            for tp in TENSOR_PARALLEL_SIZES:
                shapes.setdefault((head, *heads_per_rank(query_heads, kv_heads, tp)), []).append((build, tp))
    return shapes
