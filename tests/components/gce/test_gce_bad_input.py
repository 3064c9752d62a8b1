"""Bad stack config is refused before any resource exists, naming the key and the fix."""

from __future__ import annotations

import pytest

REFUSED = [
    # (override, key named in the message, fragment of the fix)
    ("dtype=bfloat16", "gemma4-t4:dtype", "dtype float16"),
    ("dtype=auto", "gemma4-t4:dtype", "dtype float16"),
    ("gpuType=nvidia-l4", "gemma4-t4:gpuType", "allowNonT4Gpu true"),
    ("onHostMaintenance=MIGRATE", "gemma4-t4:onHostMaintenance", "onHostMaintenance TERMINATE"),
    ("gpuCount=0", "gemma4-t4:gpuCount", "tensorParallelSize N"),
    ("tensorParallelSize=0", "gemma4-t4:tensorParallelSize", "tensorParallelSize 2"),
    ("bootDiskSizeGb=20", "gemma4-t4:bootDiskSizeGb", "bootDiskSizeGb 32"),
    ("dataDiskSizeGb=40", "gemma4-t4:dataDiskSizeGb", "dataDiskSizeGb 55"),
    ("maxModelLen=0", "gemma4-t4:maxModelLen", "maxModelLen 16384"),
    ("maxModelLen=-5", "gemma4-t4:maxModelLen", "maxModelLen 16384"),
    ("gpuMemoryUtilization=0", "gemma4-t4:gpuMemoryUtilization", "gpuMemoryUtilization 0.9"),
    ("gpuMemoryUtilization=1.2", "gemma4-t4:gpuMemoryUtilization", "gpuMemoryUtilization 0.9"),
    ("model=", "gemma4-t4:model", "config set gemma4-t4:model"),
    ("model=google/gemma-4-26B-A4B-it-qat-w4a16-ct", "gemma4-t4:model", "allowModelOverflow true"),
    ("host=0.0.0.0", "gemma4-t4:host", "allowNonLoopbackHost true"),
    ("swapSizeGb=0", "gemma4-t4:swapSizeGb", "swapSizeGb 16"),
    ("maxNumSeqs=zero", "gemma4-t4:maxNumSeqs", "maxNumSeqs 8"),
    ("cloud=azure", "gemma4-t4:cloud", "cloud gce (or sagemaker)"),
]


@pytest.mark.parametrize("override,key,fix", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_with_key_and_fix_and_nothing_registered(refused_stack, override, key, fix):
    error, partial = refused_stack("gce-t4", override)
    assert error.key == key
    assert fix in str(error)
    assert partial.resources == [], "a refused config must create no resource"


def test_26b_refusal_gives_the_numbers(refused_stack):
    error, _ = refused_stack("gce-t4", "model=google/gemma-4-26B-A4B-it-qat-w4a16-ct")
    assert "13.11 GiB for vLLM; weights 14.20 GiB + overheads 0.43 GiB" in str(error)


@pytest.mark.parametrize("overrides", [
    ("gpuType=nvidia-tesla-v100", "allowNonT4Gpu=true"),
    ("model=google/gemma-4-26B-A4B-it-qat-w4a16-ct", "allowModelOverflow=true"),
    ("swapSizeGb=0", "machineType=n1-highmem-8"),
    ("model=someone/unknown-model", "allowUnsizedModel=true"),
    ("zone=europe-west4-a", "machineType=n1-standard-4", "dataDiskSizeGb=100", "bootDiskType=pd-balanced"),
    ("maxRunHours=2880", "spot=true", "terminationAction=DELETE"),
])
def test_explicit_opt_ins_and_legitimate_variants_plan(run_stack, overrides):
    assert run_stack("gce-t4", *overrides).find("gcp:compute/instance:Instance")
