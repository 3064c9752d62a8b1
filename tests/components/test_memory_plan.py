"""The memory plan against vLLM's own start-up lines in the published logs ([gce-t4-article], [gemma4-dev-repo]), and its arithmetic."""

from __future__ import annotations

import pytest

from gemma4_t4 import catalog
from gemma4_t4.catalog import vllm as engine
from gemma4_t4.components import memory
from gemma4_t4.components.model_facts import ModelFacts, from_catalog

E2B = catalog.find_model("google/gemma-4-E2B-it-qat-w4a16-ct")


def _seed_plan(model: catalog.Model, weights_gib: float) -> memory.GpuMemoryPlan:
    seed = engine.MEASURED_T4_E2B_QAT
    return memory.plan_memory(model.hf_id, model.config, int(weights_gib * catalog.GIB), "seed", catalog.TESLA_T4,
                              seed["dtype"], seed["gpu_memory_utilization"], seed["max_model_len"],
                              seed["max_num_seqs"])


def test_e2b_qat_plan_matches_the_seeds_engine_log():
    """[gce-t4-article]: "Available KV cache memory: 4.66 GiB", "GPU KV cache size: 519,681 tokens",
    "Maximum concurrency for 16,384 tokens per request: 31.72x"."""
    seed = engine.MEASURED_T4_E2B_QAT
    plan = _seed_plan(E2B, from_catalog(E2B).weights_bytes("float16") / catalog.GIB)
    error = plan.kv_cache_tokens / seed["kv_cache_tokens"] - 1
    print(f"\nE2B QAT: plan {plan.kv_cache_tokens:,} tokens / {plan.max_concurrency:.2f}x / "
          f"{plan.kv_cache_bytes / catalog.GIB:.2f} GiB KV; seed {seed['kv_cache_tokens']:,} / "
          f"{seed['max_concurrency']}x / {seed['kv_cache_gib']} GiB; error {error:+.2%}")
    assert abs(error) < 0.15
    assert round(plan.kv_cache_bytes / catalog.GIB, 2) == seed["kv_cache_gib"]
    assert plan.kv_cache_tokens == int(plan.max_concurrency * 16384), "vLLM's token figure is concurrency x length"


def test_e2b_bf16_plan_matches_its_logged_kv_cache():
    """The same rig serving the bf16 build: 9.8 GiB of weights, 315,974 KV tokens (not fitted)."""
    bf16 = catalog.find_model("google/gemma-4-E2B-it")
    plan = _seed_plan(bf16, engine.MEASURED_T4_E2B_BF16["weights_gib"])
    error = plan.kv_cache_tokens / engine.MEASURED_T4_E2B_BF16["kv_cache_tokens"] - 1
    print(f"\nE2B bf16: plan {plan.kv_cache_tokens:,} tokens; log 315,974; error {error:+.2%}")
    assert abs(error) < 0.15


def test_e2b_layers_that_hold_kv_shared_layers_hold_none_and_sliding_ones_hold_their_window():
    layers = memory.kv_layers(E2B.config, 2)
    assert len(layers) == 15, "35 layers, the last 20 reuse earlier layers' KV"
    full = [layer for layer in layers if layer.window is None]
    assert len(full) == 3 and {layer.bytes_per_token for layer in full} == {2 * 1 * 512 * 2}
    assert {layer.window for layer in layers if layer.window} == {512}
    # Doubling the length grows only the full-attention layers' share.
    grown = memory.bytes_per_request(layers, 32768, 8) - memory.bytes_per_request(layers, 16384, 8)
    assert grown == 3 * 16384 * 2048


def test_a_plain_config_without_layer_types_is_all_full_attention():
    config = {"num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "hidden_size": 896,
              "sliding_window": 32768, "use_sliding_window": False, "max_position_embeddings": 32768}
    layers = memory.kv_layers(config, 2)
    assert len(layers) == 24 and all(layer.window is None and layer.bytes_per_token == 2 * 2 * 64 * 2
                                     for layer in layers)


@pytest.mark.parametrize("config", [
    {"model_type": "deepseek_v3", "kv_lora_rank": 512, "num_hidden_layers": 61},
    {"model_type": "mamba", "ssm_state_size": 16, "num_hidden_layers": 64},
    {"num_hidden_layers": 2, "num_attention_heads": 4, "layer_types": ["full_attention", "linear_attention"],
     "hidden_size": 64},
    {"num_attention_heads": 4},
])
def test_configs_the_plan_cannot_read_are_unsizable_not_guessed(config):
    with pytest.raises(memory.UnsizableConfig):
        memory.kv_layers(config, 2)


def test_weights_from_hub_parameter_counts_match_the_measured_load():
    """The bf16 E2B checkpoint is 10,246,621,918 bytes of BF16 tensors ([gce-t4-article]); sized from
    parameter counts as the Hub reports them, it loads as vLLM measured it: 9.8 GiB."""
    facts = ModelFacts("google/gemma-4-E2B-it", E2B.config, None, 10246621918, "test",
                       parameters={"BF16": 10246621918 // 2})
    assert facts.weights_bytes("float16") / catalog.GIB == pytest.approx(9.8, rel=0.01)
    assert facts.weights_bytes("float32") / catalog.GIB == pytest.approx(2 * 9.543 + 0.27, rel=0.01)


def test_the_plan_is_exported_and_printed(run_stack):
    plan = run_stack("gce-t4", "maxModelLen=8192")
    out = plan.outputs["memory_plan"]
    assert out["model"] == "google/gemma-4-E2B-it-qat-w4a16-ct" and out["max_model_len"] == 8192
    assert out["kv_cache_gib"] == 4.66 and out["max_concurrency"] > 31.72, "shorter requests: more of them"
    assert abs(out["kv_cache_tokens"] - out["max_concurrency"] * 8192) < 8192 * 0.01  # concurrency is rounded


def test_overflow_opt_in_lets_a_config_that_cannot_start_through(run_stack):
    plan = run_stack("sagemaker-t4", "model=xbill9/gemma-4-26B-A4B-it-qat-q4_0-w4a16-ct-text-emb4",
                     "allowModelOverflow=true")
    assert plan.outputs["memory_plan"]["kv_cache_tokens"] == 0
