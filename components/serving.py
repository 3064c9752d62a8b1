"""How vLLM serves the model: the values it is started with, and the check that it can start.

``check_serving`` sizes the model (catalog, else the Hugging Face Hub), refuses what vLLM or the
GPU would refuse, and plans the GPU's memory; both components call it before registering any
resource. ``ServingConfig`` is the single source of vLLM's settings: the GCE guest turns it into
command-line flags (``vllm_args``), the SageMaker container into ``SM_VLLM_*`` variables
(components/sagemaker/container.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from gemma4_t4 import catalog
from gemma4_t4.errors import ConfigError, FixPart, Set

from .config import ServingSettings
from .memory import GpuMemoryPlan, UnsizableConfig, attention_heads, longest_fitting_len, plan_memory
from .model_facts import ModelFacts, Unsized, model_facts


@dataclass(frozen=True)
class ServingConfig:
    model: str
    served_model_name: str
    dtype: str
    max_model_len: int
    gpu_memory_utilization: float
    max_num_seqs: int
    language_model_only: bool
    host: str = "127.0.0.1"
    port: int = 8000
    tensor_parallel_size: int = 1
    # The Hub revision vLLM downloads (--revision); None: the Hub's main at each download. vLLM takes the
    # tokenizer at the same revision when --tokenizer-revision is not given (vllm/config/model.py,
    # ModelConfig.__post_init__: "if self.tokenizer_revision is None: self.tokenizer_revision = self.revision",
    # 0.30.0 and 0.33.0).
    revision: str | None = None

    @property
    def from_hub(self) -> bool:
        """vLLM downloads the model from the Hub (not a checkpoint directory on the server)."""
        return not self.model.startswith("/")

    def vllm_args(self) -> list[str]:
        args = [
            "--model", self.model,
            "--served-model-name", self.served_model_name,
            "--host", self.host,
            "--port", str(self.port),
            "--dtype", self.dtype,
            "--max-model-len", str(self.max_model_len),
            "--gpu-memory-utilization", str(self.gpu_memory_utilization),
            "--max-num-seqs", str(self.max_num_seqs),
            "--tensor-parallel-size", str(self.tensor_parallel_size),
        ]
        if self.language_model_only:
            args.append("--language-model-only")
        if self.revision:
            args += ["--revision", self.revision]
        return args


@dataclass(frozen=True)
class ServingPlan:
    serving: ServingConfig
    facts: ModelFacts | None  # None: unsized, by the user's opt-in
    memory: GpuMemoryPlan | None  # None: unsized, or a GPU the catalog does not describe


UNSIZED_FIX: tuple[FixPart, ...] = (
    "check the model id and this machine's network (or `huggingface-cli login` for a gated model), or, knowing "
    "nothing checks that it fits, ", Set("allowUnsizedModel", True))
NOT_ASKED_FIX: tuple[FixPart, ...] = (
    Set("sizeFromHub", True), " (reads its config and parameter counts from the Hugging Face Hub at preview), or, "
    "knowing nothing checks that it fits, ", Set("allowUnsizedModel", True))
OVERFLOW_FIX: tuple[FixPart, ...] = ("or, knowing it will likely fail, ", Set("allowModelOverflow", True))


def check_serving(args: ServingSettings, gpu: catalog.Gpu | None, host: str = "127.0.0.1",
                  port: int = 8000) -> ServingPlan:
    """Refuse what cannot serve on ``gpu`` (None: a GPU the catalog does not describe, opted in)."""
    if gpu is not None and args.dtype in ("bfloat16", "auto") and not gpu.supports_bfloat16:
        # "auto" takes the checkpoint's dtype, which is bfloat16 for every Gemma 4 build.
        raise ConfigError("dtype", f"'{args.dtype}' needs bfloat16, which {gpu.name} (sm_{gpu.compute_capability[0]}"
                          f"{gpu.compute_capability[1]}) does not have", Set("dtype", "float16"))
    revision = model_revision(args)
    try:
        facts: ModelFacts | None = model_facts(args.model, ask_hub=args.size_from_hub, revision=revision)
    except Unsized as why:
        if not args.allow_unsized_model:
            raise ConfigError("model", f"{args.model} is not in the catalog and cannot be sized: {why}",
                              NOT_ASKED_FIX if why.hub_not_asked else UNSIZED_FIX) from None
        pulumi.log.warn(f"{args.model} is not sized ({why}): nothing checks that it fits (allowUnsizedModel)")
        facts = None
    model = facts.repo_id if facts else args.model
    if model != args.model:
        pulumi.log.info(f"gemma4-t4:model {args.model} is {model} on the Hub: serving it under that id")
    serving = ServingConfig(model, args.served_model_name or model, args.dtype, args.max_model_len,
                            args.gpu_memory_utilization, args.max_num_seqs, args.language_model_only, host, port,
                            args.tensor_parallel_size, revision)
    if facts is None:
        return ServingPlan(serving, None, None)
    _check_chat_fits(args, model, facts)
    _check_heads_split(model, facts, args.tensor_parallel_size, args.allow_unsized_model)
    if facts.quantization and args.dtype == "float32":
        method = facts.quantization.get("quant_method", "quantized")
        raise ConfigError("dtype", f"{model} is a {method} checkpoint, whose kernels run in float16: vLLM refuses "
                          "float32 for it", Set("dtype", "float16"))
    if gpu is None:
        return ServingPlan(serving, facts, None)
    try:
        memory = plan_memory(model, facts.config, facts.weights_bytes(args.dtype), facts.source, gpu, args.dtype,
                             args.gpu_memory_utilization, args.max_model_len, args.max_num_seqs,
                             args.tensor_parallel_size)
    except UnsizableConfig as why:
        if not args.allow_unsized_model:
            raise ConfigError("model", f"{model} cannot be sized: {why}", UNSIZED_FIX) from None
        pulumi.log.warn(f"{model} is not sized ({why}): nothing checks that it fits (allowUnsizedModel)")
        return ServingPlan(serving, facts, None)
    _check_memory(args, facts, memory)
    return ServingPlan(serving, facts, memory)


def model_revision(args: ServingSettings) -> str | None:
    """The Hub revision vLLM downloads: modelRevision, else the catalog's commit for the model, else none."""
    if args.model_revision is not None:
        return args.model_revision
    known = catalog.find_model(args.model)
    return known.revision if known else None


def revision_note(serving: ServingConfig) -> str | None:
    """One line when the model's revision is not pinned to a commit (None when it is, or nothing downloads)."""
    if not serving.from_hub:
        return None
    if serving.revision is None and serving.model == catalog.DEFAULT_MODEL:
        return None  # the user chose nothing: the plan says it once, as a fact (core.plan_lines.revision_line)
    if serving.revision is None:
        return (f"model revision not pinned: the Hub's main of {serving.model} may change under the stack; "
                "set modelRevision to a commit")
    if not catalog.HUB_COMMIT.fullmatch(serving.revision):
        return (f"modelRevision {serving.revision} is a branch or tag, which the model's owner can move; "
                "set modelRevision to a commit (40 hex digits) to pin it")
    return None


def warn_unpinned(serving: ServingConfig, resource: pulumi.Resource) -> None:
    """`pulumi preview` and `up` say when the model's revision can move under the stack."""
    if (note := revision_note(serving)) is not None:
        pulumi.log.warn(note, resource=resource)


def _check_chat_fits(args: ServingSettings, model: str, facts: ModelFacts) -> None:
    """vLLM accepts any max_model_len at start-up; one at or under what its chat template renders for the
    shortest request serves no chat request at all."""
    model_type = str(facts.config.get("model_type", ""))
    shortest = next((n for prefix, n in catalog.vllm.SHORTEST_CHAT_PROMPT_TOKENS.items()
                     if model_type.startswith(prefix)), None)
    if shortest is not None and args.max_model_len <= shortest:
        raise ConfigError("maxModelLen", f"{args.max_model_len:,} tokens: a one-line chat request through {model}'s "
                          f"chat template is already {shortest} prompt tokens, so vLLM would start and then refuse "
                          "every chat request", Set("maxModelLen", 16384))


def _splits(heads: set[tuple[int, int]], size: int) -> bool:
    try:
        for query_heads, kv_heads in heads:
            catalog.heads_per_rank(query_heads, kv_heads, size)
    except ValueError:
        return False
    return True


def _check_heads_split(model: str, facts: ModelFacts, size: int, allow_unsized: bool) -> None:
    """vLLM refuses a tensor parallel size that does not split the attention heads evenly."""
    if size == 1:
        return
    try:
        heads = attention_heads(facts.config)
    except UnsizableConfig as why:
        if allow_unsized:
            return
        raise ConfigError("model", f"{model} cannot be split over {size} GPUs: {why}", UNSIZED_FIX) from None
    if _splits(heads, size):
        return
    fits = [n for n in catalog.TENSOR_PARALLEL_SIZES if _splits(heads, n)]
    shown = ", ".join(f"{q} query / {kv} KV heads" for q, kv in sorted(heads))
    raise ConfigError("tensorParallelSize", f"{size}: {model}'s attention ({shown}) does not split evenly over {size} "
                      "GPUs, and vLLM refuses it", Set("tensorParallelSize", max(fits)))


def _fitting_size(args: ServingSettings, facts: ModelFacts, plan: GpuMemoryPlan) -> GpuMemoryPlan | None:
    """The plan at the smallest larger tensor parallel size at which a request fits, if any."""
    heads = attention_heads(facts.config)
    for size in catalog.TENSOR_PARALLEL_SIZES:
        if size <= plan.tensor_parallel_size or not _splits(heads, size):
            continue
        bigger = plan_memory(plan.model, facts.config, plan.model_weights_bytes, plan.weights_source,
                             catalog.TESLA_T4, args.dtype, args.gpu_memory_utilization, args.max_model_len,
                             args.max_num_seqs, size)
        if bigger.max_concurrency >= 1:
            return bigger
    return None


def _check_memory(args: ServingSettings, facts: ModelFacts, plan: GpuMemoryPlan) -> None:
    gib = catalog.GIB
    if args.max_model_len > plan.context_length:
        raise ConfigError("maxModelLen", f"{args.max_model_len:,} tokens exceeds {plan.model}'s context of "
                          f"{plan.context_length:,} (max_position_embeddings): vLLM refuses it",
                          Set("maxModelLen", min(16384, plan.context_length)))
    if plan.max_concurrency >= 1 or args.allow_model_overflow:
        return
    per_gpu = " per GPU" if plan.tensor_parallel_size > 1 else ""
    numbers = (f"{args.gpu_memory_utilization} x {plan.gpu_total_bytes / gib:.2f} GiB = {plan.budget_bytes / gib:.2f}"
               f" GiB for vLLM{per_gpu}; weights {plan.weights_bytes / gib:.2f} GiB + overheads "
               f"{plan.overhead_bytes / gib:.2f} GiB")
    bigger = _fitting_size(args, facts, plan) if plan.gpu == catalog.TESLA_T4.name else None
    split: tuple[FixPart, ...] = (
        Set("tensorParallelSize", bigger.tensor_parallel_size),
        f" (on {bigger.where}: weights {bigger.weights_bytes / gib:.2f} GiB, KV cache "
        f"{bigger.kv_cache_bytes / gib:.2f} GiB, {bigger.max_concurrency:.2f}x {args.max_model_len:,}-token "
        "requests), or ") if bigger else ()
    if plan.kv_cache_bytes <= 0:
        at_default = plan_memory(plan.model, facts.config, plan.model_weights_bytes, plan.weights_source,
                                 catalog.TESLA_T4, args.dtype, 0.9, args.max_model_len, args.max_num_seqs,
                                 plan.tensor_parallel_size)
        if args.gpu_memory_utilization < 0.9 and at_default.max_concurrency >= 1:
            raise ConfigError("gpuMemoryUtilization", f"{numbers} leave no room for the KV cache ({plan.gpu})",
                              Set("gpuMemoryUtilization", 0.9))
        where = "one" if plan.tensor_parallel_size == 1 else str(plan.tensor_parallel_size)
        raise ConfigError("model", f"{plan.model} cannot start on {where} {plan.gpu}{'s' * (where != 'one')}: "
                          f"{numbers} leave {plan.kv_cache_bytes / gib:.2f} GiB for the KV cache (vLLM loads the "
                          "weights, then runs out of memory)",
                          (*split, "pick a smaller Gemma 4 build (E2B or E4B), ", *OVERFLOW_FIX))
    fits = longest_fitting_len(plan, facts.config, args.dtype, args.max_num_seqs)
    need = plan.bytes_per_request / gib
    raise ConfigError("maxModelLen", f"not one {args.max_model_len:,}-token request fits: {numbers} leave "
                      f"{plan.kv_cache_bytes / gib:.2f} GiB of KV cache, and one request needs {need:.2f} GiB"
                      f"{per_gpu}", (*split, Set("maxModelLen", fits) if fits else "pick a smaller model", ", ",
                                     *OVERFLOW_FIX))
