"""The MCP server: one tool per operator command, each a thin call into gemma4_t4.core.

Typed inputs (JSON schema from the signatures), structured outputs (the core's own dataclasses and
report types), annotations for what changes state or is destructive, and `_meta` for what costs
money. A failure is a tool error carrying the CLI's own message. The core is synchronous: each
call runs in a worker thread, and its progress callbacks come back to the client as MCP progress
notifications (bench steps, wait ticks, the streamed answer of a query, VM state changes).
"""

# No `from __future__ import annotations`: the SDK reads each tool's signature as the tool's
# schema, and annotations that name local values (descriptions, the bench defaults) must be
# evaluated where they are written.
import functools
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field
from typing_extensions import TypedDict

from .. import __version__, catalog, clouds
from ..core import bench as core_bench
from ..core import charts, failures, fit, lifecycle, offers, ops, preflight
from ..core import cost as cost_core
from ..core.targets import Target, TargetError

T = TypeVar("T")

INSTRUCTIONS = """Gemma 4 on a Tesla T4 (GCE or SageMaker), deployed with Pulumi (`pulumi up` and
`pulumi destroy` stay with the user; no tool runs them). Before deploying: plan (offline), cost,
preflight (live quotas), fit (the Turing clamp). After: wait until healthy, then status, query, logs,
bench and bench_compare. A server is named by exactly one of url, stack (a deployed Pulumi stack,
e.g. gce-t4) or endpoint with region (SageMaker). stop/start pause a GCE VM's machine and GPU bills
while keeping its disks; a SageMaker endpoint cannot be stopped, only deleted."""

# _meta keys: does calling the tool start a bill? does it change anything outside this process?
COSTS_MONEY = "gemma4-t4/costs-money"
CHANGES_STATE = "gemma4-t4/changes-state"


def _meta(costs_money: bool = False, changes_state: bool = False) -> dict[str, Any]:
    return {COSTS_MONEY: costs_money, CHANGES_STATE: changes_state}


def _looks(open_world: bool) -> ToolAnnotations:
    """A tool that only reads (the offline plan reads nothing outside this machine)."""
    return ToolAnnotations(read_only_hint=True, open_world_hint=open_world)


def _acts(idempotent: bool, open_world: bool) -> ToolAnnotations:
    """A tool that changes something, never destructively (no tool here deletes anything)."""
    return ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=idempotent,
                           open_world_hint=open_world)


# --- typed inputs ------------------------------------------------------------------------------------

Stack = Annotated[str, Field(description="a stack of this project: gce-t4 or sagemaker-t4")]
Overrides = Annotated[list[str], Field(description="config overrides as `pulumi config set` takes them, "
                                                   "e.g. gemma4-t4:maxModelLen=8192 (labels.team=ml: --path)")]
Url = Annotated[str | None, Field(description="any OpenAI-compatible server, e.g. http://127.0.0.1:8000")]
StackName = Annotated[str | None, Field(description="a deployed stack, e.g. gce-t4 (reads `pulumi stack output`; "
                                                    "a GCE stack's own IAP tunnel is opened on a free local port, "
                                                    "and closed)")]
Endpoint = Annotated[str | None, Field(description="a SageMaker endpoint name (with region)")]
Region = Annotated[str | None, Field(description="the SageMaker endpoint's AWS region (only with endpoint)")]
Model = Annotated[str | None, Field(description="the model id to send (default: the one model the server serves)")]
Seconds = Annotated[float, Field(gt=0)]


class PreflightReport(TypedDict):
    stack: str
    ok: bool
    checks: list[preflight.Check]


class FitReport(TypedDict):
    ok: bool  # every vLLM checked fits sm_75 (and, with strict, spills nothing)
    reports: list[dict[str, Any]]  # turing_clamp fit's report per pinned vLLM


class LogLines(TypedDict):
    target: str
    lines: list[str]


class Written(TypedDict):
    comparison: dict[str, Any]  # core.bench.compare: rows with ratios B/A, identical answers
    charts: list[str]  # PNG files written, if plot_dir was given


# --- plumbing ------------------------------------------------------------------------------------------


async def _in_thread(fn: Callable[[], T]) -> T:
    """Run core code in a worker thread; its failures become tool errors with the CLI's messages."""
    try:
        return await anyio.to_thread.run_sync(fn)
    except Exception as err:  # the CLI's one boundary (core.failures): the same lines
        failure = failures.explain(err)
        if failure.bug:
            logging.getLogger(__name__).exception("tool failed")  # the server's stderr: the client's log
        raise ToolError(failure.message) from None


def _progress(ctx: Context, total: float | None = None) -> Callable[[float, str], None]:
    """A callback for the worker thread that sends an MCP progress notification."""

    def report(done: float, message: str) -> None:
        anyio.from_thread.run(functools.partial(ctx.report_progress, done, total, message))

    return report


class Server:
    """The tools, bound to where the project lives and (for the tests) to stand-in endpoints."""

    def __init__(self, project_dir: Path | None = None, sagemaker_endpoint_url: str | None = None,
                 compute_endpoint: str | None = None):
        self.project_dir = project_dir
        self.sagemaker_endpoint_url = sagemaker_endpoint_url
        self.compute_endpoint = compute_endpoint

    def _target(self, url: str | None, stack: str | None, endpoint: str | None, region: str | None) -> Target:
        return clouds.resolve_target(url=url, stack=stack, endpoint=endpoint, region=region,
                                     endpoint_url=self.sagemaker_endpoint_url, project_dir=self.project_dir,
                                     compute_endpoint=self.compute_endpoint)

    def _with_target(self, where: tuple[str | None, ...], use: Callable[[Target], T]) -> Callable[[], T]:
        def call() -> T:
            target = self._target(*where)
            try:
                return use(target)
            finally:
                target.close()

        return call

    def _vm(self, stack: str | None, instance: str | None, zone: str | None, project: str | None) -> lifecycle.Vm:
        if bool(stack) == bool(instance):
            raise TargetError("say which VM: --stack STACK, or --instance NAME --zone ZONE --project PROJECT")
        if stack:
            return clouds.vm_from_stack(stack, self.project_dir)
        if not (zone and project):
            raise TargetError("--instance needs --zone and --project")
        return lifecycle.Vm(project, zone, instance or "")

    def build(self) -> MCPServer:
        mcp: MCPServer = MCPServer("gemma4-t4", version=__version__, instructions=INSTRUCTIONS)
        server = self

        @mcp.tool(annotations=_looks(open_world=False), meta=_meta())
        async def plan(stack: Stack, config: Overrides | None = None) -> dict[str, Any]:
            """The stack's real Pulumi program, run offline under mocks: every resource with its inputs,
            the outputs and the cost per hour. A bad config is refused with the key and the fix."""

            def run() -> dict[str, Any]:
                return clouds.plan_stack(stack, config or [], server.project_dir)[1].as_json()

            return await _in_thread(run)

        @mcp.tool(annotations=_looks(open_world=False), meta=_meta())
        async def cost(stack: Stack, config: Overrides | None = None) -> cost_core.CostEstimate:
            """What the stack costs at catalog list prices: per hour serving, per month with its VM
            stopped (GCE: the disks), per month after `pulumi destroy`."""
            return await _in_thread(lambda: clouds.estimate(stack, config or [], server.project_dir))

        @mcp.tool(annotations=_looks(open_world=False), meta=_meta())
        async def zones(cloud: Annotated[Literal["gce", "sagemaker"] | None,
                                         Field(description="only this cloud (default: both)")] = None) -> offers.Offers:
            """Where a Tesla T4 can be had and its hourly list price, cheapest first, from the catalog (no cloud
            asked): each GCE zone selling T4s (n1-standard-2 + one T4, on demand and Spot; disks on top) and each
            SageMaker region with a recorded ml.g4dn.xlarge price. A null price is unknown, not free."""
            return offers.Offers(offers.t4_offers(cloud))

        @mcp.tool(name="preflight", annotations=_looks(open_world=True), meta=_meta())
        async def preflight_(stack: Stack, config: Overrides | None = None,
                             project: Annotated[str | None, Field(description="GCP project (default: gcp:project "
                                                                  "of the stack file)")] = None) -> PreflightReport:
            """Can `pulumi up` work in this account? The live quotas and GPU offerings the stack needs,
            each with the exact fix. Uses the cloud credentials of the user running this server."""

            def run() -> PreflightReport:
                config_, result = clouds.plan_stack(stack, config or [], server.project_dir)  # a bad config first
                checks = clouds.preflight(stack, config_, result, clouds.Place(project))
                return PreflightReport(stack=stack, ok=all(c.ok for c in checks), checks=checks)

            return await _in_thread(run)

        @mcp.tool(name="fit", annotations=_looks(open_world=False), meta=_meta())
        async def fit_(strict: Annotated[bool, Field(description="also fail on any register spill")] = False,
                       ) -> FitReport:
            """Compile every Gemma 4 attention kernel the Turing clamp launches for sm_75 (no GPU): shared
            memory, registers and spills against the T4's 64 KiB, on each pinned vLLM (minutes)."""
            reports = await _in_thread(lambda: fit.run(strict, server.project_dir))
            return FitReport(ok=all(fit.ok(r, strict) for r in reports), reports=reports)

        @mcp.tool(annotations=_looks(open_world=True), meta=_meta())
        async def status(url: Url = None, stack: StackName = None, endpoint: Endpoint = None,
                         region: Region = None) -> ops.Status:
            """Is the server serving, which model at what max length, and what the cloud says of it
            (VRAM on GCE, the endpoint status on SageMaker)."""
            return await _in_thread(server._with_target((url, stack, endpoint, region), ops.status))

        @mcp.tool(annotations=_looks(open_world=True), meta=_meta())
        async def wait(ctx: Context, url: Url = None, stack: StackName = None, endpoint: Endpoint = None,
                       region: Region = None, timeout_s: Seconds = ops.WAIT_TIMEOUT_S,
                       interval_s: Seconds = 15) -> ops.WaitResult:
            """Poll /health until healthy, reporting elapsed time, the GCE guest's boot phase and VRAM as
            progress; an error saying what was seen if the server dies or the time runs out (a new GCE VM's
            first boot takes ~20-36 min)."""
            report = _progress(ctx, timeout_s)

            def tick(elapsed: float, info: dict[str, Any]) -> None:
                report(elapsed, "waiting " + "  ".join(f"{k} {v}" for k, v in info.items()))

            result = await _in_thread(server._with_target(
                (url, stack, endpoint, region),
                lambda target: ops.wait(target, timeout_s=timeout_s, interval_s=interval_s, on_tick=tick)))
            if not result.healthy:
                raise ToolError(ops.wait_failure(result, timeout_s))
            return result

        @mcp.tool(annotations=_looks(open_world=True), meta=_meta())
        async def query(ctx: Context, prompt: Annotated[str, Field(description="the user message")],
                        url: Url = None, stack: StackName = None, endpoint: Endpoint = None, region: Region = None,
                        model: Model = None, max_tokens: Annotated[int, Field(ge=1)] = 256,
                        temperature: Annotated[float, Field(ge=0)] = 0.0) -> ops.Reply:
            """One chat completion, streamed: each piece of text arrives as a progress message as it is
            generated (progress = pieces so far, total = max_tokens); the result is the whole reply."""
            report = _progress(ctx, max_tokens)

            def ask(target: Target) -> ops.Reply:
                for count, piece in enumerate(ops.query_stream(target, prompt, model, max_tokens, temperature), 1):
                    if isinstance(piece, ops.Reply):
                        return piece
                    report(count, piece)
                raise TargetError("the stream ended without a reply")

            return await _in_thread(server._with_target((url, stack, endpoint, region), ask))

        @mcp.tool(annotations=_looks(open_world=True), meta=_meta())
        async def logs(url: Url = None, stack: StackName = None, endpoint: Endpoint = None, region: Region = None,
                       lines: Annotated[int, Field(ge=1, le=5000)] = 200) -> LogLines:
            """The last lines of the server's log: the vLLM unit's journal on the GCE VM, the endpoint's
            CloudWatch log on SageMaker (a plain URL has none)."""

            def read(target: Target) -> LogLines:
                return LogLines(target=target.label, lines=list(target.log_lines(follow=False, lines=lines)))

            return await _in_thread(server._with_target((url, stack, endpoint, region), read))

        defaults = core_bench.BenchPlan()

        @mcp.tool(annotations=_acts(idempotent=False, open_world=True), meta=_meta(changes_state=True))
        async def bench(ctx: Context, url: Url = None, stack: StackName = None, endpoint: Endpoint = None,
                        region: Region = None, model: Model = None,
                        short: Annotated[int, Field(ge=1)] = defaults.short,
                        long: Annotated[int, Field(ge=2)] = defaults.long,
                        repeats: Annotated[int, Field(ge=1)] = defaults.repeats,
                        concurrency: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=1)] | None = None,
                        load_tokens: Annotated[int, Field(ge=2)] = defaults.load_tokens,
                        load_repeats: Annotated[int, Field(ge=1)] = defaults.load_repeats,
                        questions: Annotated[int, Field(ge=0, le=40)] = defaults.questions,
                        price_per_hour: Annotated[float | None, Field(gt=0, description="USD/h, for $/Mtok")] = None,
                        instance_type: Annotated[str | None, Field(description="take the hourly price from the "
                                                                   "catalog: " + ", ".join(sorted(
                                                                       catalog.BENCH_INSTANCE_PRICES)))] = None,
                        out: Annotated[str | None, Field(description="also write the report (JSON) here")] = None,
                        plot_dir: Annotated[str | None, Field(description="write throughput.png and latency.png "
                                                                          "here")] = None,
                        ) -> core_bench.Report:
            """The reference T4 benchmark of one server (decode tok/s, load at each concurrency, 40 seeded
            questions, $/Mtok) with TTFT/ITL/E2E/TPOT p50/p90/p99 per concurrency from streamed responses,
            checked against the server's own /metrics. Puts real load on the server; progress per request."""
            if short >= long:
                raise ToolError(f"short ({short}) must be below long ({long}): decode is their difference")
            if instance_type and instance_type not in catalog.BENCH_INSTANCE_PRICES:
                raise ToolError(f"instance_type {instance_type!r}: the catalog prices "
                                f"{', '.join(sorted(catalog.BENCH_INSTANCE_PRICES))}; or give price_per_hour")
            plan_ = core_bench.BenchPlan(short=short, long=long, repeats=repeats,
                                         concurrency=tuple(concurrency or defaults.concurrency),
                                         load_tokens=load_tokens, load_repeats=load_repeats, questions=questions)
            price = catalog.BENCH_INSTANCE_PRICES[instance_type].usd_per_hour if instance_type else price_per_hour
            total = 2 * plan_.repeats + sum(c * plan_.load_repeats for c in plan_.concurrency) + plan_.questions
            report = _progress(ctx, total)
            done: dict[str, int] = {}

            def step(phase: str, count: int, phase_total: int) -> None:
                done[phase] = count
                report(sum(done.values()), f"{phase} {count}/{phase_total}")

            def run(target: Target) -> core_bench.Report:
                result = core_bench.Bench(target, ops.served_model(target, model), plan_, step).run(price)
                if out:
                    Path(out).write_text(json.dumps(result, indent=2))
                if plot_dir:
                    charts.plot_run(dict(result), Path(plot_dir))
                return result

            return await _in_thread(server._with_target((url, stack, endpoint, region), run))

        @mcp.tool(annotations=_acts(idempotent=True, open_world=False), meta=_meta(changes_state=True))
        async def bench_compare(a: Annotated[str, Field(description="the baseline run's report (bench out)")],
                                b: Annotated[str, Field(description="the run compared with it")],
                                plot_dir: Annotated[str | None, Field(description="write compare-throughput.png "
                                                                      "and compare-latency.png here")] = None,
                                ) -> Written:
            """Two bench reports side by side: each metric with the ratio B/A, latency percentiles per
            concurrency, and how many quality answers are byte-identical; optionally A/B charts."""

            def run() -> Written:
                reports = core_bench.load_report(a), core_bench.load_report(b)
                written = charts.plot_compare(*reports, Path(plot_dir)) if plot_dir else []
                return Written(comparison=core_bench.compare(*reports), charts=[str(p) for p in written])

            return await _in_thread(run)

        vm_where = "the VM: stack (a deployed GCE stack), or instance with zone and project"

        async def _lifecycle(ctx: Context, action: Callable[..., lifecycle.LifecycleResult], stack: str | None,
                             instance: str | None, zone: str | None, project: str | None,
                             timeout_s: float, interval_s: float) -> lifecycle.LifecycleResult:
            report = _progress(ctx, timeout_s)

            def run() -> lifecycle.LifecycleResult:
                vm = server._vm(stack, instance, zone, project)
                compute = lifecycle.Compute(server.compute_endpoint)
                return action(compute, vm, timeout_s=timeout_s, interval_s=interval_s,
                              on_tick=lambda elapsed, info: report(elapsed, " ".join(f"{v}" for v in info.values())))

            return await _in_thread(run)

        @mcp.tool(annotations=_acts(idempotent=True, open_world=True), meta=_meta(changes_state=True))
        async def stop(ctx: Context, stack: StackName = None,
                       instance: Annotated[str | None, Field(description=vm_where)] = None,
                       zone: str | None = None, project: str | None = None,
                       timeout_s: Seconds = 600, interval_s: Seconds = 5) -> lifecycle.LifecycleResult:
            """Stop a GCE stack's VM without destroying it and wait until it has stopped: the machine and
            GPU stop billing, both disks stay (and bill: listed). Needs the user's approval: serving stops.
            A SageMaker endpoint cannot be stopped, only deleted (`pulumi destroy`)."""
            return await _lifecycle(ctx, lifecycle.stop, stack, instance, zone, project, timeout_s, interval_s)

        @mcp.tool(annotations=_acts(idempotent=True, open_world=True), meta=_meta(costs_money=True, changes_state=True))
        async def start(ctx: Context, stack: StackName = None,
                        instance: Annotated[str | None, Field(description=vm_where)] = None,
                        zone: str | None = None, project: str | None = None,
                        timeout_s: Seconds = 600, interval_s: Seconds = 5) -> lifecycle.LifecycleResult:
            """Start a stopped GCE stack's VM and wait until it runs; the machine and GPU bill again
            (the price per hour is in the result). Needs the user's approval. The guest comes back by
            itself; then call wait until vLLM is healthy."""
            return await _lifecycle(ctx, lifecycle.start, stack, instance, zone, project, timeout_s, interval_s)

        return mcp


def serve(transport: Literal["stdio", "streamable-http"], port: int, **options: Any) -> None:
    mcp = Server(**options).build()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line on stderr per request
    if transport == "stdio":
        mcp.run("stdio")
    else:
        # Loopback only: the tools start and stop cloud resources with the user's credentials.
        mcp.run("streamable-http", host="127.0.0.1", port=port)
