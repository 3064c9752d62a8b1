"""What a model weighs and how its attention is shaped: from the catalog, or read from the Hugging
Face Hub at preview for a model the catalog does not know, when the caller allows that network call
(sizeFromHub: the stack program does; a component built in a user's program does only if asked).

From the Hub: the model's info with its safetensors metadata (parameter count per dtype, read
from the shards' headers by the Hub: no weights are downloaded) and its config.json, both
through huggingface_hub, and cached on this machine so the next preview needs no network. The
Hub resolves repo ids case-insensitively; so does the catalog, and the plan uses the Hub's own
spelling.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gemma4_t4 import catalog
from gemma4_t4.catalog import vllm as engine

GIB = catalog.GIB
# Stored bytes per element of each safetensors dtype.
SAFETENSORS_DTYPE_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2,
                           "I16": 2, "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1,
                           "BOOL": 1, "F4": 0.5, "F6_E2M3": 0.75, "F6_E3M2": 0.75}
FLOAT_DTYPES = {"F64", "F32", "F16", "BF16"}  # what --dtype casts on load
HUB_TIMEOUT_S = 10.0


class Unsized(Exception):
    """The model cannot be sized: the reason, for the refusal."""

    def __init__(self, reason: str, hub_not_asked: bool = False):
        super().__init__(reason)
        self.hub_not_asked = hub_not_asked  # only because the caller did not allow asking the Hub


@dataclass(frozen=True)
class ModelFacts:
    repo_id: str  # as the catalog or the Hub spells it
    config: Mapping[str, Any]
    quantization: Mapping[str, Any] | None
    checkpoint_bytes: int
    source: str
    # Loaded size as vLLM measured it (catalog), else computed from the parameter counts.
    measured_weights_gib: float | None = None
    parameters: Mapping[str, int] | None = None  # safetensors dtype -> count (Hub)

    def weights_bytes(self, dtype: str) -> int:
        """What "Model loading took" will say, in bytes, with --dtype ``dtype``."""
        target = 4 if dtype == "float32" else 2
        if self.measured_weights_gib is not None:
            loaded = self.measured_weights_gib * GIB
            if target == 4 and not self.quantization:
                loaded = (loaded - engine.LOAD_OVERHEAD_GIB * GIB) * 2 + engine.LOAD_OVERHEAD_GIB * GIB
            return int(loaded)
        assert self.parameters is not None
        tensors = sum(count * (target if dt in FLOAT_DTYPES else SAFETENSORS_DTYPE_BYTES.get(dt, 4))
                      for dt, count in self.parameters.items())
        return int(tensors + engine.LOAD_OVERHEAD_GIB * GIB)


def from_catalog(model: catalog.Model) -> ModelFacts:
    return ModelFacts(model.hf_id, model.config, model.quantization, model.disk_bytes, f"catalog ({model.source})",
                      measured_weights_gib=model.weights_gib_loaded)


# --- the Hub ---------------------------------------------------------------------------------------


def cache_dir() -> Path:
    """Where Hub facts are kept between previews: $GEMMA4_T4_CACHE_DIR, else the XDG cache."""
    base = os.environ.get("GEMMA4_T4_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or
                                                          Path.home() / ".cache") / "gemma4-t4"
    return Path(base) / "hub-models"


def _cache_file(repo_id: str, revision: str | None = None) -> Path:
    at = f"@{revision.replace('/', '--')}" if revision else ""
    return cache_dir() / (repo_id.lower().replace("/", "--") + at + ".json")


def _facts(record: Mapping[str, Any]) -> ModelFacts:
    config = record["config"]
    params = record["safetensors"]["parameters"]
    stored = sum(int(count * SAFETENSORS_DTYPE_BYTES.get(dt, 4)) for dt, count in params.items())
    return ModelFacts(record["id"], config, config.get("quantization_config"), stored,
                      f"Hugging Face Hub, {record['id']}@{(record.get('sha') or '')[:12]}, read {record['read_at']}",
                      parameters=params)


def read_hub(repo_id: str, revision: str | None = None) -> ModelFacts:
    """The model's facts at REVISION (None: main) from the Hub (or this machine's cache of them); Unsized says
    why not."""
    cached = _cache_file(repo_id, revision)
    if cached.is_file():
        return _facts(json.loads(cached.read_text()))
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise Unsized("HF_HUB_OFFLINE is set, so the Hub was not asked")
    try:
        import httpx2  # huggingface_hub's HTTP client: its transport errors (DNS, refused, timeouts)
        from huggingface_hub import HfApi
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            OfflineModeIsEnabled,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
    except ImportError as err:  # pragma: no cover - pinned in pyproject.toml
        raise Unsized(f"huggingface_hub is not installed ({err})") from None
    api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)
    try:
        info = api.model_info(repo_id, revision=revision, expand=["safetensors", "sha"], timeout=HUB_TIMEOUT_S)
        if info.safetensors is None:
            raise Unsized("the Hub lists no safetensors weights for it (vLLM on a T4 here loads safetensors)")
        config_path = api.hf_hub_download(info.id, "config.json", revision=info.sha)
        config = json.loads(Path(config_path).read_text())
    except GatedRepoError:
        raise Unsized("it is gated on the Hub: this machine's Hugging Face login has not been granted access") from None
    except RevisionNotFoundError:
        raise Unsized(f"the Hub has no revision {revision} of it (modelRevision)") from None
    except RepositoryNotFoundError:
        raise Unsized("the Hub has no such model (or it is private to another account)") from None
    except OfflineModeIsEnabled:
        raise Unsized("HF_HUB_OFFLINE is set, so the Hub was not asked") from None
    except (HfHubHTTPError, httpx2.HTTPError, OSError, ValueError) as err:
        raise Unsized(f"the Hub did not answer ({type(err).__name__}: {str(err).splitlines()[0][:160]})") from None
    record = {"id": info.id, "sha": info.sha, "read_at": datetime.now(UTC).strftime("%Y-%m-%d"),
              "safetensors": {"parameters": dict(info.safetensors.parameters), "total": info.safetensors.total},
              "config": config}
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(record, indent=1, sort_keys=True))
    return _facts(record)


def model_facts(repo_id: str, ask_hub: bool, revision: str | None = None) -> ModelFacts:
    """Catalog first (no network), then, if ASK_HUB, the Hub at REVISION (None: main). Raises Unsized with the
    reason."""
    if repo_id.startswith("/"):
        raise Unsized("it is a directory on the server, which the plan cannot read")
    known = catalog.find_model(repo_id)
    if known is not None:
        return from_catalog(known)
    if not ask_hub:
        raise Unsized("sizeFromHub is off, so the Hugging Face Hub was not asked", hub_not_asked=True)
    return read_hub(repo_id, revision)
