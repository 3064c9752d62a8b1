"""The components' local steps as typed requests (components/step.py): the component writes a request to the
Command's environment and the step reads the same request back; the runner's refusal of a malformed request and
its one-line failure. The text pulumi-command records is what 0.3.0's hand-built JSON was
(tests/components/test_upgrade_from_030.py holds the plans equal)."""

from __future__ import annotations

import json

import pytest

from gemma4_t4.components.sagemaker.steps import (
    account_check,
    build,
    created_at,
    endpoint_watch,
    local_build,
    ttl_passed,
)
from gemma4_t4.components.step import StepFailed, run_step

REQUESTS = [
    account_check.CheckRequest(stack="dev", instance_type="ml.g4dn.xlarge", instances=1, most=2,
                               compute_type="BUILD_GENERAL1_MEDIUM", tag="vllm-x-sm75-0123", fleet="abcd"),
    build.BuildRequest(project="p", repository="r", tag="t", source_location="b/context/t.zip", base_image="img",
                       base_digest_pin="", role_name="role", policy_name="policy"),
    local_build.LocalBuildRequest(repository="r", repository_url="1.dkr.ecr.us-east-2.amazonaws.com/r", tag="t",
                                  base_image="img", base_digest_pin="sha256:00", builder="buildah"),
    endpoint_watch.WatchRequest(config_name="cfg", name_prefix="dev-endpoint-", fallbacks=("ml.g4dn.2xlarge",),
                                log_retention_days=30),
    created_at.CreatedAtRequest(endpoint_name="dev-endpoint-0123abcd"),
    ttl_passed.TtlRequest(endpoint_name="dev-endpoint-0123abcd", deletes_at="2026-12-05T10:00:00Z"),
]


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: type(r).__name__)
def test_a_request_reads_back_what_the_component_wrote(request_):
    env = {type(request_).ENV: request_.encode()}
    assert type(request_).from_env(env) == request_


def test_the_watch_sends_only_what_the_component_knows_in_the_order_it_always_did():
    """The local-only knobs (waits a test shortens) stay out of the recorded environment."""
    sent = endpoint_watch.WatchRequest(config_name="cfg", name_prefix="p-", fallbacks=("a", "b"),
                                       log_retention_days=14).encode()
    assert sent == json.dumps({"config_name": "cfg", "name_prefix": "p-", "fallbacks": ["a", "b"],
                               "log_retention_days": 14})
    assert endpoint_watch.WatchRequest.from_env({endpoint_watch.REQUEST_ENV: json.dumps(
        {"config_name": "cfg", "name_prefix": "p-", "poll_s": 0.05})}).poll_s == 0.05


@pytest.mark.parametrize("given", [None, "not json", "[1, 2]", '{"endpoint_name": "e"}', '{"deadline": "x"}'])
def test_a_missing_or_malformed_request_exits_2_naming_the_variable(given, capsys):
    env = {} if given is None else {ttl_passed.REQUEST_ENV: given}
    assert ttl_passed.main(env) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ttl: {ttl_passed.REQUEST_ENV} is missing or malformed (") and err.count("\n") == 1


def test_a_step_that_fails_says_one_line_and_exits_1(capsys):
    def fails(request, env):
        raise StepFailed("the build did not start: no permission")

    said: list[str] = []
    env = {ttl_passed.REQUEST_ENV: REQUESTS[-1].encode()}
    assert run_step(ttl_passed.TtlRequest, fails, said.append, env) == 1
    assert said == ["the build did not start: no permission"]


def test_the_creation_time_step_says_in_one_line_that_aws_could_not_be_asked(monkeypatch, capsys):
    """Nothing on stdout (what the component reads as the time), one line on stderr, exit 1 (the `up` stops)."""
    for key, value in {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
                       "AWS_MAX_ATTEMPTS": "1", "AWS_CONFIG_FILE": "/dev/null",
                       "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}.items():
        monkeypatch.setenv(key, value)
    env = {"AWS_REGION": "us-east-2", created_at.REQUEST_ENV: created_at.CreatedAtRequest(endpoint_name="e").encode()}
    assert created_at.main(env) == 1
    said = capsys.readouterr()
    assert said.out == "" and said.err.count("\n") == 1
    assert said.err.startswith("created-at: AWS could not be asked for the endpoint e's creation time, from which its "
                               "TTL counts: Could not connect to the endpoint URL")
