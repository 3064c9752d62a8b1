"""What `plan` prints beside a plan's resources and outputs: its cost while running, its cost guards, its memory
plan, the model revision vLLM downloads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import catalog
from .cost import CostEstimate

if TYPE_CHECKING:
    from .plan import Plan


def cost_range(plan: Plan) -> list[float] | None:
    """[fewest, most] $/h: an autoscaled endpoint's range (cost_per_hour_usd_max), else one price twice
    (the same figures `gemma4-t4 cost` shows: CostEstimate.from_outputs)."""
    return CostEstimate.from_outputs(plan.stack, plan.outputs).running_usd_per_hour_range


def cost_line(plan: Plan, *, spot: bool) -> str | None:
    """The running cost in one line; SPOT: the server is on Spot capacity (its cloud's Cloud.is_spot)."""
    span = cost_range(plan)
    if span is None:
        if "cost_per_hour_usd" in plan.outputs:  # the stack says it, and the catalog has no price: unknown, not $0
            return ("estimated cost while running: unknown (the catalog lacks a list price here; "
                    f"`gemma4-t4 cost {plan.stack}`, with the same --config, shows which)")
        return None
    low, high = span
    shown = f"${low:.4f}/h" if low == high else f"${low:.4f}/h to ${high:.4f}/h, fewest to most instances"
    prices = "catalog Spot list prices" if spot else "catalog list prices"
    return f"estimated cost while running: {shown} ({prices}; the bill is the truth)"


def guard_lines(plan: Plan) -> list[str]:
    """The stack's cost guards (its `cost_guards` output): each with its value, or off with what that can cost
    per day; none for a stack without the output."""
    guards = plan.outputs.get("cost_guards") or []
    if not guards:
        return []
    lines = ["cost guards (what stops a forgotten stack's bill):"]
    for guard in guards:
        if guard["on"]:
            lines.append(f"  {guard['key']} {guard['value']}: {guard['effect']}")
            continue
        per_day = guard.get("off_usd_per_day")
        cost = f"${per_day:,.2f}/day" if per_day is not None else "an unknown amount per day (no catalog price)"
        lines.append(f"  {guard['key']} OFF: {guard['effect']}; can bill {cost}")
    return lines


def memory_line(plan: Plan) -> str | None:
    """The stack's memory plan in vLLM's own terms (the `memory_plan` output), or None."""
    m = plan.outputs.get("memory_plan")
    if not m:
        return None
    size = m.get("tensor_parallel_size", 1)
    where = m["gpu"] if size == 1 else f"each of {size} {m['gpu']}s"
    return (f"memory plan ({where}): {m['gpu_memory_utilization']} x {m['gpu_total_gib']} GiB = {m['budget_gib']} "
            f"GiB for vLLM - weights {m['weights_gib']} GiB - overheads {m['overhead_gib']} GiB = KV cache "
            f"{m['kv_cache_gib']} GiB: {m['kv_cache_tokens']:,} tokens, {m['max_concurrency']}x "
            f"{m['max_model_len']:,}-token requests at once")


def revision_line(plan: Plan) -> str | None:
    """Which revision of the model vLLM downloads (the `model_revision` output); None when nothing is downloaded
    (a checkpoint directory on the server) or the stack has no such output."""
    revision = plan.outputs.get("model_revision")
    if revision is None:
        return None
    if not revision and plan.outputs.get("served_model_name") == catalog.DEFAULT_MODEL:
        return (f"model revision: the Hub's main of the default model {catalog.DEFAULT_MODEL} (no source the catalog "
                "cites gives a commit for it; set modelRevision to a commit to pin it)")
    if not revision:
        return "model revision: not pinned: the Hub's main may change under the stack; set modelRevision to a commit"
    if catalog.HUB_COMMIT.fullmatch(revision):
        return f"model revision: {revision} (a Hub commit)"
    return f"model revision: {revision} (a branch or tag, which can move; set modelRevision to a commit to pin it)"
