"""GPUs: what a Tesla T4 can and cannot do."""

from __future__ import annotations

from dataclasses import dataclass

# The kernel-target facts (sm_75's shared memory, Gemma 4's attention shapes) live with the clamp,
# a distribution of its own that also installs into vLLM's environment; the catalog re-exports them.
from turing_clamp import targets

GIB = 1024**3
# The T4 counts one vLLM splits a model over (--tensor-parallel-size), and how many query and KV
# heads each rank then holds: what the clamp's fit checker compiles per rank.
TENSOR_PARALLEL_SIZES = targets.TENSOR_PARALLEL_SIZES
heads_per_rank = targets.heads_per_rank


@dataclass(frozen=True)
class Gpu:
    name: str
    compute_capability: tuple[int, int]
    # Per-block shared memory the Triton loader compares a kernel against (cudaDevAttr
    # MaxSharedMemoryPerBlockOptin): the number in "Hardware limit: 65536".
    max_shared_bytes_per_block: int
    # What CUDA reports as total memory (torch.cuda.mem_get_info): what vLLM multiplies by
    # gpu_memory_utilization.
    memory_bytes: int
    supports_bfloat16: bool
    supports_fp8: bool


TESLA_T4 = Gpu(
    name="Tesla T4",
    compute_capability=targets.SM75,
    max_shared_bytes_per_block=targets.SM75_SHARED_LIMIT,
    # [sagemaker-t4-article]: "total: 15636037632" in the 26B OOM message = 14.56 GiB of the card's 15,360 MiB
    # ([gce-t4-article], nvidia-smi memory.total): the driver keeps the rest.
    memory_bytes=15636037632,
    supports_bfloat16=False,
    supports_fp8=False,
)


# GPUs below compute capability 8.0, on which vLLM refuses bfloat16 ("Bfloat16 is only supported
# on GPUs with compute capability of at least 8.0", vllm/platforms/cuda.py), by GCE accelerator type
# and SageMaker GPU name: NVIDIA's CUDA GPU list gives P100 6.0, P4 6.1, V100 7.0, T4 7.5.
NO_BFLOAT16_GPUS = frozenset({"nvidia-tesla-p100", "nvidia-tesla-p4", "nvidia-tesla-v100", "nvidia-tesla-t4",
                              "V100", "Tesla T4"})


# nvidia-smi's memory.total for a T4 ([gce-t4-article]: "Tesla T4, 7.5, 15360 MiB").
T4_CARD_MIB = 15360
