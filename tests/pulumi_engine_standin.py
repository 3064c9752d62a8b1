"""What `pulumi up` does to a SageMaker stack's fleet, resource by resource, against moto's server: the stack program
runs under mocks that answer as the engine and the AWS provider do, and the fleet's resources (Model,
EndpointConfiguration, Endpoint, log group) are made and deleted in moto as they would be in the account; the
account check and the single-fleet step run against moto as `pulumi up` runs them. Its sources, the engine's rules
it follows:

- A resource whose inputs change in a way its provider cannot update is replaced, the new one created first; the
  old one is marked pending deletion and deleted at the end of the update (pulumi/pulumi#9979). The AWS provider
  replaces a Model or an EndpointConfiguration for any change but its tags, an endpoint for a new name, a log group
  for a new name (terraform-provider-aws internal/service/sagemaker/model.go, endpoint_configuration.go,
  endpoint.go; internal/service/logs/group.go: ForceNew); the endpoint also for a new configuration (the
  component's replaceOnChanges). Auto-naming gives a replacement a new random suffix.
- An update that fails stops there: what it replaced stays pending deletion, and the next `up` deletes it first,
  before anything else (pulumi/pulumi#9979). Resources the program no longer declares are deleted only at the end
  of an update that succeeded (pulumi/pulumi#14740: "Pulumi by design deletes resources at the end of an update").
- Deletes run dependents first; here by type (an endpoint before its configuration, a configuration before its
  model; the component's dependency graph gives that order).
- A local Command runs when it is created or its inputs change (pulumi-command); a failed one fails the update.

A create that fails (FAIL) records nothing: the endpoint watch deletes a failed endpoint (steps/endpoint_watch.py).
CHECK is called after every step with the account as it then is."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aws_standin import MotoAws, MotoWorld
from conftest import REPO

from gemma4_t4 import clouds
from gemma4_t4.clouds.sagemaker.standins import aws_state
from gemma4_t4.core import plan as offline
from gemma4_t4.core.mock_answers import Invoke, any_state

MODEL = "aws:sagemaker/model:Model"
CONFIG = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
ENDPOINT = "aws:sagemaker/endpoint:Endpoint"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
COMMAND = "command:local:Command"
# Inputs a change of which replaces the resource; None: every input but tags.
FORCE_NEW: dict[str, tuple[str, ...] | None] = {MODEL: None, CONFIG: None, ENDPOINT: ("name", "endpointConfigName"),
                                                 LOG_GROUP: ("name",), COMMAND: None}
DELETE_ORDER = (ENDPOINT, CONFIG, MODEL, LOG_GROUP)
# The steps run against moto; the others answer as the mocks do (the build's digest, a clock).
RUN_STEPS = ("sagemaker-account-check", "sagemaker-single-fleet")


@dataclass
class Held:
    """A resource in the stack's state."""

    type: str
    name: str
    inputs: dict[str, Any]
    id: str
    state: dict[str, Any]


class UpFailed(Exception):
    pass


@dataclass
class Engine:
    moto: MotoAws
    stack: str = "sagemaker-t4"
    check: Callable[[str], None] = lambda step: None
    state: dict[tuple[str, str], Held] = field(default_factory=dict)
    pending: list[Held] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    failed: bool = False

    def up(self, *overrides: str, fail: Callable[[str, dict], bool] = lambda typ, inputs: False) -> bool:
        """One `pulumi up` with OVERRIDES; FAIL(type, inputs): a create that fails. True if it succeeded."""
        for held in self._ordered(self.pending):  # pulumi/pulumi#9979: the last failed update's deletions first
            self._delete(held, "pending deletion")
        self.pending = []
        registered: set[tuple[str, str]] = set()
        self.failed = False
        engine = self

        class Mocks:
            def new_resource(self, args):
                registered.add((args.typ, args.name))
                return engine._register(args.typ, args.name, dict(args.inputs), fail)

            def call(self, args):
                handler = invokes.get(args.token)
                return handler(dict(args.args)) if handler is not None else {}

        invokes: dict[str, Invoke] = {}
        world = {"sagemaker": MotoWorld(aws=self.moto)}
        for cloud in clouds.CLOUDS.values():
            invokes.update(cloud.mock_invokes(world.get(cloud.name)))
        try:
            offline.run_program(self.stack, clouds.stack_config(self.stack, overrides, REPO), mocks=Mocks())
        except Exception as err:  # the failed step's error, as the engine ends the update with it
            self.failed = True
            self.log.append(f"up failed: {str(err)[:300]}")
        if self.failed:  # the mocks log a failed registration; the update ends without its deletions
            return False
        removed = [held for key, held in self.state.items() if key not in registered]
        for held in self._ordered([*self.pending, *removed]):
            self._delete(held, "replaced" if held in self.pending else "no longer declared")
            self.state.pop((held.type, held.name), None) if held in removed else None
        self.pending = []
        return True

    def _register(self, typ: str, name: str, inputs: dict[str, Any], fail) -> tuple[str, dict[str, Any]]:
        old = self.state.get((typ, name))
        if old is not None and _same(old.inputs, inputs):
            return old.id, old.state
        if old is not None and not _replaces(typ, old.inputs, inputs):
            old.inputs, old.state = inputs, {**old.state, **inputs, "name": old.state.get("name")}
            self._apply_update(old)
            return old.id, old.state
        held = self._create(typ, name, inputs, fail)
        if old is not None:
            self.pending.append(old)
        self.state[(typ, name)] = held
        return held.id, held.state

    def _create(self, typ: str, name: str, inputs: dict[str, Any], fail) -> Held:
        suffix = secrets.token_hex(4)[:7]  # auto-naming: a new random suffix for every new resource
        standin = aws_state if typ.startswith("aws:") else any_state
        physical, state = standin(typ, name, inputs, suffix)
        held = Held(typ, name, inputs, physical, state)
        if fail(typ, inputs):
            self.failed = True
            self.log.append(f"create failed: {name}")
            raise UpFailed(f"creating {name} failed")
        self._apply_create(held)
        self.log.append(f"created {name} ({state.get('name')})")
        self.check(f"created {name}")
        return held

    def _apply_create(self, held: Held) -> None:
        sagemaker, inputs, physical = self.moto.client("sagemaker"), held.inputs, held.state.get("name")
        if held.type == MODEL:
            container = inputs["primaryContainer"]
            sagemaker.create_model(ModelName=physical, ExecutionRoleArn=str(inputs["executionRoleArn"]),
                                   PrimaryContainer={"Image": container["image"], "Environment": {
                                       k: str(v) for k, v in (container.get("environment") or {}).items()}})
        elif held.type == CONFIG:
            sagemaker.create_endpoint_config(EndpointConfigName=physical, ProductionVariants=[
                {"VariantName": v["variantName"], "ModelName": v["modelName"], "InstanceType": v["instanceType"],
                 "InitialInstanceCount": int(v["initialInstanceCount"])} for v in inputs["productionVariants"]])
        elif held.type == ENDPOINT:
            sagemaker.create_endpoint(EndpointName=physical, EndpointConfigName=inputs["endpointConfigName"],
                                      Tags=[{"Key": k, "Value": str(v)} for k, v in inputs["tags"].items()])
        elif held.type == LOG_GROUP:
            logs = self.moto.client("logs")
            logs.create_log_group(logGroupName=physical)
            logs.put_retention_policy(logGroupName=physical, retentionInDays=int(inputs["retentionInDays"]))
        elif held.type == COMMAND:
            self._run(held)

    def _apply_update(self, held: Held) -> None:
        if held.type == LOG_GROUP:
            self.moto.client("logs").put_retention_policy(logGroupName=held.state["name"],
                                                          retentionInDays=int(held.inputs["retentionInDays"]))

    def _run(self, held: Held) -> None:
        command = str(held.inputs.get("create", ""))
        if not any(command.endswith(f" -m gemma4_t4.step {step}") for step in RUN_STEPS):
            return
        try:
            answer = MotoWorld(aws=self.moto).run_local_command(
                {"command": command, "environment": held.inputs.get("environment") or {}})
        except Exception as err:
            self.failed = True
            self.log.append(f"{held.name}: failed: {err}")
            raise UpFailed(f"{held.name} failed") from err
        held.state = {**held.state, "stdout": answer["stdout"], "stderr": answer["stderr"]}
        self.log.append(f"{held.name}: {answer['stderr']}")

    def _delete(self, held: Held, why: str) -> None:
        sagemaker, physical = self.moto.client("sagemaker"), held.state.get("name")
        if held.type == MODEL:
            sagemaker.delete_model(ModelName=physical)
        elif held.type == CONFIG:
            sagemaker.delete_endpoint_config(EndpointConfigName=physical)
        elif held.type == ENDPOINT:
            # The provider takes an endpoint already gone as deleted (endpoint.go, resourceEndpointDelete).
            if physical in {e["EndpointName"] for e in sagemaker.list_endpoints()["Endpoints"]}:
                sagemaker.delete_endpoint(EndpointName=physical)
        elif held.type == LOG_GROUP:
            self.moto.client("logs").delete_log_group(logGroupName=physical)
        self.log.append(f"deleted {held.name} ({physical}): {why}")
        self.check(f"deleted {held.name} ({why})")

    @staticmethod
    def _ordered(resources: list[Held]) -> list[Held]:
        rank = {typ: i for i, typ in enumerate(DELETE_ORDER)}
        return sorted(resources, key=lambda held: rank.get(held.type, -1))


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _same(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return _canonical(old) == _canonical(new)


def _replaces(typ: str, old: dict[str, Any], new: dict[str, Any]) -> bool:
    if typ not in FORCE_NEW:
        return False
    keys = FORCE_NEW[typ]
    differ = {k for k in old.keys() | new.keys() if _canonical(old.get(k)) != _canonical(new.get(k))}
    return bool(differ - {"tags"}) if keys is None else bool(differ & set(keys))
