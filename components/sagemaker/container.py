"""What the AWS vLLM container is told: the serving settings as the SM_VLLM_* variables its entrypoint turns into
vLLM's flags (the GCE guest gives vLLM the same values as flags: ServingConfig.vllm_args)."""

from __future__ import annotations

from ..serving import ServingConfig


def container_environment(serving: ServingConfig) -> dict[str, str]:
    """SERVING's values as the AWS vLLM container reads them (SM_VLLM_X -> --x).

    Host and port are the container's own (8080 behind /invocations), so they are not set.
    """
    env = {
        "SM_VLLM_MODEL": serving.model,
        "SM_VLLM_SERVED_MODEL_NAME": serving.served_model_name,
        "SM_VLLM_DTYPE": serving.dtype,
        "SM_VLLM_MAX_MODEL_LEN": str(serving.max_model_len),
        "SM_VLLM_GPU_MEMORY_UTILIZATION": str(serving.gpu_memory_utilization),
        "SM_VLLM_MAX_NUM_SEQS": str(serving.max_num_seqs),
        # [sagemaker-t4-article]'s sm.py passes tensor parallelism to the container under this name.
        "SM_VLLM_TENSOR_PARALLEL_SIZE": str(serving.tensor_parallel_size),
    }
    if serving.language_model_only:
        # AWS DLC docs (vllm/configuration): a boolean "true" becomes a bare flag.
        env["SM_VLLM_LANGUAGE_MODEL_ONLY"] = "true"
    if serving.revision:
        # The container's entrypoint makes every SM_VLLM_X a flag --x (aws/deep-learning-containers,
        # vllm/build_artifacts/sagemaker_entrypoint.sh): --revision.
        env["SM_VLLM_REVISION"] = serving.revision
    return env
