"""What `pulumi up` does to what is deployed when the stack goes from one plan to another (`plan --config`'s
account of a change): each resource created, deleted, updated in place or replaced, and what forces it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .plan import Plan


@dataclass(frozen=True)
class Change:
    """What `pulumi up` does to one resource when the stack goes from one plan to another."""

    label: str  # TYPE::NAME
    action: str  # "create", "delete", "update in place", "replace", or "change" (a type the cloud says nothing of)
    keys: tuple[str, ...]  # the inputs that differ; for a replacement, those that force it
    note: str = ""  # what a replacement costs, as the cloud says it

    def line(self) -> str:
        keys = f" ({', '.join(self.keys)})" if self.keys else ""
        return f"{self.label}: {self.action}{keys}" + (f": {self.note}" if self.note else "")


def changes(before: Plan, after: Plan, replaced_by: Mapping[str, tuple[tuple[str, ...], str]]) -> list[Change]:
    """Each resource AFTER creates, deletes, updates or replaces against BEFORE, by URN. REPLACED_BY: the inputs a
    type's provider replaces it for, with what that costs ({type: (keys, note)}); a resource's own
    replaceOnChanges counts too."""
    olds = {r.urn: r for r in before.resources}
    news = {r.urn: r for r in after.resources}
    found: list[Change] = [Change(r.label, "delete", ()) for urn, r in olds.items() if urn not in news]
    for urn, new in news.items():
        old = olds.get(urn)
        if old is None:
            found.append(Change(new.label, "create", ()))
            continue
        differ = sorted(k for k in old.inputs.keys() | new.inputs.keys() if _canonical(old.inputs.get(k))
                        != _canonical(new.inputs.get(k)))
        if not differ:
            continue
        keys, note = replaced_by.get(new.type, ((), ""))
        keys = (*keys, *(new.options.get("replaceOnChanges") or ()))
        forcing = tuple(k for k in keys if k.split(".", 1)[0] in differ and _at(old.inputs, k) != _at(new.inputs, k))
        in_place = "update in place" if new.type in replaced_by else "change"
        found.append(Change(new.label, "replace", forcing, note) if forcing else Change(new.label, in_place,
                                                                                       tuple(differ)))
    return found


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _at(inputs: Mapping[str, Any], dotted: str) -> str:
    """The canonical value at DOTTED (a key, or KEY.KEY... into mappings) of INPUTS; absent is null."""
    value: Any = inputs
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return _canonical(value)

