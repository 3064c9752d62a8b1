"""An upgrade from 0.3.0 keeps what is deployed: the stacks' plans after this version's changes have the URNs and the
inputs that gemma4-t4 0.3.0's had (tests/fixtures/upgrade-0.3.0.json, recorded from the offline plan of
0.3.0). A changed URN is a delete and a create on the next `pulumi up` (a new VM, a new endpoint); a changed
input of a local Command runs that step again (a new image build). What an upgrade does change is listed in
EXPECTED and what it deletes in REMOVED, each with its reason, and in CHANGELOG.md's upgrade note."""

from __future__ import annotations

import json

import pytest
from conftest import REPO
from fixtures.record_upgrade import digest_long

from gemma4_t4.catalog import AWS_PRICES
from gemma4_t4.clouds import plan_stack
from gemma4_t4.components.step import step_command

RECORDED = json.loads((REPO / "tests" / "fixtures" / "upgrade-0.3.0.json").read_text())

SAGEMAKER_CHILD = "urn:pulumi:{stack}::gemma4-t4::gemma4-t4:index:SageMakerT4Endpoint$"
TTL_ALARM = ("with endpointTtl, an alarm on the TTL's dead-letter queue, its SNS topic, and a dead-letter queue of the "
             f"backstop's own are added (the alarm: ${AWS_PRICES['cloudwatch:alarm-month'].usd_per_hour:.2f}/month at "
             "CloudWatch's list price)")
STEP = "urn:pulumi:{stack}::gemma4-t4::gemma4-t4:index:SageMakerT4Endpoint$command:local:Command::gemma4-t4-"
IMAGE_STEP = ("urn:pulumi:{stack}::gemma4-t4::gemma4-t4:index:SageMakerT4Endpoint$gemma4-t4:index:TuringImage"
              "$command:local:Command::gemma4-t4-image-")
ENDPOINT = "urn:pulumi:{stack}::gemma4-t4::gemma4-t4:index:SageMakerT4Endpoint$aws:sagemaker/endpoint:Endpoint::gemma4-t4-endpoint"
VM = "urn:pulumi:{stack}::gemma4-t4::gemma4-t4:index:GceT4Server$gcp:compute/instance:Instance::gemma4-t4"
ENDPOINT = "urn:pulumi:{stack}::gemma4-t4::gemma4-t4:index:SageMakerT4Endpoint$aws:sagemaker/endpoint:Endpoint::gemma4-t4-endpoint"
ENDPOINT_LOGS = ("urn:pulumi:{stack}::gemma4-t4::gemma4-t4:index:SageMakerT4Endpoint$aws:cloudwatch/logGroup:LogGroup::"
                 "gemma4-t4-endpoint-logs")
REPOSITORY = ("urn:pulumi:{stack}::gemma4-t4::gemma4-t4:index:SageMakerT4Endpoint$gemma4-t4:index:TuringImage$"
              "aws:ecr/repository:Repository::gemma4-t4-image-repo")
ACCOUNT_CHECK_SCOPE = ("the account check's request names the stack's Pulumi project and organization, and carries "
                       "the fleet's key and fleetChange")
# {URN pattern: {input: why it changes}}. Each local step's recorded command changes once, to its name run by the
# interpreter found when it runs (components/step.py), so each runs once more on the first `pulumi up` after the
# upgrade; each re-run changes nothing (tests/components/sagemaker/test_sagemaker_step_reruns.py): the account check
# is a read-only look at the account's quotas and CodeBuild; a build finds its tag already in the repository and
# prints the same digest; the watch finds the endpoint InService and returns; the TTL check finds the deadline ahead
# (or, past it, deletes what the TTL deletes anyway). From then on the text is the same on every machine and release.
BY_NAME = "each step is recorded by its name, run by the Python found when it runs (`python -m gemma4_t4.step NAME`)"
EXPECTED: dict[str, dict[str, str]] = {
    STEP + "account-check": {"create": BY_NAME,
                             "environment": ACCOUNT_CHECK_SCOPE, "triggers": ACCOUNT_CHECK_SCOPE},
    # Tags change in place (the AWS provider updates tags without replacing a resource); the fleet tag is the
    # fleet's key (components/sagemaker/fleet.py).
    ENDPOINT: {"tags": "the endpoint's tags name the Pulumi organization and project besides the stack"},
    ENDPOINT_LOGS: {"tags": "the endpoint's log group carries the same organization, project and stack tags"},
    REPOSITORY: {"tags": "the image repository carries the same tags, so a kept one is adopted only by its own stack"},
    IMAGE_STEP + "codebuild-run": {"create": BY_NAME},
    IMAGE_STEP + "local-build": {"create": BY_NAME},
    STEP + "endpoint-watch": {"create": BY_NAME},
    STEP + "ttl-passed": {"create": BY_NAME},
    # The backstop's failure after a delete that worked lands in its own queue, which no alarm watches.
    SAGEMAKER_CHILD + "aws:scheduler/schedule:Schedule::gemma4-t4-ttl-backstop": {
        "target": "the backstop schedule sends its failures to a dead-letter queue of its own, in place"},
    SAGEMAKER_CHILD + "aws:iam/rolePolicy:RolePolicy::gemma4-t4-ttl-policy": {
        "policy": "the TTL's role may also send to the backstop's queue, in place"},
    # The one replacement of the GCE VM this upgrade makes (ForceNew: metadata_startup_script), so that no later
    # setting or release replaces it: the startup-script no longer names the user-data's hash, and a new
    # user-data is applied on the running VM (cloudinit/scripts/guest_bundle.py).
    VM: {"metadataStartupScript": "the GCE VM is replaced once: its startup-script no longer names the user-data",
         "metadata": "the guest's user-data (its files, applied on the running VM from now on) changes",
         "bootDisk": "the boot image is pinned by name, the Debian 13 image the driver was run on"},
}
# {URN pattern: why it goes}: what an upgrade deletes (nothing that bills).
REMOVED: dict[str, str] = {
    STEP + "in-service-at": "the TTL counts from the endpoint's CreationTime, read on every `pulumi up`, no longer "
                            "from a clock kept in the state",
}

GCE_CHILD = "urn:pulumi:{stack}::gemma4-t4::gemma4-t4:index:GceT4Server$"
# {URN prefix: why it comes}: what an upgrade adds (nothing that bills): with operators, their custom role and its
# grant on the VM (least privilege, no project-wide role).
ADDED: dict[str, str] = {
    GCE_CHILD + "gcp:projects/iAMCustomRole:IAMCustomRole::gemma4-t4-operator-role":
        "with `operators`, a custom role (read, stop, start the VM) and its grant on the VM are added",
    GCE_CHILD + "gcp:compute/instanceIAMMember:InstanceIAMMember::gemma4-t4-operate-":
        "with `operators`, a custom role (read, stop, start the VM) and its grant on the VM are added",
    GCE_CHILD + "gcp:projects/service:Service::gemma4-t4-iap-api":
        "with `operators`, the IAP API is enabled (and left on at destroy)",
    SAGEMAKER_CHILD + "aws:sqs/queue:Queue::gemma4-t4-ttl-backstop-dlq": TTL_ALARM,
    SAGEMAKER_CHILD + "aws:sns/topic:Topic::gemma4-t4-ttl-alarm": TTL_ALARM,
    SAGEMAKER_CHILD + "aws:cloudwatch/metricAlarm:MetricAlarm::gemma4-t4-ttl-delete-failed": TTL_ALARM,
}


# The module each step ran in 0.3.0 (git 34de443: components/local_step.py python_step), and the name it runs by now.
STEP_OF_030_MODULE = {
    "gemma4_t4.clouds.aws_account_check": "sagemaker-account-check",
    "gemma4_t4.components.scripts.codebuild_run": "sagemaker-build",
    "gemma4_t4.components.scripts.local_build": "sagemaker-local-build",
    "gemma4_t4.components.scripts.endpoint_watch": "sagemaker-endpoint-watch",
    "gemma4_t4.components.scripts.ttl_passed": "sagemaker-ttl-passed",
}


# The fleet's Model, EndpointConfiguration, endpoint and log group are named with its key
# (components/sagemaker/fleet.py: NAME-<8 hex>), so that no change replaces what a serving endpoint uses; each
# carries an alias to its 0.3.0 name, which the engine matches: the same resource, not a delete and a create.
RENAMED = "each fleet resource is named with the fleet's key, with an alias to its 0.3.0 name"


def as_recorded(resource) -> str:
    """The URN the engine matches RESOURCE to: its own, or its alias's (a new name under the same parent)."""
    for alias in resource.options.get("aliases") or []:
        if isinstance(alias, dict) and set(alias) == {"name"}:
            return resource.urn.rsplit("::", 1)[0] + "::" + alias["name"]
    return resource.urn


@pytest.mark.parametrize("case", sorted(RECORDED["cases"]))
def test_an_upgrade_keeps_every_urn_and_input(case):
    recorded = RECORDED["cases"][case]
    _, plan = plan_stack(recorded["stack"], recorded["overrides"])
    removed = {pattern.format(stack=recorded["stack"]) for pattern in REMOVED}
    added = tuple(prefix.format(stack=recorded["stack"]) for prefix in ADDED)
    assert sorted(as_recorded(r) for r in plan.resources if not r.urn.startswith(added)) == \
        [urn for urn in recorded["urns"] if urn not in removed]
    expected_changes = {pattern.format(stack=recorded["stack"]): why for pattern, why in EXPECTED.items()}
    for resource in plan.resources:
        if resource.urn.startswith(added):
            continue
        expected = expected_changes.get(as_recorded(resource), {})
        now, then = digest_long(resource.inputs), recorded["inputs"][as_recorded(resource)]
        changed = {key for key in set(now) | set(then) if now.get(key) != then.get(key)}
        assert changed == (changed & set(expected)), (resource.urn, {k: (then.get(k), now.get(k)) for k in changed})


def test_the_expected_changes_are_the_upgrade_notes():
    notes = (REPO / "CHANGELOG.md").read_text()
    for why in [*(why for changes in EXPECTED.values() for why in changes.values()), *REMOVED.values(),
                *ADDED.values(), RENAMED]:
        assert why in notes, f"CHANGELOG.md's upgrade note should say: {why}"


@pytest.mark.parametrize("case", sorted(c for c in RECORDED["cases"] if RECORDED["cases"][c]["stack"] == "sagemaker-t4"))
def test_each_step_of_030_is_recorded_by_its_own_name(case):
    """0.3.0 recorded `"${GEMMA4_T4_PYTHON:-.venv/bin/python}" -m MODULE`; each step now records the one line that
    runs it by name, and runs the same step."""
    recorded = RECORDED["cases"][case]
    _, plan = plan_stack(recorded["stack"], recorded["overrides"])
    now = {as_recorded(resource): resource.inputs.get("create") for resource in plan.resources}
    steps = {urn: then["create"].rsplit(" -m ", 1)[1] for urn, then in recorded["inputs"].items()
             if " -m " in str(then.get("create"))}
    assert len(steps) == 4, steps
    for urn, module in steps.items():
        assert now[urn] == step_command(STEP_OF_030_MODULE[module]), urn
