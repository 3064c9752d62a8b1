"""tensorParallelSize 2 and 4 on both clouds: the real program under mocks. One setting gives the
VM its T4s and a shape that takes them (GCE) or the instance type (SageMaker), passes vLLM the
flag or the SM_VLLM_* variable, prices what bills, and plans each GPU's memory: Gemma 4 26B A4B
is refused on one T4 with the numbers and the setting that fits, and accepted on two or four."""

from __future__ import annotations

import pytest
from conftest import vllm_args

from gemma4_t4 import catalog
from gemma4_t4.catalog import vllm as engine
from gemma4_t4.components import memory

INSTANCE = "gcp:compute/instance:Instance"
CONFIG = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
MODEL = "aws:sagemaker/model:Model"
A4B = "google/gemma-4-26B-A4B-it-qat-w4a16-ct"


def _gce_hourly(machine: str, t4s: int, region: str = "us-west2") -> float:
    prices = catalog.GCE_PRICES[region]
    disks = 32 * prices["disk:pd-ssd:gb-month"].usd_per_hour + 250 * prices["disk:pd-balanced:gb-month"].usd_per_hour
    return round(prices[f"machine:{machine}"].usd_per_hour + t4s * prices["gpu:nvidia-tesla-t4"].usd_per_hour
                 + prices["ip:external-in-use"].usd_per_hour + disks / catalog.HOURS_PER_MONTH, 4)


@pytest.mark.parametrize("size,machine", [(1, "n1-standard-2"), (2, "n1-standard-4"), (4, "n1-standard-8")])
def test_gce_gets_one_t4_per_rank_on_a_shape_that_takes_them(run_stack, size, machine):
    plan = run_stack("gce-t4", f"tensorParallelSize={size}")
    vm = plan.one(INSTANCE).inputs
    assert vm["guestAccelerators"] == [{"type": "nvidia-tesla-t4", "count": float(size)}]
    assert vm["machineType"] == machine and size in catalog.N1_SHAPES[machine].t4_counts()
    assert vm["scheduling"]["onHostMaintenance"] == "TERMINATE"
    args = vllm_args(plan)
    assert args[args.index("--tensor-parallel-size") + 1] == str(size)
    assert plan.outputs["cost_per_hour_usd"] == _gce_hourly(machine, size)
    assert plan.outputs["memory_plan"]["tensor_parallel_size"] == size


def test_gce_n1_standard_n_is_priced_per_vcpu_from_the_listed_shape():
    for region, prices in catalog.GCE_PRICES.items():
        base = prices["machine:n1-standard-2"].usd_per_hour
        assert prices["machine:n1-standard-8"].usd_per_hour == pytest.approx(4 * base, abs=1e-4), region
        assert "n1-standard-8 = 8/2 x n1-standard-2" in prices["machine:n1-standard-8"].source


def test_gce_an_explicit_shape_is_kept_and_a_thin_one_is_warned_about(run_stack, monkeypatch):
    import pulumi

    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    roomy = run_stack("gce-t4", "tensorParallelSize=4", "machineType=n1-highmem-16").one(INSTANCE).inputs
    assert roomy["machineType"] == "n1-highmem-16" and roomy["guestAccelerators"][0]["count"] == 4.0
    assert not [w for w in warnings if "vCPUs for" in w]
    run_stack("gce-t4", "tensorParallelSize=4", "machineType=n1-standard-2")  # GCE takes 4 T4s on it
    assert any("n1-standard-2 has 2 vCPUs for 4 T4s" in w and "(n1-standard-8)" in w for w in warnings)


@pytest.mark.parametrize("size", [2, 4])
def test_sagemaker_splits_over_the_four_t4s_of_a_g4dn_12xlarge(run_stack, monkeypatch, size):
    import pulumi

    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    plan = run_stack("sagemaker-t4", f"tensorParallelSize={size}")
    variant = plan.one(CONFIG).inputs["productionVariants"][0]
    assert variant["instanceType"] == "ml.g4dn.12xlarge"
    assert catalog.SAGEMAKER_INSTANCE_TYPES["ml.g4dn.12xlarge"].gpus == 4
    env = plan.one(MODEL).inputs["primaryContainer"]["environment"]
    assert env["SM_VLLM_TENSOR_PARALLEL_SIZE"] == str(size)
    assert plan.outputs["cost_per_hour_usd"] == catalog.SAGEMAKER_REGIONAL_PRICES["us-east-2"][
        "ml.g4dn.12xlarge"].usd_per_hour
    idle = [w for w in warnings if "bill unused" in w]
    assert bool(idle) is (size == 2) and (not idle or "2 bill unused (tensorParallelSize 4 uses them all)" in idle[0])


def test_sagemaker_refuses_a_type_with_fewer_t4s_than_ranks(refused_stack):
    error, partial = refused_stack("sagemaker-t4", "tensorParallelSize=4", "instanceType=ml.g4dn.8xlarge")
    assert error.key == "gemma4-t4:instanceType" and partial.resources == []
    assert "carries 1 GPU, and tensorParallelSize 4 splits the model over 4" in error.problem
    assert error.fix.startswith("pulumi config set gemma4-t4:instanceType ml.g4dn.12xlarge")


# --- the memory plan, per GPU ----------------------------------------------------------------------


def test_26b_a4b_is_refused_on_one_t4_with_the_numbers_and_the_size_that_fits(refused_stack):
    error, partial = refused_stack("gce-t4", f"model={A4B}")
    assert error.key == "gemma4-t4:model" and partial.resources == []
    assert "cannot start on one Tesla T4: 0.9 x 14.56 GiB = 13.11 GiB for vLLM; weights 14.20 GiB" in error.problem
    assert error.fix.startswith("pulumi config set gemma4-t4:tensorParallelSize 2 (on each of 2 Tesla T4s: weights "
                                "7.23 GiB, KV cache 5.19 GiB, 8.03x 16,384-token requests)")


@pytest.mark.parametrize("stack", ["gce-t4", "sagemaker-t4"])
@pytest.mark.parametrize("size", [2, 4])
def test_26b_a4b_is_accepted_on_two_or_four_t4s(run_stack, stack, size):
    plan = run_stack(stack, f"model={A4B}", f"tensorParallelSize={size}")
    m = plan.outputs["memory_plan"]
    whole = catalog.find_model(A4B).weights_gib_loaded
    assert m["tensor_parallel_size"] == size and m["model_weights_gib"] == whole
    # Each GPU holds 1/N of the tensors and its own process's load overhead.
    assert m["weights_gib"] == round((whole - engine.LOAD_OVERHEAD_GIB) / size + engine.LOAD_OVERHEAD_GIB, 2)
    assert m["overhead_gib"] == round(engine.RUNTIME_OVERHEAD_GIB + engine.TP_COMMUNICATION_OVERHEAD_GIB, 2)
    assert m["kv_cache_gib"] > 0 and m["max_concurrency"] >= 1


def test_each_gpu_holds_its_share_of_the_kv_heads_and_one_replica_below_one_per_rank():
    config = catalog.find_model(A4B).config  # sliding: 8 KV heads of 256; global: 2 KV heads of 512
    per_token = {size: {(layer.window is None, layer.bytes_per_token) for layer in memory.kv_layers(config, 2, size)}
                 for size in (1, 2, 4)}
    assert per_token[1] == {(False, 2 * 8 * 256 * 2), (True, 2 * 2 * 512 * 2)}
    assert per_token[2] == {(False, 2 * 4 * 256 * 2), (True, 2 * 1 * 512 * 2)}
    assert per_token[4] == {(False, 2 * 2 * 256 * 2), (True, 2 * 1 * 512 * 2)}, "2 global KV heads, 4 ranks"


def test_a_model_whose_heads_do_not_split_is_refused_with_the_size_that_does(hub, refused_stack, run_stack):
    """Qwen2.5-0.5B (from the Hub stand-in): 14 query heads and 2 KV heads split over 2, not 4."""
    error, partial = refused_stack("gce-t4", "model=Qwen/Qwen2.5-0.5B-Instruct", "tensorParallelSize=4")
    assert error.key == "gemma4-t4:tensorParallelSize" and partial.resources == []
    assert "(14 query / 2 KV heads) does not split evenly over 4 GPUs" in error.problem
    assert error.fix == "pulumi config set gemma4-t4:tensorParallelSize 2"
    assert run_stack("gce-t4", "model=Qwen/Qwen2.5-0.5B-Instruct", "tensorParallelSize=2").outputs[
        "memory_plan"]["tensor_parallel_size"] == 2


@pytest.mark.parametrize("machine,counts", [
    ("n1-standard-1", (1, 2, 4)), ("n1-standard-32", (1, 2, 4)), ("n1-highmem-32", (1, 2, 4)),
    ("n1-standard-64", (4,)), ("n1-highmem-64", (4,)), ("n1-highmem-96", (4,)), ("n1-highcpu-96", (4,)),
])
def test_the_t4_counts_each_n1_shape_takes_follow_gces_limits_per_count(machine, counts):
    """GCE's GPU page: with 1 or 2 T4s at most 48 vCPUs and 312 GB, with 4 at most 96 and 624."""
    assert catalog.N1_SHAPES[machine].t4_counts() == counts
    assert [catalog.n1_standard_for(n) for n in (1, 2, 4)] == ["n1-standard-2", "n1-standard-4", "n1-standard-8"]
    assert [catalog.sagemaker_t4_instance_for(n) for n in (1, 2, 4)] == ["ml.g4dn.xlarge", "ml.g4dn.12xlarge",
                                                                        "ml.g4dn.12xlarge"]


def test_status_reads_the_vram_of_every_t4_on_the_vm():
    """`status`/`wait` on a GCE stack: nvidia-smi answers one line per GPU."""
    from gemma4_t4.core.targets import vram

    assert vram("8403, 15360\n") == {"vram_used_mib": 8403, "vram_total_mib": 15360}
    assert vram("9005, 15360\n9001, 15360\n") == {"vram_used_mib": 18006, "vram_total_mib": 30720,
                                                  "vram_per_gpu_mib": [[9005, 15360], [9001, 15360]]}
