"""What both serving components share: the contract's outputs (gemma4_t4.contract), the memory plan's
type, the package's type tokens, and the boundary where a refused setting becomes Pulumi's clean error.

No `from __future__ import annotations` here or in the component modules: Pulumi's analyzer reads
the annotations of the Args and the outputs as types to make the package schema.
"""

import inspect
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypedDict

import pulumi

from gemma4_t4 import catalog
from gemma4_t4.contract import OUTPUTS
from gemma4_t4.errors import PROJECT, ConfigError, FrontEnd, PythonArgs

from . import provider_answers as answers
from .config import DType

# The package's type tokens: `gemma4-t4:index:<ClassName>`, the form Pulumi's component analyzer requires.
MODULE = "index"


def type_token(component: type) -> str:
    return f"{PROJECT}:{MODULE}:{component.__name__}"


def with_alias(opts: pulumi.ResourceOptions | None, old_type: str) -> pulumi.ResourceOptions:
    """OPTS plus an alias to the type a component had before 0.3.0, so a stack deployed with it keeps
    every resource (its children follow the parent's alias)."""
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=old_type)]))


class InvalidArgs(ConfigError, pulumi.RunError):
    """A refused setting: a RunError, so Pulumi reports the message without a traceback."""

    @classmethod
    def of(cls, error: ConfigError, front_end: FrontEnd) -> "InvalidArgs":
        refused = cls.__new__(cls)
        ConfigError.__init__(refused, error.setting, error.problem, error.fix_parts, front_end)
        return refused


@contextmanager
def refusals(args_type: str) -> Iterator[None]:
    """Inside: a ConfigError leaves as InvalidArgs, in the words of a Python program building ARGS_TYPE."""
    try:
        yield
    except ConfigError as error:
        raise InvalidArgs.of(error, PythonArgs(args_type)) from None


class InvalidOutput(pulumi.RunError):
    """A refused setting whose value is an Output, found when its value is known (at preview, or in the `up`): the
    same refusal as InvalidArgs (its key, problem and fix, in REFUSAL), raised from inside an apply. Not a
    ValueError, as InvalidArgs is: Pulumi wraps a ValueError in "While processing input ..." text at every resource
    that reads the Output, and reports any other RunError as its message alone."""

    def __init__(self, refusal: ConfigError) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal
        self.key, self.problem, self.fix = refusal.key, refusal.problem, refusal.fix


class NotAProviderAnswer(pulumi.RunError):
    """A value no provider or local command ever answers (a missing computed output, a clock that is no time):
    the program runs under Pulumi mocks that answer otherwise. One message, naming the mocks that answer as the
    providers do; a RunError, so Pulumi reports it without a traceback."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}: {answers.USE_PROVIDER_MOCKS}")


def answered(output: pulumi.Output[Any], what: str) -> pulumi.Output[Any]:
    """OUTPUT, a computed output its provider always sets (WHAT names it); refused when it is empty."""

    def check(value: Any) -> Any:
        if value is None or value == "":
            raise NotAProviderAnswer(f"{what} has no value, which its provider always sets")
        return value

    return output.apply(check)


def provider_for(package: str, opts: pulumi.ResourceOptions | None) -> pulumi.ProviderResource | None:
    """The provider the component's PACKAGE resources will use: opts.provider, opts.providers, or the
    parent's; None for the default provider. For the invokes a component makes before it registers."""
    if opts is None:
        return None
    if opts.provider is not None and opts.provider.package == package:
        return opts.provider
    providers = opts.providers
    if isinstance(providers, Mapping):
        found = providers.get(package)
    else:
        found = next((p for p in providers or [] if p.package == package), None)
    if found is not None:
        return found
    return opts.parent.get_provider(f"{package}::") if opts.parent is not None else None


class ServingArgs(TypedDict, total=False):
    """How vLLM serves the model, and the names and labels of what is made: what both components take."""

    name_prefix: str
    """The start of the physical names that must stay the same from one `pulumi up` to the next (GCE: the VM and
    the data disk, PREFIX-vm and PREFIX-data, cut to GCE's 63 characters; SageMaker with keepImages: the image
    repository gemma4-t4/PREFIX). Default: STACK-NAME, so two components of one stack, or one component in
    two stacks, never share one. Keep it stable: the retained data disk is found again by this name."""
    labels: dict[str, str]
    """Extra labels (GCE) or tags (AWS) on every resource, besides app=gemma4-t4."""
    model: str
    """Hugging Face model id vLLM serves (or an absolute path of a checkpoint already on the server)."""
    served_model_name: str
    """The model name requests must use (empty: the model id)."""
    dtype: DType
    """vLLM --dtype; a T4 has no bfloat16, so float16 (or float32)."""
    max_model_len: int
    """vLLM --max-model-len: the longest request in tokens."""
    gpu_memory_utilization: float
    """vLLM --gpu-memory-utilization: share of the GPU it claims."""
    max_num_seqs: int
    """vLLM --max-num-seqs: requests served at once."""
    language_model_only: bool
    """vLLM --language-model-only: skip vision and audio towers."""
    model_revision: str
    """vLLM --revision: the model's Hugging Face Hub revision, a commit (40 hex digits; pins it) or a branch or tag
    name (which can move). Empty: the catalog's commit for the model where it knows one, else none, and the Hub's
    main at each download may change under the stack (preview warns)."""
    tensor_parallel_size: int
    """vLLM --tensor-parallel-size: the T4s the model is split over (1, 2 or 4); sets the VM's T4s and shape
    (GCE) or the instance type (SageMaker)."""
    allow_model_overflow: bool
    """Opt-in: deploy although the memory plan says the model cannot start on the GPU."""
    allow_unsized_model: bool
    """Opt-in: deploy a model that cannot be sized (unknown to the catalog, and the Hub not asked or not
    answering): nothing checks that it fits."""
    size_from_hub: bool
    """Size a model the catalog does not know from the Hugging Face Hub at preview (its config.json and
    parameter counts; a network call, cached on this machine). Off by default, so a program's unit tests under
    Pulumi's mocks never reach the network; the gemma4-t4 stack program turns it on."""
    hf_token: pulumi.Input[str]
    """Hugging Face token for a gated or private model, as a secret. Kept in a secret of the stack, never in the VM's
    metadata or the model's environment: on GCE in Secret Manager, read by the VM's own service account when vLLM
    downloads; on SageMaker in Secrets Manager, read by the image at start."""


class MemoryPlan(TypedDict):
    """What vLLM will find on each GPU at start-up, as it logs it: weights, overheads, KV cache."""

    model: str
    """The model id (as the catalog or the Hub spells it)."""
    gpu: str
    """The GPU the plan is for (Tesla T4)."""
    gpu_memory_utilization: float
    """vLLM's --gpu-memory-utilization."""
    weights_source: str
    """Where the weights' size comes from: the catalog's measurement, or the Hub's parameter counts."""
    max_model_len: int
    """vLLM's --max-model-len: the longest request in tokens."""
    context_length: int
    """The model's own context (max_position_embeddings)."""
    tensor_parallel_size: int
    """The GPUs the model is split over; the plan is one GPU's."""
    gpu_total_gib: float
    """The GPU's memory as CUDA reports it, GiB."""
    budget_gib: float
    """What vLLM may claim: total x gpuMemoryUtilization, GiB."""
    weights_gib: float
    """One GPU's share of the loaded weights, GiB ("Model loading took")."""
    model_weights_gib: float
    """The whole model's loaded weights, GiB."""
    overhead_gib: float
    """vLLM's activations, CUDA graphs and context, GiB."""
    kv_cache_gib: float
    """What is left for the KV cache ("Available KV cache memory"), GiB."""
    bytes_per_request: int
    """KV cache one request of maxModelLen tokens holds, bytes."""
    kv_cache_tokens: int
    """"GPU KV cache size" in tokens."""
    max_concurrency: float
    """"Maximum concurrency" for maxModelLen-token requests."""


class CostGuard(TypedDict):
    """One of the guards that stop a forgotten stack's bill, as this stack has it."""

    key: str
    """The setting (idleStopMinutes, maxRunHours, endpointTtl)."""
    value: str
    """Its value; "off" when the stack turned it off."""
    on: bool
    """Whether it guards this stack."""
    effect: str
    """What it does; off: what then keeps billing."""
    off_usd_per_day: float | None
    """Off: what the stack can bill per day that this guard would have stopped (the catalog's hourly list price,
    at the most instances, x 24); absent when on, or where the catalog has no price."""


def cost_guard(key: str, value: str | None, effect: str, off_effect: str, usd_per_hour: float | None) -> CostGuard:
    """The guard KEY: on with VALUE (and EFFECT), or off (VALUE None) with OFF_EFFECT and its cost per day."""
    if value is not None:
        return {"key": key, "value": value, "on": True, "effect": effect, "off_usd_per_day": None}
    per_day = None if usd_per_hour is None else round(usd_per_hour * catalog.HOURS_PER_DAY, 2)
    return {"key": key, "value": "off", "on": False, "effect": off_effect, "off_usd_per_day": per_day}


def warn_guards_off(guards: list[CostGuard], resource: pulumi.Resource) -> None:
    """One warning per guard that is off, with what that can cost per day (`pulumi preview` and `up` show it)."""
    for guard in guards:
        if guard["on"]:
            continue
        per_day = guard["off_usd_per_day"]
        cost = (f"up to ${per_day:,.2f}/day (catalog list price x {catalog.HOURS_PER_DAY} h)" if per_day is not None
                else "an unknown amount per day (the catalog has no price here)")
        pulumi.log.warn(f"cost guard {guard['key']} is off: {guard['effect']}; that can bill {cost}",
                        resource=resource)


class T4ServingComponent(pulumi.ComponentResource):
    """A Gemma 4 server on a Tesla T4. Subclasses check everything inside ``refusals`` before
    registering anything, build the cloud's resources, set their own outputs, then call
    ``_register_contract`` once, as the last statement of their constructor."""

    cloud: pulumi.Output[str]
    """gce or sagemaker: which of the two targets below this is."""
    port: pulumi.Output[int]
    """The TCP port vLLM's OpenAI server listens on (GCE: on the VM's loopback, which the tunnel forwards to
    the same local port; SageMaker: the container's, behind /invocations)."""
    served_model_name: pulumi.Output[str]
    """The model id requests must name."""
    target: pulumi.Output[dict[str, str]]
    """How the operator tools reach the server: {instance, zone, project} on GCE, {endpoint_name, region}
    (and profile) on SageMaker."""
    connect_command: pulumi.Output[str]
    """The shell command a person runs to reach it (GCE: a tunnel that returns to the prompt; SageMaker: one
    invocation)."""
    cost_per_hour_usd: pulumi.Output[float | None]
    """Catalog list price of what bills while it serves (an autoscaled endpoint: at its fewest instances);
    absent where the catalog has no price."""
    billing_after_destroy_usd_per_month: pulumi.Output[float | None]
    """What keeps billing after `pulumi destroy` (the retained data disk, or kept images); absent: no price."""

    def _register_contract(self, **values: Any) -> None:
        """Set the contract's outputs from VALUES, then register every output the class declares."""
        if set(values) != set(OUTPUTS):
            missing, unknown = sorted(set(OUTPUTS) - set(values)), sorted(set(values) - set(OUTPUTS))
            raise TypeError(f"{type(self).__name__} must register exactly the contract's outputs; "
                            f"missing {missing}, unknown {unknown}")
        for name, value in values.items():
            setattr(self, name, pulumi.Output.from_input(value))
        self.register_outputs({name: getattr(self, name) for name in output_names(type(self))})


def output_names(component: type) -> list[str]:
    """The outputs a component class declares (its `name: pulumi.Output[...]` annotations), base first."""
    names: list[str] = []
    for cls in reversed(component.__mro__):
        if cls in (object, pulumi.Resource, pulumi.ComponentResource):
            continue
        names += [name for name in inspect.get_annotations(cls) if not name.startswith("_") and name not in names]
    return names
