"""The memory plan: what vLLM will find on each GPU at start-up, worked out before anything bills.

Weights, vLLM's overheads and the KV cache per request from the model's own config (layers,
KV heads, head sizes; a sliding-window layer holds only its window; layers that reuse another
layer's KV hold none), against what vLLM may claim: the GPU's total x gpuMemoryUtilization.
Split over N GPUs (tensor parallelism) each holds 1/N of the weights and of the KV heads (one
replica where there are fewer KV heads than GPUs), and the plan is that of one GPU.
The arithmetic is vLLM's (gemma4_t4.catalog.vllm says where each step comes from); the plan
prints the two lines vLLM prints, "GPU KV cache size" and "Maximum concurrency".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from gemma4_t4 import catalog
from gemma4_t4.catalog import vllm as engine

GIB = catalog.GIB
DTYPE_BYTES = {"float16": 2, "half": 2, "bfloat16": 2, "float32": 4, "auto": 2}


class UnsizableConfig(ValueError):
    """A config.json this plan cannot read the KV cache from (an unsupported architecture)."""


@dataclass(frozen=True)
class KvLayer:
    bytes_per_token: int
    window: int | None  # None: full attention, every token of the request


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    text = config.get("text_config")
    return text if isinstance(text, Mapping) else config


def _int(config: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if value is None:
        value = default
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise UnsizableConfig(f"config.json has no usable {key} ({value!r})")
    return value


def attention_heads(config: Mapping[str, Any]) -> set[tuple[int, int]]:
    """(query heads, KV heads) of the model's attention layers: one pair per kind of layer."""
    text = _text_config(config)
    heads = _int(text, "num_attention_heads")
    kv_heads = _int(text, "num_key_value_heads", heads)
    return {(heads, kv_heads), (heads, _int(text, "num_global_key_value_heads", kv_heads))}


def kv_layers(config: Mapping[str, Any], kv_dtype_bytes: int, tensor_parallel_size: int = 1) -> list[KvLayer]:
    """The layers that hold KV cache on one GPU, each with its bytes per token and window."""
    text = _text_config(config)
    if any(k in text for k in ("kv_lora_rank", "ssm_state_size", "layers_block_type", "hybrid_override_pattern")):
        raise UnsizableConfig(f"{text.get('model_type', 'this model')}'s cache (MLA or state-space layers) "
                              "is not sized by this plan")
    layers = _int(text, "num_hidden_layers")
    heads = _int(text, "num_attention_heads")
    kv_heads = _int(text, "num_key_value_heads", heads)
    head_dim = _int(text, "head_dim") if text.get("head_dim") else _int(text, "hidden_size") // heads
    global_kv_heads = _int(text, "num_global_key_value_heads", kv_heads)
    global_head_dim = _int(text, "global_head_dim", head_dim)
    window = text.get("sliding_window")
    types = text.get("layer_types")
    if types is None:
        pattern = text.get("sliding_window_pattern")
        if window and isinstance(pattern, int) and pattern > 0:
            types = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(layers)]
        elif window and text.get("use_sliding_window", True):
            types = ["sliding_attention"] * layers
        else:
            types = ["full_attention"] * layers
    if len(types) != layers or not set(types) <= {"full_attention", "sliding_attention"}:
        raise UnsizableConfig(f"config.json's layer_types ({sorted(set(types))}) are not full/sliding attention")
    if "sliding_attention" in types and not (isinstance(window, int) and window > 0):
        raise UnsizableConfig("config.json has sliding-window layers but no sliding_window")
    # The last num_kv_shared_layers layers read earlier layers' KV and store none (Gemma 3n, 4).
    owners = layers - int(text.get("num_kv_shared_layers") or 0)
    result = []
    def per_gpu(total: int) -> int:  # vLLM's get_num_kv_heads
        return max(1, total // tensor_parallel_size)

    for kind in types[:owners]:
        if kind == "full_attention":
            result.append(KvLayer(2 * per_gpu(global_kv_heads) * global_head_dim * kv_dtype_bytes, None))
        else:
            result.append(KvLayer(2 * per_gpu(kv_heads) * head_dim * kv_dtype_bytes, window))
    return result


def context_length(config: Mapping[str, Any]) -> int:
    return _int(_text_config(config), "max_position_embeddings")


def bytes_per_request(layers: list[KvLayer], max_model_len: int, max_num_seqs: int) -> int:
    """KV bytes one request of max_model_len tokens holds, in whole blocks, as vLLM reserves it."""
    block = engine.KV_BLOCK_SIZE
    batched = min(engine.DEFAULT_MAX_NUM_BATCHED_TOKENS, max_num_seqs * max_model_len)
    in_flight = engine.BATCHES_IN_FLIGHT * batched
    total = 0
    for layer in layers:
        if layer.window is None:
            blocks = math.ceil(max_model_len / block)
        else:
            # +1: the window need not start at a block boundary.
            blocks = math.ceil(min(layer.window - 1 + in_flight, max_model_len) / block) + 1
        total += blocks * block * layer.bytes_per_token
    return total


@dataclass(frozen=True)
class GpuMemoryPlan:
    model: str
    gpu: str
    gpu_total_bytes: int
    gpu_memory_utilization: float
    weights_bytes: int
    weights_source: str
    overhead_bytes: int
    kv_cache_bytes: int  # may be negative: the weights alone do not fit
    bytes_per_request: int
    max_model_len: int
    context_length: int
    tensor_parallel_size: int = 1
    model_weights_bytes: int = 0  # all GPUs together (weights_bytes is one GPU's share)

    @property
    def budget_bytes(self) -> int:
        return int(self.gpu_total_bytes * self.gpu_memory_utilization)

    @property
    def max_concurrency(self) -> float:
        return max(self.kv_cache_bytes, 0) / self.bytes_per_request

    @property
    def kv_cache_tokens(self) -> int:
        return int(self.max_concurrency * self.max_model_len)

    @property
    def where(self) -> str:
        """"a Tesla T4", or "each of 2 Tesla T4s" """
        return f"a {self.gpu}" if self.tensor_parallel_size == 1 else f"each of {self.tensor_parallel_size} {self.gpu}s"

    def summary(self) -> str:
        gib = GIB
        share = (f" (1/{self.tensor_parallel_size} of {self.model_weights_bytes / gib:.2f})"
                 if self.tensor_parallel_size > 1 else "")
        return (f"{self.model} on {self.where}: {self.gpu_memory_utilization} x {self.gpu_total_bytes / gib:.2f} GiB "
                f"= {self.budget_bytes / gib:.2f} GiB for vLLM; weights {self.weights_bytes / gib:.2f} GiB{share}, "
                f"overheads {self.overhead_bytes / gib:.2f} GiB, KV cache {self.kv_cache_bytes / gib:.2f} GiB: "
                f"GPU KV cache size {self.kv_cache_tokens:,} tokens, maximum concurrency for {self.max_model_len:,} "
                f"tokens per request {self.max_concurrency:.2f}x")

    def as_output(self) -> dict[str, Any]:
        """The plan as a stack output: GiB to two places, as vLLM logs them."""
        out: dict[str, Any] = {k: v for k, v in asdict(self).items() if not k.endswith("_bytes")}
        for name in ("gpu_total", "budget", "weights", "model_weights", "overhead", "kv_cache"):
            out[f"{name}_gib"] = round(getattr(self, f"{name}_bytes") / GIB, 2)
        out["bytes_per_request"] = self.bytes_per_request
        out["kv_cache_tokens"] = self.kv_cache_tokens
        out["max_concurrency"] = round(self.max_concurrency, 2)
        return out


def weights_per_gpu(weights_bytes: int, tensor_parallel_size: int) -> int:
    """One GPU's share of the loaded weights: the tensors split, each process's load overhead whole."""
    load_overhead = int(engine.LOAD_OVERHEAD_GIB * GIB)
    return (weights_bytes - load_overhead) // tensor_parallel_size + load_overhead


def plan_memory(model: str, config: Mapping[str, Any], weights_bytes: int, weights_source: str, gpu: catalog.Gpu,
                dtype: str, gpu_memory_utilization: float, max_model_len: int, max_num_seqs: int,
                tensor_parallel_size: int = 1) -> GpuMemoryPlan:
    """One GPU's plan; ``weights_bytes`` is the whole model's loaded size."""
    layers = kv_layers(config, DTYPE_BYTES[dtype], tensor_parallel_size)
    overhead = int(engine.RUNTIME_OVERHEAD_GIB * GIB)
    if tensor_parallel_size > 1:
        overhead += int(engine.TP_COMMUNICATION_OVERHEAD_GIB * GIB)
    budget = int(gpu.memory_bytes * gpu_memory_utilization)
    share = weights_per_gpu(weights_bytes, tensor_parallel_size)
    return GpuMemoryPlan(
        model=model, gpu=gpu.name, gpu_total_bytes=gpu.memory_bytes, gpu_memory_utilization=gpu_memory_utilization,
        weights_bytes=share, weights_source=weights_source, overhead_bytes=overhead,
        kv_cache_bytes=budget - share - overhead,
        bytes_per_request=bytes_per_request(layers, max_model_len, max_num_seqs), max_model_len=max_model_len,
        context_length=context_length(config), tensor_parallel_size=tensor_parallel_size,
        model_weights_bytes=weights_bytes)


def longest_fitting_len(plan: GpuMemoryPlan, config: Mapping[str, Any], dtype: str, max_num_seqs: int,
                        step: int = 256) -> int:
    """The longest max_model_len (a multiple of ``step``) of which one request fits; 0 if none."""
    layers = kv_layers(config, DTYPE_BYTES[dtype], plan.tensor_parallel_size)
    low, high = 0, min(plan.max_model_len, plan.context_length) // step
    while low < high:
        mid = (low + high + 1) // 2
        if bytes_per_request(layers, mid * step, max_num_seqs) <= plan.kv_cache_bytes:
            low = mid
        else:
            high = mid - 1
    return low * step
