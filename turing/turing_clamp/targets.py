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
