"""The Hugging Face token on SageMaker: kept in Secrets Manager, read by the image's entrypoint wrapper
(turing/hf_token_entrypoint.py) at start, never in the model's environment. The wrapper runs as the container
runs it (python3 WRAPPER BASE_ENTRYPOINT serve), against moto's Secrets Manager on loopback; the model the stack
plans is created in moto and described back. Budget: ~10 s."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from aws_standin import ACCOUNT
from conftest import REPO

from gemma4_t4 import catalog, clouds
from gemma4_t4.core.plan import SECRET_PLACEHOLDER

pytestmark = pytest.mark.standin

WRAPPER = REPO / "turing" / "hf_token_entrypoint.py"
TOKEN = "hf_" + "x" * 34  # the shape of a Hugging Face user access token


@pytest.fixture
def base_entrypoint(tmp_path):
    """A stand-in for the base image's entrypoint: records its arguments and the HF_TOKEN it was started with."""
    seen = tmp_path / "seen.json"
    script = tmp_path / "sagemaker_entrypoint.sh"
    script.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                      f"json.dump({{'argv': sys.argv[1:], 'token': os.environ.get('HF_TOKEN'), "
                      f"'arn': os.environ.get('{catalog.HF_TOKEN_SECRET_ENV}')}}, open({str(seen)!r}, 'w'))\n")
    script.chmod(0o755)
    return script, seen


def start(moto, entrypoint, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(WRAPPER), str(entrypoint), "serve"],
                          env={"PATH": os.environ["PATH"], **moto.env(), **env}, capture_output=True, text=True,
                          timeout=60)


def test_the_wrapper_reads_the_token_from_its_secret_then_execs_the_base_entrypoint(moto, base_entrypoint):
    moto.reset()
    arn = moto.client("secretsmanager").create_secret(Name="gemma4-t4-hf-token", SecretString=TOKEN)["ARN"]
    script, seen = base_entrypoint
    result = start(moto, script, **{catalog.HF_TOKEN_SECRET_ENV: arn})
    assert result.returncode == 0, result.stderr
    assert json.loads(seen.read_text()) == {"argv": ["serve"], "token": TOKEN, "arn": arn}
    assert TOKEN not in result.stdout + result.stderr, "the token is never printed into the endpoint's log"


def test_without_a_secret_the_base_entrypoint_starts_as_it_was(moto, base_entrypoint):
    script, seen = base_entrypoint
    result = start(moto, script)
    assert result.returncode == 0, result.stderr
    assert json.loads(seen.read_text()) == {"argv": ["serve"], "token": None, "arn": None}


def test_a_secret_that_cannot_be_read_stops_the_container_with_the_reason(moto, base_entrypoint):
    """Secrets Manager's answer for a secret that is not there (moto renders GetSecretValue's
    ResourceNotFoundException, Secrets Manager API reference): the container exits 1 and says what to fix,
    without starting vLLM on no token (a gated model would fail later, less clearly)."""
    moto.reset()
    script, seen = base_entrypoint
    arn = f"arn:aws:secretsmanager:us-east-2:{ACCOUNT}:secret:gone-AbCdEf"
    result = start(moto, script, **{catalog.HF_TOKEN_SECRET_ENV: arn})
    assert result.returncode == 1 and not seen.exists()
    assert f"hf-token: could not read the token's secret {arn}: ResourceNotFoundException" in result.stderr
    assert "secretsmanager:GetSecretValue" in result.stderr


def test_describe_model_shows_the_secrets_arn_and_no_token(moto):
    """The model as the stack plans it (with hfToken set as a secret) created in moto: DescribeModel, what anyone
    allowed to describe models reads, holds the secret's ARN and nothing secret."""
    moto.reset()
    config = clouds.stack_config("sagemaker-t4", (), REPO)
    config["gemma4-t4:hfToken"] = {"secure": "AAABAGVuY3J5cHRlZA=="}
    plan = clouds.offline_plan("sagemaker-t4", config)
    container = plan.one("aws:sagemaker/model:Model").inputs["primaryContainer"]
    assert SECRET_PLACEHOLDER not in json.dumps(container), "no secret flows into the model"
    sagemaker = moto.client("sagemaker")
    sagemaker.create_model(ModelName="gemma4-t4-model", ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/x",
                           PrimaryContainer={"Image": container["image"], "Environment": container["environment"]})
    described = sagemaker.describe_model(ModelName="gemma4-t4-model")["PrimaryContainer"]["Environment"]
    assert described[catalog.HF_TOKEN_SECRET_ENV] == plan.one("aws:secretsmanager/secret:Secret").state["arn"]
    assert not any("TOKEN" in k and k != catalog.HF_TOKEN_SECRET_ENV for k in described)


def test_the_package_schema_marks_the_token_secret():
    """Every language's SDK then sends hfToken as a secret; the stack program's secret keys are the same."""
    from gemma4_t4.clouds.stack_config import SECRET_KEYS

    schema = json.loads((REPO / "components" / "schema.json").read_text())
    secret = {(name, key) for name, resource in schema["resources"].items()
              for key, prop in resource["inputProperties"].items() if prop.get("secret")}
    assert secret == {("gemma4-t4:index:SageMakerT4Endpoint", "hfToken"), ("gemma4-t4:index:GceT4Server", "apiKey"),
                      ("gemma4-t4:index:GceT4Server", "hfToken")}
    assert set(SECRET_KEYS) == {"hfToken", "apiKey"}
