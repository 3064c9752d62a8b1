"""The stand-in cloud's registry entry: its component by import path, its settings, its target, its one
preflight check and its cost; what it cannot do, each with why."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gemma4_t4.checks import Check
from gemma4_t4.clouds.base import Cloud, Feature, Place
from gemma4_t4.core.capacity import RegionRow, RegionsReport
from gemma4_t4.core.cost import CostEstimate
from gemma4_t4.core.plan import Plan
from gemma4_t4.core.preflight import Needs
from gemma4_t4.core.targets import HttpTarget, Target

from .settings import LoopbackSettings

PLACE = "loopback"


@dataclass
class LoopbackTarget(HttpTarget):
    cloud: str = field(default="loopback", init=False)


def loopback_check() -> Check:
    """The one check: this machine has a loopback interface a server can listen on."""
    try:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
    except OSError as err:
        return Check("loopback interface", False, f"cannot listen on 127.0.0.1: {err}", "bring up lo")
    return Check("loopback interface", True, "127.0.0.1 takes a listener")


class Loopback(Cloud):
    name = "loopback"
    component = "third_cloud.component:LoopbackServer"
    settings = LoopbackSettings
    stack = "loopback-t4"
    preset: ClassVar[Mapping[str, Any]] = {"gemma4-t4:cloud": "loopback"}
    unsupported: ClassVar[Mapping[Feature, str]] = {
        Feature.STOP_START: "a loopback server is stopped where it runs, not through its stack",
        Feature.BOOT_WATCH: "a loopback server has no cloud API that watches its boot",
        Feature.NAMED_ENDPOINT: "a loopback server is reached through its stack or its URL",
        Feature.SPOT: "a server on this machine has no Spot capacity to sell",
    }

    def name_prefix(self, project: str, stack: str) -> str:
        return stack

    def target(self, stack: str, outputs: Mapping[str, Any], endpoint_url: str | None = None) -> Target:
        return LoopbackTarget(outputs["target"]["url"], label=f"loopback:{stack}")

    def needs(self, plan: Plan, config: Mapping[str, Any]) -> Needs[None]:
        return Needs(self.name, PLACE, None)  # nothing of its own to ask for

    def preflight(self, stack: str, config: Mapping[str, Any], needs: Needs[None], place: Place) -> list[Check]:
        return [loopback_check()]

    def regions(self, stack: str, config: Mapping[str, Any], needs: Needs[None], place: Place) -> RegionsReport:
        check = loopback_check()
        row = RegionRow(PLACE, check.ok, check.detail)
        return RegionsReport(self.name, "a loopback interface", [row], row if check.ok else None)

    def cost(self, plan: Plan, estimate: CostEstimate) -> None:
        estimate.notes.append("a server on this machine: no cloud bill")


LOOPBACK = Loopback()
