"""The serving-config model: the single source of every value vLLM is started with.

The GCE guest turns it into vLLM command-line flags (``vllm_args``), the SageMaker container
into ``SM_VLLM_*`` environment variables (``sagemaker_environment``). Both come from the same
fields, so a value is never spelled twice.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from gemma4_t4 import catalog

from .errors import ConfigError


@dataclass(frozen=True)
class ServingConfig:
    model: str
    served_model_name: str
    dtype: str
    max_model_len: int
    gpu_memory_utilization: float
    max_num_seqs: int
    language_model_only: bool
    host: str
    port: int
    allow_non_loopback_host: bool = False
    allow_model_overflow: bool = False

    # --- validation ---------------------------------------------------------------------------

    def validate(self, gpu: catalog.Gpu | None) -> None:
        """Refuse values that cannot work. ``gpu`` is None for a GPU the catalog does not know
        (an explicit opt-in elsewhere); then only GPU-independent checks run."""
        if not self.model.strip():
            raise ConfigError("model", "the model id is empty", "pulumi config set gemma4-t4:model "
                              "google/gemma-4-E2B-it-qat-w4a16-ct")
        if self.max_model_len <= 0:
            raise ConfigError("maxModelLen", f"must be a positive token count, got {self.max_model_len}",
                              "pulumi config set gemma4-t4:maxModelLen 16384")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError("gpuMemoryUtilization",
                              f"must be in (0, 1], got {self.gpu_memory_utilization}",
                              "pulumi config set gemma4-t4:gpuMemoryUtilization 0.9")
        if self.max_num_seqs <= 0:
            raise ConfigError("maxNumSeqs", f"must be positive, got {self.max_num_seqs}",
                              "pulumi config set gemma4-t4:maxNumSeqs 8")
        if self.dtype not in ("float16", "half", "bfloat16", "float32", "auto"):
            raise ConfigError("dtype", f"unknown dtype {self.dtype!r}",
                              "pulumi config set gemma4-t4:dtype float16")
        if not 0 < self.port < 65536:
            raise ConfigError("port", f"not a TCP port: {self.port}", "pulumi config set gemma4-t4:port 8000")
        self._validate_host()
        if gpu is not None:
            self._validate_for_gpu(gpu)

    def _validate_host(self) -> None:
        try:
            loopback = ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            loopback = self.host == "localhost"
        if not loopback and not self.allow_non_loopback_host:
            raise ConfigError(
                "host",
                f"vLLM would listen on {self.host}, reachable beyond the VM: the OpenAI API has no auth",
                "keep 127.0.0.1 and use the IAP tunnel, or opt in with "
                "pulumi config set gemma4-t4:allowNonLoopbackHost true",
            )

    def _validate_for_gpu(self, gpu: catalog.Gpu) -> None:
        if self.dtype in ("bfloat16", "auto") and not gpu.supports_bfloat16:
            # "auto" takes the checkpoint's dtype, which is bfloat16 for every Gemma 4 build.
            raise ConfigError(
                "dtype",
                f"{self.dtype!r} needs bfloat16, which {gpu.name} (sm_{gpu.compute_capability[0]}"
                f"{gpu.compute_capability[1]}) does not have",
                "pulumi config set gemma4-t4:dtype float16",
            )
        fit = model_fit(self.model, gpu, self.gpu_memory_utilization)
        if fit is None:
            import pulumi

            pulumi.log.warn(f"gemma4-t4:model {self.model} is not in the catalog: its fit on a {gpu.name} "
                            "is not checked (a known Gemma 4 build is)")
        elif not fit.fits and not self.allow_model_overflow:
            raise ConfigError(
                "model",
                f"{self.model} needs {fit.weights_gib:.2f} GiB of weights + {fit.headroom_gib:.2f} GiB to start, "
                f"but {gpu.name} gives vLLM {fit.budget_gib:.2f} GiB "
                f"({self.gpu_memory_utilization} x {fit.gpu_gib:.2f} GiB)",
                "pick a smaller Gemma 4 build (E2B, E4B or 12B), or, knowing it will likely fail, "
                "pulumi config set gemma4-t4:allowModelOverflow true",
            )

    # --- what vLLM is started with --------------------------------------------------------------

    def vllm_args(self) -> list[str]:
        args = [
            "--model", self.model,
            "--served-model-name", self.served_model_name,
            "--host", self.host,
            "--port", str(self.port),
            "--dtype", self.dtype,
            "--max-model-len", str(self.max_model_len),
            "--gpu-memory-utilization", str(self.gpu_memory_utilization),
            "--max-num-seqs", str(self.max_num_seqs),
        ]
        if self.language_model_only:
            args.append("--language-model-only")
        return args

    def sagemaker_environment(self) -> dict[str, str]:
        """The same values as the AWS vLLM container reads them (SM_VLLM_X -> --x).

        Host and port are the container's own (8080 behind /invocations), so they are not set.
        """
        env = {
            "SM_VLLM_MODEL": self.model,
            "SM_VLLM_SERVED_MODEL_NAME": self.served_model_name,
            "SM_VLLM_DTYPE": self.dtype,
            "SM_VLLM_MAX_MODEL_LEN": str(self.max_model_len),
            "SM_VLLM_GPU_MEMORY_UTILIZATION": str(self.gpu_memory_utilization),
            "SM_VLLM_MAX_NUM_SEQS": str(self.max_num_seqs),
        }
        if self.language_model_only:
            # AWS DLC docs (vllm/configuration): a boolean "true" becomes a bare flag.
            env["SM_VLLM_LANGUAGE_MODEL_ONLY"] = "true"
        return env


@dataclass(frozen=True)
class ModelFit:
    weights_gib: float
    headroom_gib: float
    gpu_gib: float
    budget_gib: float

    @property
    def fits(self) -> bool:
        return self.weights_gib + self.headroom_gib <= self.budget_gib


def model_fit(model_id: str, gpu: catalog.Gpu, gpu_memory_utilization: float) -> ModelFit | None:
    """Weights + start-up headroom against what vLLM may claim; None for a model the catalog
    does not know (a warning, never a guess)."""
    model = catalog.MODELS.get(model_id)
    if model is None:
        return None
    gpu_gib = gpu.memory_bytes / catalog.GIB
    return ModelFit(model.weights_gib_loaded, catalog.MODEL_START_HEADROOM_GIB, gpu_gib,
                    gpu_gib * gpu_memory_utilization)
