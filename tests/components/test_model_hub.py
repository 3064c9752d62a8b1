"""A model the catalog does not know is sized from the Hugging Face Hub at preview: the real
huggingface_hub client against a loopback stand-in that answers with recorded responses
(tests/hub_standin.py). Nothing is downloaded but metadata and config.json."""

from __future__ import annotations

import pytest
from conftest import vllm_args

from gemma4_t4 import catalog

QWEN = "Qwen/Qwen2.5-0.5B-Instruct"


def test_an_unknown_model_is_sized_from_the_hub_and_served_under_its_own_spelling(hub, run_stack):
    plan = run_stack("gce-t4", "model=qwen/QWEN2.5-0.5b-instruct")
    args = vllm_args(plan)
    assert args[args.index("--model") + 1] == QWEN and args[args.index("--served-model-name") + 1] == QWEN
    memory = plan.outputs["memory_plan"]
    assert memory["model"] == QWEN and memory["weights_source"].startswith(f"Hugging Face Hub, {QWEN}@7ae557604adf")
    # 494,032,768 BF16 parameters at float16 + vLLM's load overhead.
    assert memory["weights_gib"] == round((494032768 * 2) / catalog.GIB + catalog.vllm.LOAD_OVERHEAD_GIB, 2)
    assert memory["context_length"] == 32768 and memory["max_concurrency"] > 8
    assert not [r for r in hub.requests if ".safetensors" in r], "no weights are fetched to size a model"


def test_the_26b_a4b_without_the_qat_suffix_is_refused_with_the_numbers(hub, refused_stack):
    error, partial = refused_stack("gce-t4", "model=google/gemma-4-26B-A4B-it")
    assert error.key == "gemma4-t4:model" and "cannot start on one Tesla T4" in str(error)
    assert "weights 48.33 GiB" in str(error) and partial.resources == []


def test_a_length_beyond_the_hub_models_context_is_refused(hub, refused_stack):
    error, _ = refused_stack("sagemaker-t4", f"model={QWEN}", "maxModelLen=65536")
    assert error.key == "gemma4-t4:maxModelLen" and "context of 32,768" in str(error)
    assert "maxModelLen 16384" in str(error)


@pytest.mark.parametrize("model,reason", [
    ("nobody/no-such-model", "the Hub has no such model"),
    ("meta-llama/Llama-3.2-1B-Instruct", "it is gated on the Hub"),
])
def test_what_the_hub_cannot_size_is_refused_with_its_reason(hub, refused_stack, model, reason):
    error, partial = refused_stack("gce-t4", f"model={model}")
    assert error.key == "gemma4-t4:model" and reason in str(error)
    assert "allowUnsizedModel true" in error.fix and partial.resources == []


def test_the_opt_in_lets_an_unsized_model_through_with_a_warning(hub, run_stack):
    plan = run_stack("gce-t4", "model=meta-llama/Llama-3.2-1B-Instruct", "allowUnsizedModel=true")
    assert plan.outputs.get("memory_plan") is None and "meta-llama/Llama-3.2-1B-Instruct" in vllm_args(plan)


def test_hub_facts_are_cached_so_the_next_preview_needs_no_network(hub, run_stack, refused_stack, monkeypatch):
    run_stack("gce-t4", f"model={QWEN}")
    asked = len(hub.requests)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the Hub is gone
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert run_stack("gce-t4", f"model={QWEN.upper()}").outputs["memory_plan"]["model"] == QWEN
    assert len(hub.requests) == asked
    error, _ = refused_stack("gce-t4", "model=google/gemma-4-26B-A4B-it")  # never cached
    assert "HF_HUB_OFFLINE is set" in str(error)


def test_a_catalog_model_spelled_in_any_case_needs_no_hub(run_stack):
    plan = run_stack("gce-t4", "model=GOOGLE/gemma-4-e2b-IT-qat-w4a16-ct")  # the Hub is unreachable here
    assert "google/gemma-4-E2B-it-qat-w4a16-ct" in vllm_args(plan)


def test_a_checkpoint_already_on_the_server_is_served_by_its_path_with_the_opt_in(run_stack, refused_stack):
    error, partial = refused_stack("gce-t4", "model=/opt1/cache/models/mine")
    assert "a directory on the server" in error.problem and "allowUnsizedModel true" in error.fix
    assert partial.resources == []
    plan = run_stack("gce-t4", "model=/opt1/cache/models/mine", "allowUnsizedModel=true")
    assert "/opt1/cache/models/mine" in vllm_args(plan)
    error, _ = refused_stack("gce-t4", "model=/opt1/../etc", "allowUnsizedModel=true")
    assert error.key == "gemma4-t4:model" and "'..'" in error.problem
