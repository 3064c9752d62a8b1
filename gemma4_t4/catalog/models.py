"""Models: what each known Gemma 4 build weighs and how its attention is shaped.

``config`` is the part of the model's own config.json (its text_config for a multimodal build)
that sizes the KV cache, verbatim; the memory plan reads it exactly as it reads a config
fetched from the Hub for a model the catalog does not know.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .gpus import GIB


def _layers(pattern: int, count: int) -> list[str]:
    """Gemma 4's layer_types: (pattern - 1) sliding layers, then one full one, repeated."""
    return [("full_attention" if (i + 1) % pattern == 0 else "sliding_attention") for i in range(count)]


# Text configs as published on the Hub (google/gemma-4-*-it config.json, text_config; read from
# the copies in ollama's gemma4 parser tests, x/mlxrunner/model/gemma4, 2026-12-02).
GEMMA4_E2B = {
    "model_type": "gemma4_text", "num_hidden_layers": 35, "layer_types": _layers(5, 35),
    "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256, "global_head_dim": 512,
    "sliding_window": 512, "num_kv_shared_layers": 20, "max_position_embeddings": 131072,
}
GEMMA4_E4B = {
    "model_type": "gemma4_text", "num_hidden_layers": 42, "layer_types": _layers(6, 42),
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256, "global_head_dim": 512,
    "sliding_window": 512, "num_kv_shared_layers": 18, "max_position_embeddings": 131072,
}
GEMMA4_26B_A4B = {
    "model_type": "gemma4_text", "num_hidden_layers": 30, "layer_types": _layers(6, 30),
    "num_attention_heads": 16, "num_key_value_heads": 8, "num_global_key_value_heads": 2, "head_dim": 256,
    "global_head_dim": 512, "sliding_window": 1024, "num_kv_shared_layers": 0, "max_position_embeddings": 131072,
}
COMPRESSED_TENSORS_W4A16 = {"quant_method": "compressed-tensors", "format": "pack-quantized"}
# A Hub commit: 40 lowercase hex digits (huggingface_hub's file_download.REGEX_COMMIT_HASH). Any other
# revision is a branch or tag name, which the repository's owner can move.
HUB_COMMIT = re.compile(r"[0-9a-f]{40}")
# The model a stack serves unless `model` says otherwise ([gce-t4-article]'s checkpoint). No source the catalog can
# cite gives a Hub commit for it (its `revision` below is None), so at the defaults vLLM downloads the Hub's main:
# the plan says so once, as a fact; it is no warning, since the user chose nothing (components/serving.py).
DEFAULT_MODEL = "google/gemma-4-E2B-it-qat-w4a16-ct"


@dataclass(frozen=True)
class Model:
    hf_id: str
    config: Mapping[str, Any]  # the KV-cache-relevant part of config.json, verbatim
    source: str
    # What vLLM reported as "Model loading took X GiB", where measured (with the vision and audio
    # towers loaded unless the build is text-only): the memory plan's weights.
    weights_gib_loaded: float | None = None
    checkpoint_bytes: int | None = None  # safetensors on disk, where measured
    quantization: Mapping[str, Any] | None = None  # config.json's quantization_config
    text_only: bool = False  # no vision or audio tower in the checkpoint
    notes: tuple[str, ...] = field(default=())
    # The Hub commit vLLM downloads (its --revision) unless modelRevision says otherwise; None: not known here.
    # No entry has one yet: the articles name each model by its id only, and the Hub is not reachable from where
    # the catalog was written, so no commit could be read at its source.
    revision: str | None = None

    @property
    def disk_bytes(self) -> int:
        """What the model cache must hold: the checkpoint, or the loaded weights if unmeasured."""
        if self.checkpoint_bytes:
            return self.checkpoint_bytes
        assert self.weights_gib_loaded is not None
        return int(self.weights_gib_loaded * GIB)


_MODELS = (
    Model("google/gemma-4-E2B-it-qat-w4a16-ct", GEMMA4_E2B, "[gce-t4-article]: tpu.env bytes, engine log (vLLM 0.29.0)",
          weights_gib_loaded=8.02, checkpoint_bytes=8316306646, quantization=COMPRESSED_TENSORS_W4A16),
    Model("google/gemma-4-E2B-it", GEMMA4_E2B, "[gce-t4-article]: tpu.env bytes, engine log (bf16 build)",
          weights_gib_loaded=9.8, checkpoint_bytes=10246621918),
    Model("xbill9/gemma-4-E2B-it-qat-q4_0-w4a16-ct-text-emb4", GEMMA4_E2B,
          "[sagemaker-t4-article]: results table (vLLM 0.30.0)",
          weights_gib_loaded=2.86, quantization=COMPRESSED_TENSORS_W4A16, text_only=True),
    Model("xbill9/gemma-4-E4B-it-qat-q4_0-w4a16-ct-text-emb4", GEMMA4_E4B,
          "[sagemaker-t4-article]: results table (vLLM 0.30.0)",
          weights_gib_loaded=4.52, quantization=COMPRESSED_TENSORS_W4A16, text_only=True),
    # [sagemaker-t4-article]: loaded its 14.2 GiB of weights on one T4, then ran out of memory.
    Model("xbill9/gemma-4-26B-A4B-it-qat-q4_0-w4a16-ct-text-emb4", GEMMA4_26B_A4B,
          "[sagemaker-t4-article]: 14.2 GiB of weights on the L4, OOM on ml.g4dn.xlarge", weights_gib_loaded=14.2,
          quantization=COMPRESSED_TENSORS_W4A16, text_only=True),
    # Google's own W4A16 export of the same QAT weights keeps bf16 embeddings, so it weighs at
    # least what the 4-bit-embedding repack above does.
    Model("google/gemma-4-26B-A4B-it-qat-w4a16-ct", GEMMA4_26B_A4B,
          "[sagemaker-t4-article]: at least the 14.2 GiB of its 4-bit-embedding repack", weights_gib_loaded=14.2,
          quantization=COMPRESSED_TENSORS_W4A16),
)
# Keyed by the id in lower case: the Hub matches repo ids case-insensitively, and so do we.
MODELS = {m.hf_id.lower(): m for m in _MODELS}


def find_model(model_id: str) -> Model | None:
    """The catalog's entry for ``model_id``, spelled in any case (as the Hub resolves it)."""
    return MODELS.get(model_id.lower())
