"""What a cloud is to this project: one object that says how the stack program builds its component,
how the operator tools reach what it deployed, and what preflight, cost and stop/start mean there.

The program, the core's front ends (CLI, MCP server) and the offline plan dispatch through the
registry (gemma4_t4.clouds); nothing else branches on a cloud's name. The component itself is named
by import path, so the operator commands never import the cloud providers' SDKs.
"""

from __future__ import annotations

import difflib
import enum
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..checks import Check
from ..components.config import ServingSettings
from ..core.capacity import RegionsReport
from ..core.cost import CostEstimate
from ..core.deploy import Attempt
from ..core.failures import Failure
from ..core.lifecycle import Machine, NotStoppable
from ..core.mock_answers import Invoke, StateStandIn
from ..core.offers import Offer
from ..core.plan import Plan
from ..core.preflight import Needs
from ..core.targets import Target, TargetError
from ..errors import ConfigError, Set, Unset, UsageError


def refuse_unknown_provider_keys(config: Mapping[str, Any], namespace: str, known: Collection[str],
                                 provider: str) -> None:
    """A typo in a provider's key (aws:regoin, gcp:projet) is ignored by the provider, which leaves everything
    where its defaults put it: refused, with the key it most likely means."""
    for key in config:
        found, _, name = key.partition(":")
        if found != namespace or name in known:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {namespace}:{close[0]}?" if close else ""
        raise ConfigError(key, f"is not a setting of the {provider} provider, which would ignore it{hint}",
                          (Unset(key), " && ", Set(f"{namespace}:{close[0]}")) if close else Unset(key))


@dataclass(frozen=True)
class Secret:
    """A value the stack program must pass as a Pulumi secret (a credential from the stack config)."""

    value: str


class Feature(enum.Enum):
    """What an operator command may ask of a cloud. A cloud declares what it cannot do, each with the reason
    the user reads (SkyPilot's CloudImplementationFeatures, and each cloud's {feature: reason} of what it lacks);
    the front ends ask the cloud instead of testing its classes."""

    STOP_START = "stop and start the server, keeping its disks"
    BOOT_WATCH = "watch the server's first boot through the cloud's API"
    BLOCKING_QUERY = "answer a query in one reply however long it takes (no stream)"
    NAMED_ENDPOINT = "reach a server by its endpoint's name and region (--endpoint NAME --region REGION)"
    ZONE_FAILOVER = "pick the cheapest zone with quota, and move to the next when the cloud has no capacity"
    SPOT = "sell Spot capacity (cheaper, and the cloud may take it back): `zones` prints its Spot price"
    REGION_CHOICE = ("compare only the regions --regions names (a cloud asked region by region; one whose few calls "
                     "cover every region has nothing to choose)")


@dataclass(frozen=True)
class Placement:
    """Where `up` puts a stack: the config it sets (a new stack's zone), what it saw, and the live report the
    failover reads (None: the cloud does not fail over)."""

    config: Mapping[str, str]
    lines: list[str]
    report: RegionsReport | None = None


@dataclass(frozen=True)
class Move:
    """After a failed `up`: the zone to try next ("" with STOP: no move cures it, and why), and what was done."""

    zone: str
    lines: list[str]
    stop: str = ""


@dataclass
class Place:
    """Where a stack's preflight asks: its project (GCE) and the regions to compare (--all-regions)."""

    project: str | None = None
    regions: Sequence[str] = field(default_factory=tuple)


class Cloud(ABC):
    """One cloud: its component, its settings, and what each operator command does there."""

    name: ClassVar[str]  # the stack config's `cloud` value, and the contract's `cloud` output
    component: ClassVar[str]  # "module:Class" of the Pulumi component
    settings: ClassVar[type[ServingSettings]]
    stack: ClassVar[str]  # the stack this project ships for the cloud (Pulumi.<stack>.yaml)
    preset: ClassVar[Mapping[str, Any]]  # that stack file's config: what differs from Pulumi.yaml's defaults
    # Settings the stack program takes from the provider's own stack config, e.g. region <- aws:region.
    provider_keys: ClassVar[Mapping[str, str]] = {}
    # Instead of this cloud's settings that other clouds have, for a refusal's reason.
    counterparts: ClassVar[Mapping[str, str]] = {}
    # Under `gemma4-t4 zones`' table: what its offers' prices cover and where they come from.
    offers_note: ClassVar[str] = ""
    # What names one of its VMs without a stack, in order, each with its option's help: the first is the VM's own
    # name (`stop --instance NAME --zone ZONE --project PROJECT`; the MCP tools' inputs of the same names).
    vm_names: ClassVar[Mapping[str, str]] = {}
    # What this cloud cannot do, each with the reason a refusal gives (everything else it can).
    unsupported: ClassVar[Mapping[Feature, str]] = {}
    # {resource type: (the inputs its provider replaces it for, what a replacement costs)}, for `plan --config`'s
    # account of a change (core.changes.changes); a resource's own replaceOnChanges counts without it.
    replaced_by: ClassVar[Mapping[str, tuple[tuple[str, ...], str]]] = {}

    def supports(self, feature: Feature) -> bool:
        return feature not in self.unsupported

    # --- the stack program ---------------------------------------------------------------------

    @abstractmethod
    def name_prefix(self, project: str, stack: str) -> str:
        """The physical-name prefix the stack program gives its component (the names its stacks have)."""

    def provider_args(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Args the stack program adds from the provider's stack config (region, credentials); a Secret
        where the value is a credential."""
        return {}

    # --- the offline plan ------------------------------------------------------------------------

    def mock_invokes(self, world: Any) -> dict[str, Invoke]:
        """The provider functions the component calls, answered as the provider would from WORLD (this
        cloud's entry of the plan's world: what already exists)."""
        return {}

    def is_spot(self, plan: Plan) -> bool:
        """Whether the plan's server runs on Spot capacity (its cost is at the Spot list prices)."""
        return False

    def user_data(self, plan: Plan) -> str | None:
        """The user-data (cloud-init) the plan's server boots with; None where the cloud ships none."""
        return None

    def mock_states(self) -> dict[str, StateStandIn]:
        """What the cloud's providers answer to a create (their computed outputs), by the provider's package
        (the resource type's part before ':'): core.mock_answers.mock_state's stand-ins."""
        return {}

    # --- what a deployed stack is ------------------------------------------------------------------

    @abstractmethod
    def target(self, stack: str, outputs: Mapping[str, Any], endpoint_url: str | None = None) -> Target:
        """How the operator tools reach the server the stack's outputs (gemma4_t4.contract) describe
        (ENDPOINT_URL: a local stand-in for the cloud's serving API, for the tests)."""

    def vm(self, stack: str, outputs: Mapping[str, Any], api_endpoint: str | None = None) -> Machine:
        """The VM `stop` and `start` act on (API_ENDPOINT: a local stand-in for the cloud's API, for the tests); a
        cloud without Feature.STOP_START refuses with its reason."""
        raise NotStoppable(f"stack {stack}: {self.not_stoppable}")

    def named_vm(self, names: Mapping[str, str], api_endpoint: str | None = None) -> Machine:
        """The VM its own names (vm_names: e.g. --instance, --zone, --project) identify, without a stack."""
        raise NotStoppable(f"{self.name}: {self.not_stoppable}")

    @property
    def not_stoppable(self) -> str:
        return self.unsupported.get(Feature.STOP_START, "it has no VM to stop or start")

    def endpoint_target(self, endpoint: str, region: str, endpoint_url: str | None = None) -> Target:
        """The server --endpoint ENDPOINT --region REGION names (Feature.NAMED_ENDPOINT)."""
        raise UsageError(f"{self.name}: {self.unsupported.get(Feature.NAMED_ENDPOINT, 'no named endpoints')}")

    def explain(self, err: BaseException) -> Failure | None:
        """ERR, when the cloud's client library raised it, in one line with the fix; None: not its client's."""
        return None

    def watch(self, target: Target, compute_endpoint: str | None = None) -> None:
        """Give TARGET what watches its server's boot through the cloud's API (Feature.BOOT_WATCH; COMPUTE_ENDPOINT:
        a stand-in for that API, for the tests); a cloud without it leaves the target as it is."""
        return None

    # --- before `pulumi up` ----------------------------------------------------------------------

    @abstractmethod
    def needs(self, plan: Plan, config: Mapping[str, Any]) -> Needs[Any]:
        """What the stack's plan would create, as far as quotas and capacity go (its `own` part: this cloud's type)."""

    @abstractmethod
    def preflight(self, stack: str, config: Mapping[str, Any], needs: Needs[Any], place: Place) -> list[Check]:
        """The live cloud's quotas and offerings for NEEDS, each with its fix."""

    @abstractmethod
    def regions(self, stack: str, config: Mapping[str, Any], needs: Needs[Any], place: Place) -> RegionsReport:
        """The same for every region, and the lines that move the stack to the first that works."""

    def offers(self) -> list[Offer]:
        """Where the cloud sells the server's accelerator, at catalog list prices (`gemma4-t4 zones`)."""
        return []

    @abstractmethod
    def cost(self, plan: Plan, estimate: CostEstimate) -> None:
        """Fill in what bills beyond the contract's outputs: a stopped state's bill, the disks, notes."""

    # --- `gemma4-t4 up` and `down` -----------------------------------------------------------------

    def user_config(self, config: Mapping[str, Any]) -> dict[str, str]:
        """The provider's keys CONFIG lacks, from the user's own cloud CLI configuration (gcloud's project, AWS's
        region), for a stack `up` makes."""
        return {}

    def place(self, config: Mapping[str, Any], needs: Needs[Any], choose: bool, endpoint: str | None) -> Placement:
        """Where the stack goes (Feature.ZONE_FAILOVER; CHOOSE: a new stack whose zone nobody named)."""
        return Placement({}, [])

    def spot_offer(self, config: Mapping[str, Any]) -> str:
        """Spot's price where the stack goes and what a preemption does ("" where the cloud has no Spot)."""
        return ""

    def recover(self, attempt: Attempt, config: Mapping[str, Any], placement: Placement, tried: list[str],
                endpoint: str | None) -> Move | None:
        """After an `up` that failed: the move that may cure it (Feature.ZONE_FAILOVER), None for none."""
        return None

    def after_down(self, outputs: Mapping[str, Any], delete_data: bool, endpoint: str | None) -> list[str]:
        """What still bills after `down` (from the stack's outputs before it), deleted with DELETE_DATA."""
        usd = outputs.get("billing_after_destroy_usd_per_month")
        if not usd:
            return ["nothing of the stack is left billing"]
        kept = f"still billing: ${usd:,.2f}/month at list price (the stack's billing_after_destroy_usd_per_month)"
        return [kept] if not delete_data else [kept, f"--delete-data deletes nothing on {self.name}: what it kept "
                                               "was asked for in the stack's config (keepImages)"]


def outputs_cloud(stack: str, outputs: Mapping[str, Any], known: Mapping[str, Cloud]) -> Cloud:
    """The cloud a deployed stack's outputs name."""
    if not isinstance(outputs.get("target"), dict):
        raise TargetError(f"stack {stack} has no `target` output: was it deployed with this version of gemma4-t4?")
    name = str(outputs.get("cloud"))
    if name not in known:
        raise TargetError(f"stack {stack} has cloud {name!r}: expected {' or '.join(known)}")
    return known[name]

