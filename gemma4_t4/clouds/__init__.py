"""The cloud seam: every cloud this project deploys to is one registered object, each in its own folder
(clouds/NAME/cloud.py, beside its target, preflight, capacity, lifecycle and stand-ins). The stack program,
the offline plan and the operator's front ends (CLI, MCP server) ask the registry, and a cloud's
capabilities (base.Feature), never its classes. The registry itself is clouds/registry.py (REGISTRY: register,
unregister); this module registers the shipped clouds and is the facade the front ends call. A third cloud:
docs/new-cloud.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..checks import Check
from ..core import plan as offline
from ..core.capacity import RegionsReport
from ..core.cost import CostEstimate, CostItem
from ..core.lifecycle import Machine, NotStoppable
from ..core.mock_answers import Invoke, StateStandIn
from ..core.offers import Offer, cheapest_first
from ..core.ops import INSTEAD_OF_A_STACK, stack_outputs
from ..core.preflight import Needs
from ..core.stack_files import apply_override, find_project, load_stack_config
from ..core.targets import HttpTarget, Target, server_url
from ..errors import PROJECT, UsageError
from .base import Cloud, Feature, Move, Place, Placement, outputs_cloud
from .gce import GCE
from .gce.failover import MOVES as FAILOVER_MOVES
from .registry import REGISTRY, Registry
from .sagemaker import SAGEMAKER
from .stack_config import DEFAULT_CLOUD, all_keys, config_keys, stack_defaults

# The registered clouds by name: a read-only view of the registry's (clouds/registry.py), always current.
CLOUDS: Mapping[str, Cloud] = REGISTRY.clouds
register = REGISTRY.register
unregister = REGISTRY.unregister
explain = REGISTRY.explain


# The shipped clouds: one line each (or a program's own `register(...)`; docs/new-cloud.md).
register(GCE)
register(SAGEMAKER)


def lacks(cloud: str, feature: Feature) -> bool:
    """Whether the cloud named CLOUD (a target's `cloud`) declares it cannot do FEATURE; a bare URL's ("")
    declares nothing."""
    return cloud in CLOUDS and not CLOUDS[cloud].supports(feature)


def t4_offers(cloud: str | None = None) -> list[Offer]:
    """Every offer of CLOUD (every cloud's when None), cheapest first; those without a price last."""
    return cheapest_first(offer for each in CLOUDS.values() if cloud in (None, each.name) for offer in each.offers())


def standins() -> dict[str, StateStandIn]:
    """Every cloud's answers to a create, by provider package (the offline plan's mock_state)."""
    return {package: standin for cloud in CLOUDS.values() for package, standin in cloud.mock_states().items()}


def cloud_of_stack(stack: str) -> Cloud | None:
    """The cloud whose shipped stack this is (gce-t4, sagemaker-t4), if any."""
    return next((cloud for cloud in CLOUDS.values() if cloud.stack == stack), None)


# --- the stack's config, from a project or from the package -------------------------------------


def stack_config(stack: str, overrides: Sequence[str] = (), project_dir: Path | None = None) -> dict[str, Any]:
    """{fully-qualified key: value} for STACK, as `pulumi up` would see it: from the gemma4-t4 project at or
    above PROJECT_DIR (default: the working directory), else, for the stacks this project ships, from
    the installed package (Pulumi.yaml's defaults and the stack file's preset), so the plan needs no
    checkout."""
    try:
        return load_stack_config(stack, overrides, find_project(project_dir))
    except FileNotFoundError:
        if project_dir is not None or (shipped := cloud_of_stack(stack)) is None:
            raise
    config: dict[str, Any] = {f"{PROJECT}:{key}": value for key, value in stack_defaults(CLOUDS).items()}
    config.update(shipped.preset)
    for override in overrides:
        apply_override(config, override)
    return config


# --- the offline plan -----------------------------------------------------------------------------


def offline_plan(stack: str, config: dict[str, Any], world: Mapping[str, Any] | None = None,
                 plan: offline.Plan | None = None) -> offline.Plan:
    """The stack program under mocks with CONFIG; WORLD: what already exists, per cloud name (each
    cloud's own World; default: nothing, a first `pulumi up`)."""
    invokes: dict[str, Invoke] = {}
    for cloud in CLOUDS.values():
        invokes.update(cloud.mock_invokes((world or {}).get(cloud.name)))
    return offline.run_program(stack, config, plan, invokes, standins=standins())


def plan_stack(stack: str, overrides: Sequence[str] = (), project_dir: Path | None = None,
               world: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], offline.Plan]:
    """(the stack's config, its offline plan)."""
    config = stack_config(stack, overrides, project_dir)
    return config, offline_plan(stack, config, world)


def plan_cloud(plan: offline.Plan) -> Cloud:
    return CLOUDS[plan.outputs["cloud"]]


# --- a deployed stack -------------------------------------------------------------------------------


def target_from_outputs(stack: str, outputs: Mapping[str, Any], endpoint_url: str | None = None) -> Target:
    """The target a deployed stack describes through the contract's outputs (gemma4_t4.contract)."""
    return outputs_cloud(stack, outputs, CLOUDS).target(stack, outputs, endpoint_url=endpoint_url)


def stack_target(stack: str, outputs: Mapping[str, Any], endpoint_url: str | None = None,
                 compute_endpoint: str | None = None) -> Target:
    """The target of a deployed stack with these outputs; where its cloud can (Feature.BOOT_WATCH), its
    server's boot is watched through the cloud's API."""
    cloud = outputs_cloud(stack, outputs, CLOUDS)
    target = cloud.target(stack, outputs, endpoint_url=endpoint_url)
    if cloud.supports(Feature.BOOT_WATCH):
        cloud.watch(target, compute_endpoint)
    return target


def endpoint_cloud() -> Cloud:
    """The cloud whose servers --endpoint NAME --region REGION names (Feature.NAMED_ENDPOINT)."""
    found = [cloud for cloud in CLOUDS.values() if cloud.supports(Feature.NAMED_ENDPOINT)]
    if len(found) != 1:
        raise UsageError(f"--endpoint names an endpoint of one cloud; these clouds have endpoints: "
                          f"{', '.join(c.name for c in found) or 'none'}: use --stack or --url")
    return found[0]


def resolve_target(url: str | None = None, stack: str | None = None, endpoint: str | None = None,
                   region: str | None = None, endpoint_url: str | None = None,
                   project_dir: Path | None = None, compute_endpoint: str | None = None,
                   instead: str = INSTEAD_OF_A_STACK) -> Target:
    """--url, --endpoint with --region, or --stack (read from `pulumi stack output`, run in
    ``project_dir`` or here). A GCE stack's own IAP tunnel opens, on a free local port, when it is
    first needed, and again whenever it is down; its VM is watched through the Compute API
    (``compute_endpoint``: a stand-in, for the tests). INSTEAD: what the caller takes instead of a stack,
    for the line that says the Pulumi CLI is missing (`logs` has no log at a URL)."""
    if sum(1 for where in (url, stack, endpoint) if where) > 1:
        raise UsageError("say where once: one of --url, --stack or --endpoint, not several")
    if region and not endpoint:
        raise UsageError("--region goes with --endpoint (a stack knows its own region)")
    if url:
        return HttpTarget(server_url(url))  # no key: it goes only to a stack's own server
    if endpoint:
        if not region:
            raise UsageError("--endpoint needs --region")
        return endpoint_cloud().endpoint_target(endpoint, region, endpoint_url=endpoint_url)
    if stack:
        return stack_target(stack, stack_outputs(stack, cwd=project_dir, instead=instead), endpoint_url,
                            compute_endpoint)
    raise UsageError("say where: --url URL, --stack STACK, or --endpoint NAME --region REGION")


def vm_from_stack(stack: str, project_dir: Path | None = None, outputs: Mapping[str, Any] | None = None,
                  api_endpoint: str | None = None) -> Machine:
    """The VM a deployed stack describes (OUTPUTS: already read); a cloud without one is refused
    (core.lifecycle.NotStoppable, with the cloud's reason)."""
    if outputs is None:
        outputs = stack_outputs(stack, cwd=project_dir, instead=" or ".join(map(vm_usage, vm_clouds())))
    return outputs_cloud(stack, outputs, CLOUDS).vm(stack, outputs, api_endpoint)


def vm_clouds() -> list[Cloud]:
    """The clouds whose VMs `stop` and `start` may name without a stack (Feature.STOP_START, with vm_names)."""
    return [cloud for cloud in CLOUDS.values() if cloud.supports(Feature.STOP_START) and cloud.vm_names]


def vm_names() -> dict[str, str]:
    """{name: its help} of every name that identifies a VM without a stack, over vm_clouds(), in their order: the
    CLI's `stop`/`start` options and the MCP tools' inputs."""
    names: dict[str, str] = {}
    for cloud in vm_clouds():
        for name, help_ in cloud.vm_names.items():
            names.setdefault(name, help_)
    return names


def vm_usage(cloud: Cloud) -> str:
    """How the command line names one of CLOUD's VMs: --instance NAME --zone ZONE --project PROJECT."""
    first, *rest = cloud.vm_names
    return " ".join([f"--{first} NAME", *(f"--{name} {name.upper()}" for name in rest)])


def named_vm(names: Mapping[str, str], api_endpoint: str | None = None) -> Machine:
    """The VM NAMES identify without a stack ({instance, zone, project}): the cloud whose vm_names they are."""
    for cloud in vm_clouds():
        if set(cloud.vm_names) == set(names):
            return cloud.named_vm(names, api_endpoint)
    raise NotStoppable(f"no cloud names a VM by {', '.join(sorted(names))}")


# --- before `pulumi up` -------------------------------------------------------------------------------


def needs(plan: offline.Plan, config: Mapping[str, Any]) -> Needs:
    return plan_cloud(plan).needs(plan, config)


def preflight(stack: str, config: Mapping[str, Any], plan: offline.Plan, place: Place | None = None) -> list[Check]:
    cloud = plan_cloud(plan)
    return cloud.preflight(stack, config, cloud.needs(plan, config), place or Place())


def regions(stack: str, config: Mapping[str, Any], plan: offline.Plan, place: Place | None = None) -> RegionsReport:
    cloud = plan_cloud(plan)
    return cloud.regions(stack, config, cloud.needs(plan, config), place or Place())


def extra_costs(plan: offline.Plan) -> list[CostItem]:
    """The stack's costs beside its serving hours (each build, storage while up), as `cost` lists them."""
    result = CostEstimate.from_outputs(plan.stack, plan.outputs)
    if "cloud" in plan.outputs:
        plan_cloud(plan).cost(plan, result)
    return result.extras


def estimate(stack: str, overrides: Sequence[str] = (), project_dir: Path | None = None) -> CostEstimate:
    """What the stack costs at catalog list prices; a refused config is a ConfigError, as for `plan`."""
    _, plan = plan_stack(stack, overrides, project_dir)
    result = CostEstimate.from_outputs(stack, plan.outputs)
    plan_cloud(plan).cost(plan, result)
    result.notes.append("catalog list prices (gemma4_t4/catalog): estimates for planning; the bill is the truth")
    return result


__all__ = [
    "CLOUDS",
    "DEFAULT_CLOUD",
    "FAILOVER_MOVES",
    "REGISTRY",
    "Cloud",
    "Feature",
    "Move",
    "Place",
    "Placement",
    "Registry",
    "all_keys",
    "cloud_of_stack",
    "config_keys",
    "estimate",
    "explain",
    "lacks",
    "named_vm",
    "needs",
    "offline_plan",
    "plan_stack",
    "preflight",
    "regions",
    "register",
    "resolve_target",
    "stack_config",
    "stack_target",
    "standins",
    "t4_offers",
    "target_from_outputs",
    "unregister",
    "vm_clouds",
    "vm_from_stack",
    "vm_names",
    "vm_usage",
]
