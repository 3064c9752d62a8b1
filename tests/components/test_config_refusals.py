"""Configs a cloud or vLLM would reject, or that would bill for a server that never serves: each is
refused at preview by the real program under mocks, naming the key as the user types it and the
`pulumi config` fix, before any resource exists. Never a traceback (refused_stack requires a
ConfigError)."""

from __future__ import annotations

import json

import pytest

LABELS_64 = "labels=" + json.dumps({f"l{i}": "x" for i in range(64)})
TAGS_50 = "labels=" + json.dumps({f"t{i}": "x" for i in range(50)})
# + app and the endpoint's organization, project, stack and fleet tags: 51
TAGS_46 = "labels=" + json.dumps({f"t{i}": "x" for i in range(46)})

GCE = [
    # (overrides, key, fragment of the message or fix)
    # zones, shapes and GPUs: GCE would reject the VM after the data disk exists
    (("zone=us-west2-a",), "zone", "zone us-west2-b"),
    (("zone=europe-west9-a",), "zone", "in no zone of europe-west9"),
    (("zone=uswest2b",), "zone", "is not a GCE zone"),
    (("zone=us-central1-d",), "zone", "us-central1-a, us-central1-b, us-central1-c, us-central1-f"),
    (("machineType=e2-standard-4",), "machineType", "takes no GPU"),
    (("machineType=n2-standard-4",), "machineType", "only N1 machine types take a T4"),
    (("machineType=a2-highgpu-1g",), "machineType", "comes with its own GPUs"),
    (("machineType=g2-standard-4",), "machineType", "comes with its own GPUs"),
    (("machineType=n1-standard-3",), "machineType", "is not an N1 shape GCE offers"),
    (("machineType=f1-micro",), "machineType", "shared-core"),
    (("machineType=n1-standard-96",), "machineType", "takes 4 T4s, and tensorParallelSize 1 needs 1"),
    (("machineType=n1-standard-64", "tensorParallelSize=2"), "machineType", "machineType n1-standard-4"),
    (("gpuCount=2",), "gpuCount", "is now tensorParallelSize"),
    (("gpuCount=0",), "gpuCount", "pulumi config set gemma4-t4:tensorParallelSize N"),
    # tensor parallelism: what N1 takes and vLLM splits
    (("tensorParallelSize=3",), "tensorParallelSize", "tensorParallelSize 2"),
    (("tensorParallelSize=8",), "tensorParallelSize", "1, 2 or 4 T4s"),
    (("tensorParallelSize=two",), "tensorParallelSize", "tensorParallelSize 1"),
    (("gpuType=nvidia-l4", "allowNonT4Gpu=true"), "gpuType", "only on G2 machine types"),
    (("gpuType=nvidia-tesla-a100", "allowNonT4Gpu=true"), "gpuType", "only on A2"),
    (("onHostMaintenance=migrate",), "onHostMaintenance", "onHostMaintenance TERMINATE"),
    # disks N1 cannot attach, sizes GCE refuses
    (("bootDiskType=hyperdisk-balanced",), "bootDiskType", "an N1 VM cannot attach it"),
    (("dataDiskType=hyperdisk-balanced",), "dataDiskType", "dataDiskType pd-balanced"),
    (("dataDiskType=pd-extreme",), "dataDiskType", "an N1 VM cannot attach it"),
    (("dataDiskType=local-ssd",), "dataDiskType", "is not a persistent disk type"),
    (("bootDiskSizeGb=100000",), "bootDiskSizeGb", "bootDiskSizeGb 65536"),
    (("bootDiskSizeGb=ten",), "bootDiskSizeGb", "bootDiskSizeGb 32"),
    (("dataDiskSizeGb=5",), "dataDiskSizeGb", "dataDiskSizeGb 250"),
    (("swapSizeGb=-1",), "swapSizeGb", "swapSizeGb 16"),
    (("swapSizeGb=0", "machineType=n1-standard-1"), "swapSizeGb", "3.8 GiB RAM"),
    (("swapSizeGb=300",), "dataDiskSizeGb", "dataDiskSizeGb 339"),
    # scheduling limits
    (("maxRunHours=3000",), "maxRunHours", "maxRunHours 2880"),
    (("terminationAction=stop",), "terminationAction", "terminationAction STOP (one of 'STOP' or 'DELETE')"),
    (("idleStopMinutes=2",), "idleStopMinutes", "idleStopMinutes 5"),
    # labels GCE refuses
    (("labels.Team=ml",), "labels.Team", "starting with a letter"),
    (("labels.1team=ml",), "labels.1team", "starting with a letter"),
    (("labels.team=ML",), "labels.team", "labels.team ml"),
    (("labels.app=other",), "labels", "app=gemma4-t4"),
    (('labels={"team": null}',), "labels.team", "labels.team VALUE"),
    (("maxModelLen=18",), "maxModelLen", "maxModelLen 16384"),
    (("vllmVersion=0.34.0",), "vllmVersion", "vllmVersion 0.30.0"),
    ((LABELS_64,), "labels", "GCE allows 64 per resource"),
    (("labels=team",), "labels", "expected an object"),
    # a listener the tunnel, the idle stop or vLLM itself cannot use
    (("host=::1", "idleStopMinutes=30"), "host", "would never stop"),
    (("host=localhost",), "host", "not an IP address"),
    (("host=127.0.0.2",), "host", "host 127.0.0.1"),
    (("host=10.80.0.5", "allowNonLoopbackHost=true"), "host", "host 0.0.0.0"),
    (("port=80", "idleStopMinutes=30"), "port", "privileged port"),
    (("port=70000",), "port", "port 65535"),
    # serving values vLLM refuses or that cannot start on a T4
    (("dtype=float32",), "dtype", "compressed-tensors checkpoint"),
    (("dtype=bf16",), "dtype", "one of 'float16'"),
    (("maxModelLen=10000000",), "maxModelLen", "context of 131,072"),
    (("maxModelLen=inf",), "maxModelLen", "maxModelLen 16384"),
    (("maxModelLen=1.5",), "maxModelLen", "maxModelLen 16384"),
    (("maxNumSeqs=100000",), "maxNumSeqs", "maxNumSeqs 2048"),
    (("gpuMemoryUtilization=0.01",), "gpuMemoryUtilization", "gpuMemoryUtilization 0.9"),
    (("gpuMemoryUtilization=nan",), "gpuMemoryUtilization", "gpuMemoryUtilization 0.9"),
    (("gpuMemoryUtilization=0.55",), "gpuMemoryUtilization", "leave no room for the KV cache"),
    (("maxModelLen=131072", "gpuMemoryUtilization=0.62"), "maxModelLen", "not one 131,072-token request fits"),
    (("servedModelName=my model",), "servedModelName", "without spaces"),
    (("servedModelName=" + "m" * 300_000,), "servedModelName", "(300,000 characters): must be one word"),
    # models that bill and never serve
    (("model=google/gemma-4-26b-a4b-it-qat-w4a16-ct",), "model", "cannot start on one Tesla T4"),
    (("model=google/gemma-4-26b-a4b-it-qat-w4a16-ct",), "model", "tensorParallelSize 2 (on each of 2 Tesla T4s"),
    (("model=GOOGLE/GEMMA-4-26B-A4B-IT-QAT-W4A16-CT",), "model", "cannot start on one Tesla T4"),
    (("model=google/gemma-4-26B-A4B-it",), "model", "allowUnsizedModel true"),
    (("model=someone/unknown-model",), "model", "the Hub did not answer"),
    (("model=a b/c",), "model", "not a Hugging Face model id"),
    (("model=a/b/c",), "model", "not a Hugging Face model id"),
    (("model=google/gemma--4",), "model", "not a Hugging Face model id"),
    # booleans are true or false
    (("languageModelOnly=maybe",), "languageModelOnly", "expected true or false"),
    (("spot=yes",), "spot", "spot false"),
    (("retainDataDisk=1",), "retainDataDisk", "retainDataDisk true"),
    # keys that do not exist, or that belong to SageMaker
    (("maxRunHour=3",), "maxRunHour", "did you mean maxRunHours?"),
    (("endpointTTL=8h",), "endpointTTL", "did you mean endpointTtl?"),
    (("machinetype=n1-standard-4",), "machinetype", "did you mean machineType?"),
    (("zones=us-west2-b",), "zones", "pulumi config rm gemma4-t4:zones"),
    (("endpointTtl=8h",), "endpointTtl", "on gce use maxRunHours"),
    (("instanceType=ml.g4dn.2xlarge",), "instanceType", "on gce use machineType"),
    (("keepImages=true",), "keepImages", "is a sagemaker setting"),
    (("maxInstanceCount=3",), "maxInstanceCount", "a GCE stack is one VM"),
    (("hfToken=hf_plain",), "hfToken", "is stored in plain text in the stack file"),
    (("cloud=GCE",), "cloud", "cloud gce (or sagemaker)"),
    (("maxModelLen.x=1",), "maxModelLen", "is not an object"),
    # found by trying ~340 configs as a user would (the config issue's audit)
    (("gpuMemoryUtilization=1.0",), "gpuMemoryUtilization", "gpuMemoryUtilization 0.9"),
    (("servedModelName=--enforce-eager",), "servedModelName", "take it for a flag"),
    (("terminationAction=DELETE", "maxRunHours=0"), "terminationAction", "pulumi config rm gemma4-t4:terminationAction"),
    (("gpuType=nvidia-tesla-v100", "allowNonT4Gpu=true", "dtype=bfloat16"), "dtype", "dtype float16"),
    (("gemma4_t4:maxModelLen=999999999",), "gemma4_t4:maxModelLen", "pulumi config set gemma4-t4:maxModelLen"),
    (("gemma-4-t4:zone=europe-west9-a",), "gemma-4-t4:zone", "not this project's"),
    (("labels.team=a.b",), "labels.team", "labels.team a_b"),
    (("labels.1team=x",), "labels.1team", "labels.l1team x"),
]

SAGEMAKER = [
    (("instanceType=ml.g5.xlarge",), "instanceType", "carries 1 x A10G, not the Tesla T4"),
    (("instanceType=ml.g4dn.2xlarge", "tensorParallelSize=2"), "instanceType", "instanceType ml.g4dn.12xlarge"),
    (("instanceType=ml.g5.xlarge", "allowNonT4Instance=true", "dtype=bfloat16", "tensorParallelSize=4"),
     "instanceType", "carries 1 GPU, and tensorParallelSize 4"),
    (("tensorParallelSize=3",), "tensorParallelSize", "tensorParallelSize 2"),
    # autoscaling: only with a maximum, and the start count between the fewest and the most
    (("minInstanceCount=2",), "minInstanceCount", "maxInstanceCount 2"),
    (("scalingTarget=4",), "scalingTarget", "off without maxInstanceCount"),
    (("scalingMetric=invocations",), "scalingMetric", "pulumi config rm gemma4-t4:scalingMetric"),
    (("maxInstanceCount=2", "instanceCount=3"), "maxInstanceCount", "maxInstanceCount 3"),
    (("maxInstanceCount=4", "minInstanceCount=3"), "minInstanceCount", "instanceCount 3"),
    (("maxInstanceCount=2", "scalingMetric=invocations"), "scalingTarget", "scalingMetric concurrentRequests"),
    (("maxInstanceCount=2", "scalingMetric=latency"), "scalingMetric", "one of 'concurrentRequests'"),
    (("maxInstanceCount=2", "scalingTarget=-1"), "scalingTarget", "scalingTarget"),
    (("maxInstanceCount=-1",), "maxInstanceCount", "maxInstanceCount 0"),
    (("instanceType=ml.t2.medium",), "instanceType", "not a SageMaker instance type with an NVIDIA GPU"),
    (("instanceType=g4dn.xlarge",), "instanceType", "instanceType ml.g4dn.xlarge"),
    (("instanceCount=0",), "instanceCount", "instanceCount 1"),
    (("baseImage=public.ecr.aws/deep-learning-containers/vllm:0.30.0",), "baseImage", "not a private ECR image"),
    (("baseImage=vllm/vllm-openai:latest",), "baseImage", "not a private ECR image"),
    (("inferenceAmiVersion=al2023-ami-sagemaker-inference-gpu-4-2",), "inferenceAmiVersion", "unknown host image"),
    (("endpointTtl=2030-13-01T00:00:00Z",), "endpointTtl", "not a duration like 8h"),
    (("endpointTtl=2030-12-01T00:00:00Z",), "endpointTtl", "is a point in time; endpointTtl is a duration"),
    (("endpointTtl=10m",), "endpointTtl", "less than 15 min"),
    (("endpointTTL=8h",), "endpointTTL", "did you mean endpointTtl?"),
    (("maxRunHours=8",), "maxRunHours", "on sagemaker use endpointTtl"),
    (("idleStopMinutes=30",), "idleStopMinutes", "on sagemaker use endpointTtl"),
    (("spot=true",), "spot", "no spot capacity"),
    (("zone=us-central1-a",), "zone", "is a gce setting"),
    (("host=0.0.0.0",), "host", "pulumi config rm gemma4-t4:host"),
    (("labels=" + json.dumps({"aws:owner": "me"}),), "labels.aws:owner", "reserved for AWS"),
    (("labels=" + json.dumps({"AWS:Owner": "me"}),), "labels.AWS:Owner", "reserved for AWS"),
    (("labels=" + json.dumps({"team": "ml#1"}),), "labels.team", "breaks AWS's rule"),
    (("labels=" + json.dumps({"k" * 129: "v"}),), "labels." + "k" * 129, "1-128"),
    ((TAGS_50,), "labels", "AWS allows 50 per resource"),
    (("aws:region=mars",), "aws:region", "aws:region us-east-2"),
    (("aws:region=",), "aws:region", "aws:region us-east-2"),
    (("dtype=auto",), "dtype", "dtype float16"),
    (("maxModelLen=200000",), "maxModelLen", "context of 131,072"),
    (("startupHealthCheckTimeoutSeconds=abc",), "startupHealthCheckTimeoutSeconds", "1020"),
    (("keepImages=maybe",), "keepImages", "expected true or false"),
    (("gpuMemoryUtilization=1.5",), "gpuMemoryUtilization", "gpuMemoryUtilization 0.9"),
    (("model=xbill9/gemma-4-26B-A4B-it-qat-q4_0-w4a16-ct-text-emb4",), "model", "cannot start on one Tesla T4"),
    (("model=xbill9/gemma-4-26B-A4B-it-qat-q4_0-w4a16-ct-text-emb4",), "model", "tensorParallelSize 2"),
    # found by trying ~340 configs as a user would (the config issue's audit)
    (("labels.aws:owner=me",), "labels.aws:owner", "reserved for AWS"),
    (("labels.team=a\tb",), "labels.team", "breaks AWS's rule"),
    ((TAGS_46,), "labels", "including the project's own app, gemma4-t4:organization, gemma4-t4:project"),
    (("endpointTtl=1000000000d",), "endpointTtl", "more than 365 days"),
    (("endpointTtl=3000000d",), "endpointTtl", "more than 365 days"),
    (("instanceType=ml.p3.2xlarge", "allowNonT4Instance=true", "dtype=bfloat16"), "dtype", "V100"),
    (("gpuMemoryUtilization=1",), "gpuMemoryUtilization", "gpuMemoryUtilization 0.9"),
]

CASES = [("gce-t4", *case) for case in GCE] + [("sagemaker-t4", *case) for case in SAGEMAKER]


def _qualified(key: str) -> str:
    return key if ":" in key.split(".", 1)[0] else f"gemma4-t4:{key}"


@pytest.mark.parametrize("stack,overrides,key,fragment", CASES,
                         ids=[f"{c[0]}:{' '.join(c[1])[:60]}" for c in CASES])
def test_refused_at_preview_with_key_and_fix_before_any_resource(refused_stack, stack, overrides, key, fragment):
    error, partial = refused_stack(stack, *overrides)
    assert error.key == _qualified(key), str(error)
    assert fragment in str(error), str(error)
    assert error.fix and "\n  fix: " in str(error)
    assert partial.resources == [], "a refused config must create no resource"


def test_there_are_at_least_60_cases_across_both_stacks():
    assert len(CASES) >= 60 and len(GCE) >= 30 and len(SAGEMAKER) >= 20


def test_the_26b_a4b_on_one_t4_is_refused_with_the_numbers(refused_stack):
    """[sagemaker-t4-article]: 26B A4B loaded its weights on one T4 at 0.97, 1,024 tokens, four sequences,
    then ran out of memory. The plan refuses that exact config, with the numbers."""
    error, _ = refused_stack("sagemaker-t4", "model=xbill9/gemma-4-26B-A4B-it-qat-q4_0-w4a16-ct-text-emb4",
                             "gpuMemoryUtilization=0.97", "maxModelLen=1024", "maxNumSeqs=4")
    assert error.key == "gemma4-t4:model"
    assert "0.97 x 14.56 GiB = 14.13 GiB for vLLM; weights 14.20 GiB + overheads 0.43 GiB" in str(error)
    assert "leave -0.50 GiB for the KV cache" in str(error)


def test_what_the_audit_found_wrongly_refused_or_misblamed_now_plans(run_stack):
    """A tensor-parallel size written as 2.0 picks its shape as 2 does (it blamed machineType), and a
    base image pinned by tag and digest is a private ECR image (pins.py documents that form)."""
    plan = run_stack("gce-t4", "tensorParallelSize=2.0")
    assert plan.one("gcp:compute/instance:Instance").inputs["machineType"] == "n1-standard-4"
    assert run_stack("sagemaker-t4", "tensorParallelSize=4.0").one(
        "aws:sagemaker/endpointConfiguration:EndpointConfiguration").inputs["productionVariants"][0][
        "instanceType"] == "ml.g4dn.12xlarge"
    base = "763104351884.dkr.ecr.us-east-2.amazonaws.com/vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.3"
    assert run_stack("sagemaker-t4", f"baseImage={base}@sha256:{'a' * 64}").find("command:local:Command")
