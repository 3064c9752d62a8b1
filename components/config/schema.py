"""The rules every component input follows: one pydantic model per component (its Settings), the
settings both share in a base. The single source of types, ranges, defaults and cross-checks.

A component's public Args (a TypedDict beside the component, documented field by field, which
Pulumi's analyzer turns into the package schema) are validated into its Settings; the stack
program validates its config into the same Settings first. Field names are snake_case; each
setting's name is the camelCase alias the schema and the stack config use (`maxModelLen`). Rules
that need several settings or a cloud fact (gemma4_t4.catalog) are validators that raise
ConfigError with the setting and the fix, as parts each front end renders in its own words.

A cloud's own Settings and rules live in its folder (GceT4ServerSettings: components/gce/settings.py).
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from gemma4_t4 import catalog
from gemma4_t4.errors import ConfigError, Set, Unset

# endpointTtl is counted from the endpoint's creation (SageMaker's CreationTime), the ~13 minutes of creating
# ([sagemaker-t4-article]) included; this minimum leaves a little time in service after a create of that length. A
# TTL shorter than the create passes during the `up` that made the endpoint, which then deletes it (ttl_passed).
MIN_TTL = timedelta(minutes=15)
# Past a year a TTL guards no cost (and the date it gives must stay a date).
MAX_TTL = timedelta(days=365)
# vLLM refuses to start when the GPU's free memory is below total x utilization, and the CUDA
# context always holds some: 1.0 never starts. [sagemaker-t4-article] started (and loaded weights) at 0.97.
MAX_GPU_MEMORY_UTILIZATION = 0.97
TTL_OFF = ("off", "", "0")
TTL_PATTERN = re.compile(r"(?:(?P<d>\d+)d)?(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?")
GCE_NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
GCE_NAME_MAX = 63
# The longest suffix a GCE name gets after the prefix ("-data").
GCE_NAME_SUFFIX_MAX = 5


class DType(StrEnum):
    """vLLM's --dtype. A T4 has no bfloat16: float16 (or float32)."""

    FLOAT16 = "float16"
    HALF = "half"
    BFLOAT16 = "bfloat16"
    FLOAT32 = "float32"
    AUTO = "auto"




def _flag(value: Any) -> Any:
    """true or false, as Pulumi's own boolean getter and `type: boolean` in Pulumi.yaml take them."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError("expected true or false")


def _json_object(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError:
            raise ValueError("expected an object of NAME: VALUE pairs") from None
    if isinstance(value, dict):
        for key, item in value.items():
            if item is None:
                # YAML `team:` or `team: null` is no value at all: json.dumps would send the text "null", and
                # a component caller's None reaches the provider as None, which GCE refuses at create.
                raise ConfigError(f"labels.{key}", "has no value (null): a label's value is text, possibly empty",
                                  Set(f"labels.{key}", "VALUE"))
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()}
    return value


def _repo_id(value: Any) -> Any:
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if isinstance(value, str) and value.startswith("/"):
        # A checkpoint directory already on the server (e.g. on the data disk): vLLM takes a path
        # as --model. The plan cannot read it, so it is unsized (allowUnsizedModel).
        if any(c.isspace() for c in value) or ".." in value.split("/"):
            raise ValueError("a model path must be absolute, without spaces or '..' (one vLLM argument)")
        return value
    if isinstance(value, str):
        try:
            validate_repo_id(value)
        except HFValidationError as err:
            raise ValueError(f"not a Hugging Face model id: {str(err).split(':')[0]}") from None
    return value


def _none_if_empty(value: Any) -> Any:
    """The stack config's "" for an optional setting left unset."""
    return None if isinstance(value, str) and not value.strip() else value


Flag = Annotated[bool, BeforeValidator(_flag)]
Labels = Annotated[dict[str, str], BeforeValidator(_json_object)]
ModelId = Annotated[str, BeforeValidator(_repo_id)]


def _served_name(value: Any) -> Any:
    """The name vLLM's OpenAI server answers to: one word (the guest passes it as one argument),
    short enough to stay a name."""
    if isinstance(value, str) and (len(value) > 128 or any(c.isspace() for c in value)):
        raise ValueError("must be one word of at most 128 characters, without spaces")
    if isinstance(value, str) and value.startswith("-"):
        # vLLM's parser would read it as the next flag and exit ("expected at least one argument").
        raise ValueError("must not start with '-': vLLM would take it for a flag and not start")
    return value


ServedName = Annotated[str, BeforeValidator(_served_name)]
# A Hub revision as vLLM's --revision takes it: a commit, or a branch or tag name (refs/pr/N included); one argument.
HUB_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,254}")


def _text_list(value: Any) -> Any:
    """A list as the stack config or a program gives it: a list, a JSON array (what `pulumi config set --path
    'KEY[0]' ...` stores), or words separated by commas or spaces ("" for none)."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                raise ValueError("expected a JSON array of text, or items separated by commas") from None
        else:
            return tuple(item for item in re.split(r"[,\s]+", text) if item)
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return tuple(item.strip() for item in value if item.strip())
    raise ValueError("expected a list of text (a JSON array, or items separated by commas)")


TextList = Annotated[tuple[str, ...], BeforeValidator(_text_list)]
# A value the component may take as a Pulumi Output (a secret, an id of another resource).
AnyInput = Any


class ServingSettings(BaseModel):
    """What both components take: the labels, the names, and how vLLM serves the model."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True,
                              arbitrary_types_allowed=True)

    name_prefix: str = ""
    labels: Labels = Field(default_factory=dict)
    model: ModelId = catalog.DEFAULT_MODEL
    served_model_name: ServedName = ""
    dtype: DType = DType.FLOAT16
    max_model_len: int = Field(16384, ge=1)
    gpu_memory_utilization: float = Field(0.9, gt=0, le=MAX_GPU_MEMORY_UTILIZATION, allow_inf_nan=False)
    max_num_seqs: int = Field(8, ge=1, le=catalog.vllm.MAX_NUM_SEQS)
    language_model_only: Flag = True
    model_revision: Annotated[str | None, BeforeValidator(_none_if_empty)] = None
    tensor_parallel_size: int = 1
    allow_model_overflow: Flag = False
    allow_unsized_model: Flag = False
    size_from_hub: Flag = False
    hf_token: AnyInput = None

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, dtype: DType) -> DType:
        return DType.FLOAT16 if dtype == DType.HALF else dtype

    @field_validator("name_prefix")
    @classmethod
    def _name_prefix(cls, prefix: str) -> str:
        """Physical names start with it (GCE: PREFIX-vm, PREFIX-data; both within GCE's 63 characters)."""
        longest = GCE_NAME_MAX - GCE_NAME_SUFFIX_MAX
        if prefix and not (GCE_NAME.fullmatch(prefix) and len(prefix) <= longest):
            raise ConfigError("namePrefix", f"{prefix!r} is not a name GCE takes: lowercase letters, digits and "
                              f"dashes, starting with a letter, at most {longest} characters",
                              Set("namePrefix", gce_name(prefix, longest) or "gemma4"))
        return prefix

    @field_validator("model_revision")
    @classmethod
    def _model_revision(cls, revision: str | None) -> str | None:
        if revision is None:
            return None
        if not HUB_REVISION.fullmatch(revision) or ".." in revision or revision.endswith(("/", ".")):
            raise ConfigError("modelRevision", f"{revision[:80]!r} is not a Hugging Face Hub revision (a 40-hex "
                              "commit, or a branch or tag name: letters, digits and . _ - /, one word)",
                              (Set("modelRevision", "COMMIT"), " (the model page's Files and versions > History "
                               "lists the commits), or ", Unset("modelRevision")))
        return revision

    @model_validator(mode="after")
    def _revision_of_a_hub_model(self) -> ServingSettings:
        if self.model_revision is not None and self.model.startswith("/"):
            raise ConfigError("modelRevision", f"{self.model_revision} is a Hub revision, and model {self.model} is a "
                              "directory on the server: vLLM downloads nothing for it",
                              (Unset("modelRevision"), " (or set model to the Hub id the checkpoint came from)"))
        return self

    @field_validator("tensor_parallel_size")
    @classmethod
    def _tensor_parallel_size(cls, size: int) -> int:
        if size not in catalog.TENSOR_PARALLEL_SIZES:
            raise ConfigError("tensorParallelSize", f"{size}: vLLM splits the model over 1, 2 or 4 T4s here (GCE's N1 "
                              "takes 1, 2 or 4 T4s; SageMaker's g4dn carries 1 or 4)", Set("tensorParallelSize", 2))
        return size


def _tensor_parallel_size(data: Any) -> int | None:
    """tensorParallelSize as given, before validation (None: not a size; its own check refuses it)."""
    raw = data.get("tensorParallelSize", data.get("tensor_parallel_size", 1)) if isinstance(data, dict) else 1
    try:
        number = float(str(raw).strip())  # "2" and "2.0" alike, as the field itself takes them
    except ValueError:
        return None
    size = int(number) if number.is_integer() else None
    return size if size in catalog.TENSOR_PARALLEL_SIZES else None


def _default_from_tensor_parallel(data: Any, key: str, name: str, pick: Any) -> Any:
    """Fill an empty ``key`` with ``pick(tensor parallel size)``: the shape that size needs."""
    if isinstance(data, dict) and not str(data.get(key, data.get(name, ""))).strip():
        size = _tensor_parallel_size(data)
        if size is not None:
            data = {k: v for k, v in data.items() if k != name}
            data[key] = pick(size)
    return data


def parse_ttl(raw: str) -> timedelta | None:
    """gemma4-t4:endpointTtl: how long the endpoint may stay up, counted from its creation: "8h", "90m",
    "1d12h"; "off" (or "" or "0", the older spellings) for none."""
    raw = raw.strip()
    if raw.lower() in TTL_OFF:
        return None
    fix = (Set("endpointTtl", "8h"), " (counted from the endpoint's creation; off for none)")
    match = TTL_PATTERN.fullmatch(raw)
    if not match or not any(match.groupdict().values()):
        try:
            datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError("endpointTtl", f"{raw!r} is not a duration like 8h, 90m or 1d12h", fix) from None
        raise ConfigError("endpointTtl", f"{raw!r} is a point in time; endpointTtl is a duration counted from "
                          "the endpoint's creation, whenever that is", fix)
    days, hours, minutes = (int(match.group(k) or 0) for k in "dhm")
    if days * 1440 + hours * 60 + minutes > MAX_TTL.days * 1440:
        raise ConfigError("endpointTtl", f"{raw} is more than {MAX_TTL.days} days: a TTL that far away guards no "
                          "cost", fix)
    ttl = timedelta(days=days, hours=hours, minutes=minutes)
    if ttl < MIN_TTL:
        raise ConfigError("endpointTtl", f"{raw} is less than {MIN_TTL.seconds // 60} min", fix)
    return ttl


def gce_name(text: str, longest: int = GCE_NAME_MAX) -> str:
    """TEXT made a GCE resource name: lowercase letters, digits and dashes, a letter first."""
    name = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-")
    if name and not name[:1].isalpha():
        name = f"g-{name}"
    return name[:longest].rstrip("-")


