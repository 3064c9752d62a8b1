"""`gemma4-t4 preflight sagemaker-t4` against moto's server on loopback: the quota from
GetServiceQuota with AWS's default as the fallback, instances counted from the endpoints that
hold them, the stack's own endpoint found by its tag, autoscaling's maximum; and --all-regions,
region by region (moto keeps each region's endpoints apart). Budget: ~25 s."""

from __future__ import annotations

import json
import os
import sys

import pytest
from aws_standin import add_codebuild_quota, add_sagemaker_quotas, set_endpoint_status
from conftest import REPO, run

from gemma4_t4 import clouds
from gemma4_t4.checks import Check
from gemma4_t4.clouds.sagemaker import capacity
from gemma4_t4.clouds.sagemaker.preflight import SageMakerNeeds
from gemma4_t4.components.sagemaker.scope import StackScope
from gemma4_t4.core.preflight import Needs, PreflightError
from gemma4_t4.errors import ConfigError

pytestmark = pytest.mark.standin

G4DN = "ml.g4dn.xlarge for endpoint usage"
SCOPE = StackScope("sagemaker-t4", "gemma4-t4")


def endpoint(moto, name: str, instances: int, instance_type: str = "ml.g4dn.xlarge", stack: str | None = None,
             region: str = "us-east-2", project: str = "gemma4-t4"):
    """An endpoint; with STACK, tagged as the component tags its own (organization, project and stack)."""
    sagemaker = moto.client("sagemaker", region_name=region)
    sagemaker.create_model(ModelName=name, ExecutionRoleArn="arn:aws:iam::123456789012:role/x",
                           PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-2.amazonaws.com/r@sha256:0"})
    sagemaker.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[
        {"VariantName": "AllTraffic", "ModelName": name, "InstanceType": instance_type,
         "InitialInstanceCount": instances}])
    tags = [{"Key": key, "Value": value} for key, value in StackScope(stack, project, "organization").tags().items()
            ] if stack else []
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name, Tags=tags)


def checks(stack: str = "sagemaker-t4", *overrides: str) -> dict[str, Check]:
    config, result = clouds.plan_stack(stack, overrides, REPO)
    return {c.name: c for c in clouds.preflight(stack, config, result)}


def test_the_default_quota_counts_when_none_is_applied(aws, monkeypatch):
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0, "ml.g6.xlarge for endpoint usage": 0.0}, applied={})
    check = checks()[G4DN]
    assert not check.ok and "limit 0 (AWS default; nothing applied to this account)" in check.detail
    # Day two: what a change needs, not only the first endpoint (blue/green: the new fleet beside the old one).
    assert f'request "{G4DN}" = 2 in us-east-2' in check.fix and "quota code L-STANDIN00" in check.fix
    assert "1 for this endpoint and 1 for the new fleet" in check.fix and "fleetChange single, which needs 1" \
        in check.fix
    single = checks("sagemaker-t4", "fleetChange=single")[G4DN]
    assert f'request "{G4DN}" = 1 in us-east-2' in single.fix


def test_codebuild_builds_are_checked_before_the_endpoint(aws, monkeypatch):
    """A new account's CodeBuild limit of 0 (applied under a default of 15) is reported with its fix."""
    name = add_codebuild_quota(monkeypatch, default=15.0, applied=0.0)
    add_sagemaker_quotas(monkeypatch, {G4DN: 2.0}, applied={})
    result = checks()
    assert next(iter(result)) == name == "Concurrently running builds for Linux/Medium environment"
    assert not result[name].ok and "limit 0 (applied)" in result[name].detail
    assert "--quota-code L-2DC20C30 --desired-value 1" in result[name].fix and result[G4DN].ok


def test_the_applied_value_wins_over_the_default(aws, monkeypatch):
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 2.0})
    check = checks()[G4DN]
    assert check.ok and "limit 2 (applied), in use 0, free 2" in check.detail


def test_failed_endpoints_hold_no_instances_and_other_types_do_not_count(aws, monkeypatch):
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 2.0})
    endpoint(aws, "old-failed", 2)
    set_endpoint_status("old-failed", "Failed")
    endpoint(aws, "a-bigger-one", 1, instance_type="ml.g4dn.2xlarge")
    endpoint(aws, "another", 1)
    check = checks()[G4DN]
    assert check.ok and "in use 1, free 1" in check.detail


def test_an_endpoint_whose_config_was_deleted_is_named_not_a_crash(aws, monkeypatch):
    """SageMaker lets an endpoint config be deleted while its endpoint serves; its type is then
    unknown, so its instances cannot be counted: the check says so instead of failing on AWS."""
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 2.0})
    endpoint(aws, "orphaned", 1)
    endpoint(aws, "another", 1)
    aws.client("sagemaker", region_name="us-east-2").delete_endpoint_config(EndpointConfigName="orphaned")
    result = checks()
    assert result[G4DN].ok and "in use 1, free 1" in result[G4DN].detail
    untyped = result["endpoints of unknown instance type"]
    assert untyped.ok and untyped.warning and untyped.detail.startswith("orphaned: serving")


def test_all_regions_name_the_endpoints_they_could_not_count(aws, monkeypatch):
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 2.0})
    endpoint(aws, "orphaned", 1)
    aws.client("sagemaker", region_name="us-east-2").delete_endpoint_config(EndpointConfigName="orphaned")
    needs = Needs("sagemaker", "us-east-2", SageMakerNeeds("ml.g4dn.xlarge", instances=1, most=1))
    fetched = capacity.fetch_sagemaker_regions("ml.g4dn.xlarge", SCOPE, ["us-east-2"])
    assert fetched[0].untyped == ("orphaned",) and fetched[0].in_use == 0
    row = capacity.sagemaker_regions(needs, fetched).rows[0]
    assert "not counted: orphaned (serving, endpoint config deleted" in row.detail


def test_a_full_quota_fails_with_the_number_to_request(aws, monkeypatch):
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 2.0})
    endpoint(aws, "a", 1)
    endpoint(aws, "b", 1)
    check = checks()[G4DN]
    assert not check.ok and f'request "{G4DN}" = 4' in check.fix and "fleetChange single, which needs 3" in check.fix


def test_an_update_of_the_stacks_endpoint_needing_twice_the_quota_warns(aws, monkeypatch):
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 1.0})
    endpoint(aws, "sagemaker-t4-endpoint-1a2b3c4d", 1, stack="sagemaker-t4")
    result = checks()
    assert result[G4DN].ok and "this stack's endpoint holds 1" in result[G4DN].detail
    update = result["update of this stack's endpoint"]
    assert update.ok and update.warning and "needs 2 ml.g4dn.xlarge, the limit is 1" in update.detail


def test_an_instance_type_the_region_lacks_is_named(aws, monkeypatch):
    add_sagemaker_quotas(monkeypatch, {G4DN: 2.0}, applied={})
    check = checks("sagemaker-t4", "instanceType=ml.g4dn.2xlarge")["ml.g4dn.2xlarge for endpoint usage"]
    assert not check.ok and "does not offer ml.g4dn.2xlarge here" in check.detail


def test_an_empty_region_never_reaches_boto3(aws):
    with pytest.raises(ConfigError, match="pulumi config set aws:region"):
        checks("sagemaker-t4", "aws:region= ")


def test_the_cli_prints_the_warning_and_exits_0(aws, monkeypatch):
    """Through the command line as a user runs it (moto's quotas are patched in this process, so
    the CLI runs here too, not in a subprocess)."""
    from gemma4_t4.cli import main

    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 1.0})
    endpoint(aws, "mine", 1, stack="sagemaker-t4")
    assert main(["preflight", "sagemaker-t4", "--project-dir", str(REPO), "--json"]) == 0


def test_the_cli_without_credentials_is_a_clear_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true")
    result = run([sys.executable, "-m", "gemma4_t4", "preflight", "sagemaker-t4", "--json"], cwd=REPO, env=env)
    assert result.returncode == 1 and "no AWS credentials" in result.stderr and "Traceback" not in result.stderr
    failure = json.loads(result.stdout)  # --json: the failure document (docs/json.md), not a result
    assert failure["ok"] is False and "no AWS credentials" in failure["error"]["message"]


def test_an_autoscaled_stack_is_checked_for_its_maximum(aws, monkeypatch):
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 2.0})
    result = checks("sagemaker-t4", "maxInstanceCount=4")
    assert result[G4DN].ok
    scaling = result["autoscaling to maxInstanceCount"]
    assert scaling.warning and "scales out to 2 of 4" in scaling.detail and f'"{G4DN}" = 4' in scaling.fix


def test_all_regions_are_asked_one_by_one_and_the_first_with_room_is_named(aws, monkeypatch):
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 2.0})
    endpoint(aws, "a", 1)
    endpoint(aws, "b", 1)  # us-east-2, the stack's region: full
    endpoint(aws, "c", 1, region="us-west-1")  # room for one, the stack may need two
    needs = Needs("sagemaker", "us-east-2", SageMakerNeeds("ml.g4dn.xlarge", instances=1, most=2))
    fetched = capacity.fetch_sagemaker_regions("ml.g4dn.xlarge", SCOPE, ["us-west-2", "us-west-1",
                                                                                  "us-east-2"])
    assert [(f.region, f.in_use) for f in fetched] == [("us-west-2", 0), ("us-west-1", 1), ("us-east-2", 2)]
    report = capacity.sagemaker_regions(needs, fetched)
    assert [(row.region, row.ok) for row in report.rows] == [("us-east-2", False), ("us-west-1", False),
                                                             ("us-west-2", True)]
    assert report.config_lines == ["pulumi config set aws:region us-west-2"]


def test_the_cli_all_regions_report_as_json(aws, monkeypatch, capsys):
    from gemma4_t4.cli import main

    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 1.0})
    endpoint(aws, "mine", 1, stack="sagemaker-t4")
    code = main(["preflight", "sagemaker-t4", "--project-dir", str(REPO), "--all-regions", "--json",
                 "--regions", "us-east-2,eu-west-1"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["stack"] == "sagemaker-t4" and doc["needed"] == "1 x ml.g4dn.xlarge"
    assert [row["region"] for row in doc["rows"]] == ["us-east-2", "eu-west-1"]
    assert doc["first"]["region"] == "us-east-2" and doc["config_lines"] == [], "its own endpoint makes room"
    assert main(["preflight", "sagemaker-t4", "--project-dir", str(REPO), "--regions", "us-east-2"]) == 2


def test_the_checks_ask_as_the_stacks_aws_profile(aws, monkeypatch, tmp_path):
    """The keys exist only under the profile the stack names (aws:profile), as for a user whose
    default credentials are another account's: preflight must ask as that profile."""
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    credentials = tmp_path / "credentials"
    credentials.write_text("[ml-team]\naws_access_key_id = testing\naws_secret_access_key = testing\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    add_sagemaker_quotas(monkeypatch, {G4DN: 0.0}, applied={G4DN: 2.0})
    assert checks("sagemaker-t4", "aws:profile=ml-team")[G4DN].ok
    with pytest.raises(PreflightError, match="no AWS credentials:"):
        checks("sagemaker-t4")
    with pytest.raises(PreflightError, match=r"'nobody' .* is not in ~/.aws/config"):
        checks("sagemaker-t4", "aws:profile=nobody")


def test_preflight_does_not_ask_about_codebuild_for_a_local_build(moto, monkeypatch):
    moto.reset()
    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    name = add_codebuild_quota(monkeypatch, default=15.0, applied=0.0)
    add_sagemaker_quotas(monkeypatch, {"ml.g4dn.xlarge for endpoint usage": 1.0}, applied={})

    def checks(*overrides: str) -> dict:
        config, result = clouds.plan_stack("sagemaker-t4", overrides, REPO)
        return {c.name: c for c in clouds.preflight("sagemaker-t4", config, result)}

    assert not checks()[name].ok
    local = checks("imageBuilder=local")
    assert name not in local and local["ml.g4dn.xlarge for endpoint usage"].ok


def _refusing(code: str, message: str):
    from botocore.exceptions import ClientError

    def usage(session, instance_type, stack):
        raise ClientError({"Error": {"Code": code, "Message": message}}, "ListAWSDefaultServiceQuotas")

    return usage


def test_an_opt_in_region_not_enabled_is_a_row_and_expired_credentials_stop_the_report(aws, monkeypatch):
    """Read by the error's code, not its text. An opt-in region the account has not enabled answers as for an
    unknown key (published transcripts: awslabs/landing-zone-accelerator-on-aws#269, nccgroup/ScoutSuite#1389);
    expired credentials (STS's ExpiredToken, "The security token included in the request is expired") are the
    account's, the same in every region."""
    monkeypatch.setattr("gemma4_t4.components.sagemaker.quotas.sagemaker_usage", _refusing(
        "UnrecognizedClientException", "The security token included in the request is invalid"))
    (row,) = capacity.fetch_sagemaker_regions("ml.g4dn.xlarge", SCOPE, ["ap-east-2"])
    assert row.error.startswith("not enabled for this account (opt-in region?)")
    monkeypatch.setattr("gemma4_t4.components.sagemaker.quotas.sagemaker_usage", _refusing(
        "ExpiredToken", "The security token included in the request is expired"))
    with pytest.raises(PreflightError, match="your AWS credentials have expired"):
        capacity.fetch_sagemaker_regions("ml.g4dn.xlarge", SCOPE, ["us-east-2", "us-west-2"])


def test_an_ended_sso_session_stops_the_all_regions_report(aws, monkeypatch):
    """botocore's own error for an SSO token it cannot refresh (botocore/tokens.py raises it with this message; a
    BotoCoreError, not a ClientError): the account's."""
    from botocore.exceptions import TokenRetrievalError

    def usage(session, instance_type, stack):
        raise TokenRetrievalError(provider="sso", error_msg="Token has expired and refresh failed")

    monkeypatch.setattr("gemma4_t4.components.sagemaker.quotas.sagemaker_usage", usage)
    with pytest.raises(PreflightError, match="SSO session has expired"):
        capacity.fetch_sagemaker_regions("ml.g4dn.xlarge", SCOPE, ["us-east-2", "us-west-2"])
