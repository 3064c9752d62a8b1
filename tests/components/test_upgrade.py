"""An upgrade from 0.2.0 replaces nothing but what REPLACED_SINCE_020 lists with its reason: the components' new
type tokens carry aliases to the old ones,
and what 0.2.0's stack program registered (tests/fixtures/registered-0.2.0.json, recorded by running it
under the same mocks) is matched by URN or alias, with the inputs that would replace a resource unchanged.

The plan records URNs as the engine makes them (gemma4_t4.core.plan.engine_urn). The aliases the SDK
sends are specs; the engine turns them into URNs and matches old resources in registration order. ``EngineAliases`` does what pulumi/pulumi's step generator does
(pkg/resource/deploy/step_generator.go: generateAliases, collapseAliasToUrn, inheritedChildAlias), so
a child follows its parent's matched alias as it does in a real `pulumi up`."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from conftest import REPO

from gemma4_t4.core.plan import Plan, RegisteredResource

RECORDED = json.loads((REPO / "tests" / "fixtures" / "registered-0.2.0.json").read_text())
ROOT_STACK = "pulumi:pulumi:Stack"
# Resources added since 0.2.0, created on the upgrade (nothing old is replaced for them): (stack, type, name).
# None is a VM, a disk or an endpoint; each is named here so that an unplanned addition still fails.
ADDED_SINCE_020 = {
    # The build bucket's TLS-only policy and the repository's untagged-image expiry: nothing billing.
    ("sagemaker-t4", "aws:s3/bucketPolicy:BucketPolicy", "gemma4-t4-image-context-tls-only"),
    ("sagemaker-t4", "aws:ecr/lifecyclePolicy:LifecyclePolicy", "gemma4-t4-image-repo-lifecycle"),
    # The deny-all ingress rule for the VM's tag below IAP's allow: a firewall rule, nothing billing.
    ("gce-t4", "gcp:compute/firewall:Firewall", "gemma4-t4-deny-other-ingress"),
    # The account check before the image build: a local command, nothing in the account.
    ("sagemaker-t4", "command:local:Command", "gemma4-t4-account-check"),
    # The endpoint watch: deletes an endpoint that failed to reach InService; a local command.
    ("sagemaker-t4", "command:local:Command", "gemma4-t4-endpoint-watch"),
    # The TTL's backstop schedule: a second one-time delete of the endpoint, an hour after the first.
    ("sagemaker-t4", "aws:scheduler/schedule:Schedule", "gemma4-t4-ttl-backstop"),
    # The TTL's alarm on its dead-letter queue, its topic, and the backstop's own queue (components/sagemaker/ttl.py):
    # the alarm bills $0.10/month (catalog), the queue and the topic nothing at rest.
    ("sagemaker-t4", "aws:cloudwatch/metricAlarm:MetricAlarm", "gemma4-t4-ttl-delete-failed"),
    ("sagemaker-t4", "aws:sqs/queue:Queue", "gemma4-t4-ttl-backstop-dlq"),
    ("sagemaker-t4", "aws:sns/topic:Topic", "gemma4-t4-ttl-alarm"),
    # The endpoint's log group, made before the endpoint so that destroy deletes it: nothing billing.
    ("sagemaker-t4", "aws:cloudwatch/logGroup:LogGroup", "gemma4-t4-endpoint-logs"),
    # The backstop's clock, read just before CreateEndpoint: a local command.
    ("sagemaker-t4", "command:local:Command", "gemma4-t4-endpoint-requested-at"),
    # The lowered TTL's deadline check: a local command.
    ("sagemaker-t4", "command:local:Command", "gemma4-t4-ttl-passed"),
    # The TTL role's right to delete the endpoint in service: an inline policy of the TTL's role.
    ("sagemaker-t4", "aws:iam/rolePolicy:RolePolicy", "gemma4-t4-ttl-in-service-policy"),
}
# Resources of 0.2.0 an upgrade deletes on purpose, none billing: (stack, type, name) -> why.
REMOVED_SINCE_020 = {
    # The TTL's clock kept in the state: the TTL counts from the endpoint's CreationTime, read on every
    # `pulumi up` (components/sagemaker/steps/created_at.py). A local command without a delete: deleting it runs
    # nothing.
    ("sagemaker-t4", "command:local:Command", "gemma4-t4-in-service-at"): "the endpoint's CreationTime is the clock",
}
# Resources an upgrade from 0.2.0 replaces on purpose, with the reason: (stack, type, name) -> why.
REPLACED_SINCE_020 = {
    # The default startup window is derived from [gce-t4-article]'s measured parts (1020 s, was 900 s): a new
    # configuration.
    ("sagemaker-t4", "aws:sagemaker/endpointConfiguration:EndpointConfiguration", "gemma4-t4-config"):
        "startupHealthCheckTimeoutSeconds' default",
    # Every new configuration is a new endpoint beside the old one, deleted once the new one is in service (issue
    # 26, blue/green by name); it is now named NAMEPREFIX-endpoint-<8 hex from the configuration's name>, known
    # before CreateEndpoint so that its log group and the TTL's backstop exist first (0.2.0's was auto-named).
    ("sagemaker-t4", "aws:sagemaker/endpoint:Endpoint", "gemma4-t4-endpoint"):
        "a new configuration, and the endpoint's name made from it",
    # The boot image pinned by name, the one the driver was run on, not the debian-13 family; the same
    # upgrade's stable startup-script replaces the VM anyway, once (CHANGELOG's upgrade note).
    ("gce-t4", "gcp:compute/instance:Instance", "gemma4-t4"): "the boot image pinned by name",
}
# Inputs changed since 0.2.0 by an in-place update, not a replacement: (type, input) -> the keys added. The data
# disk's label that mirrors retainDataDisk (components/gce/storage.py RETAIN_LABEL): google_compute_disk's labels have no
# ForceNew, a change is a setLabels call (terraform-provider-google resource_compute_disk.go:637-646 and
# 1418-1431 at e03b7622).
ADDED_IN_PLACE = {("gcp:compute/disk:Disk", "labels"): {"gemma4-t4-retain-data-disk"}}
# Inputs a new default adds (type, input) -> (the keys added, why). The VM is replaced on this upgrade anyway (its
# guest changed: the idle stop's health bound, on by default); the rest of its inputs must still be 0.2.0's.
ADDED_BY_A_DEFAULT = {("gcp:compute/instance:Instance", "scheduling"): (
    {"maxRunDuration", "instanceTerminationAction"}, "maxRunHours' default, 24: GCE stops the VM")}
KEPT_TYPES = ("gcp:compute/instance:Instance", "gcp:compute/disk:Disk", "aws:sagemaker/endpoint:Endpoint",
              "aws:sagemaker/endpointConfiguration:EndpointConfiguration", "aws:sagemaker/model:Model")


# The fleet's resources are named with its key (components/sagemaker/fleet.py: NAME-<8 hex>), each with an alias to
# the name it had before, which the engine matches (EngineAliases): these tables name them as before.
FLEET_TYPES = ("aws:sagemaker/model:Model", "aws:sagemaker/endpointConfiguration:EndpointConfiguration",
               "aws:sagemaker/endpoint:Endpoint", "aws:cloudwatch/logGroup:LogGroup")


def stable(resource: RegisteredResource) -> str:
    return re.sub(r"-[0-9a-f]{8}$", "", resource.name) if resource.type in FLEET_TYPES else resource.name


def _parts(urn: str) -> tuple[str, str, str]:
    """(stack-and-project prefix, qualified type, name)."""
    head, project, qualified, name = urn.split("::", 3)
    return f"{head}::{project}", qualified, name


class EngineAliases:
    """The engine's alias generation over one deployment, and what each resource matched."""

    def __init__(self, plan: Plan, olds: set[str]):
        self.olds, self.matched = olds, {}  # new URN -> the old URN it matched through an alias
        for resource in plan.resources:  # registration order, as the engine sees the goals
            urn = resource.urn
            for candidate in (urn, *self.aliases(resource)):
                if candidate in olds:
                    if candidate != urn:
                        self.matched[urn] = candidate
                    break

    def _urn(self, prefix: str, name: str, type_: str, parent: str) -> str:
        qualified = f"{_parts(parent)[1]}${type_}" if parent else type_
        return f"{prefix}::{qualified}::{name}"

    def _collapse(self, resource: RegisteredResource, alias: dict) -> str:
        if "urn" in alias:
            return alias["urn"]
        parent = resource.options["parentUrn"] if resource.options["parentUrn"] else ""
        if alias.get("parentUrn"):
            parent = alias["parentUrn"]
            parent = self.matched.get(parent, parent)
        if alias.get("noParent") or _parts(resource.options["parentUrn"] or "a::b::c::d")[1] == ROOT_STACK:
            parent = ""
        prefix = _parts(resource.urn)[0]
        return self._urn(prefix, alias.get("name") or resource.name, alias.get("type") or resource.type, parent)

    def _inherited(self, type_: str, name: str, parent_name: str, parent_alias: str) -> str:
        prefix, _, alias_parent_name = _parts(parent_alias)
        if name.startswith(parent_name):
            name = alias_parent_name + name[len(parent_name):]
        return f"{prefix}::{_parts(parent_alias)[1]}${type_}::{name}"

    def aliases(self, resource: RegisteredResource) -> list[str]:
        found = [self._collapse(resource, alias) for alias in resource.options["aliases"]]
        parent = resource.options["parentUrn"] if resource.options["parentUrn"] else ""
        if parent in self.matched:
            parent_alias, parent_name = self.matched[parent], _parts(parent)[2]
            found.append(self._inherited(resource.type, resource.name, parent_name, parent_alias))
            for urn in list(found[:len(resource.options["aliases"])]):
                _, qualified, name = _parts(urn)
                found.append(self._inherited(qualified.split("$")[-1], name, parent_name, parent_alias))
        return list(dict.fromkeys(found))


@pytest.mark.parametrize("stack", sorted(RECORDED["stacks"]))
def test_every_resource_of_a_020_stack_is_matched_and_not_replaced(run_stack, stack):
    recorded = RECORDED["stacks"][stack]
    olds = {old["urn"]: old for old in recorded["resources"]}
    plan = run_stack(stack, *recorded["overrides"])
    engine = EngineAliases(plan, set(olds))
    found = {engine.matched.get(r.urn, r.urn): r for r in plan.resources}
    removed = {urn for urn in olds if (stack, _parts(urn)[1].split("$")[-1], _parts(urn)[2]) in REMOVED_SINCE_020}
    assert len(removed) == len([r for r in REMOVED_SINCE_020 if r[0] == stack]), "removed: not in 0.2.0"
    for urn, old in olds.items():
        new = found.get(urn)
        if urn in removed:
            assert new is None, f"{urn} is listed as removed but still planned"
            continue
        assert new is not None, f"{urn} would be deleted and created anew: no resource or alias matches it"
        if "inputs" in old and (stack, new.type, stable(new)) not in REPLACED_SINCE_020:
            # The guest (the VM's user-data and startup-script) changes between releases by design: a new
            # guest replaces the VM (metadata_startup_script, ForceNew), never the retained data disk. Every other
            # input must stay as 0.2.0 made it: inputs_sha256_without_metadata is the VM's hash without its
            # metadata, derived after 993f7fa (where the full inputs_sha256 still matched) by commits that
            # changed only the guest.
            without_guest = "inputs_sha256_without_metadata" in old
            compared = [k for k in old["inputs"] if not (without_guest and k == "metadata")]
            kept = {k: new.inputs[k] for k in compared if k in new.inputs}
            for variant in kept.get("productionVariants", []):
                variant.pop("modelName", None)
            for (type_, key), added_keys in [*ADDED_IN_PLACE.items(),
                                             *((k, keys) for k, (keys, _) in ADDED_BY_A_DEFAULT.items())]:
                if new.type == type_ and key in kept:
                    kept[key] = {k: v for k, v in kept[key].items() if k not in added_keys}
            want = old["inputs_sha256_without_metadata"] if without_guest else old["inputs_sha256"]
            assert hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest() == want, (
                f"{new.urn}: {sorted(kept)} changed, which replaces it")
    replaced = {r for r in REPLACED_SINCE_020 if r[0] == stack}
    assert replaced <= {(stack, r.type, stable(r)) for urn, r in found.items() if urn in olds}, "replaced: not in 0.2.0"
    added = {(stack, r.type, stable(r)) for urn, r in found.items() if urn not in olds}
    assert added == {a for a in ADDED_SINCE_020 if a[0] == stack}, "an upgrade adds resources not planned for"
    assert not any(type_ in KEPT_TYPES for _, type_, _ in added), "an upgrade adds a VM, disk or endpoint"
    assert len(plan.resources) == len(olds) - len(removed) + len(added), "an upgrade drops resources"
    assert engine.matched, "the old types are matched through aliases"


def test_without_the_aliases_everything_would_be_replaced(run_stack, monkeypatch):
    """The check above fails where it should: drop the aliases and no resource of 0.2.0 is matched."""
    from gemma4_t4.components.gce import component as gce

    monkeypatch.setattr(gce, "with_alias", lambda opts, old_type: opts)
    recorded = RECORDED["stacks"]["gce-t4"]
    olds = {old["urn"] for old in recorded["resources"]}
    plan = run_stack("gce-t4")
    engine = EngineAliases(plan, olds)
    assert not engine.matched and not olds & {r.urn for r in plan.resources}


def test_the_components_are_registered_under_the_package_tokens(run_stack):
    types = {r.type for r in run_stack("sagemaker-t4").resources if not r.custom}
    assert types == {"gemma4-t4:index:SageMakerT4Endpoint", "gemma4-t4:index:TuringImage"}
    assert {r.type for r in run_stack("gce-t4").resources if not r.custom} == {"gemma4-t4:index:GceT4Server"}
