"""The rules every component input follows: one pydantic model per component (its Settings), the
settings both share in a base. The single source of types, ranges, defaults and cross-checks.

A component's public Args (a TypedDict beside the component, documented field by field, which
Pulumi's analyzer turns into the package schema) are validated into its Settings; the stack
program validates its config into the same Settings first. Field names are snake_case; each
setting's name is the camelCase alias the schema and the stack config use (`maxModelLen`). Rules
that need several settings or a cloud fact (gemma4_t4.catalog) are validators that raise
ConfigError with the setting and the fix, as parts each front end renders in its own words.
"""

from __future__ import annotations

import ipaddress
import json
import re
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from gemma4_t4 import catalog
from gemma4_t4.errors import ConfigError, Set, Unset

MIN_BOOT_DISK_GB = 32  # the driver, kernel headers and apt cache (seed 000's boot disk)
MIN_IDLE_STOP_MINUTES = 5
# endpointTtl is counted from when the endpoint is in service, so it can never be already past when
# the schedule is made; this minimum leaves time to use the endpoint once it is up.
MIN_TTL = timedelta(minutes=15)
# Past a year a TTL guards no cost (and the date it gives must stay a date).
MAX_TTL = timedelta(days=365)
# vLLM refuses to start when the GPU's free memory is below total x utilization, and the CUDA
# context always holds some: 1.0 never starts. Seed 002 started (and loaded weights) at 0.97.
MAX_GPU_MEMORY_UTILIZATION = 0.97
TTL_OFF = ("off", "", "0")
TTL_PATTERN = re.compile(r"(?:(?P<d>\d+)d)?(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?")
UNPRIVILEGED_PORTS = 1024  # vLLM runs as an unprivileged user on the VM
# vLLM's API key, the one check on its /v1: 32 hex characters are 128 random bits (`openssl rand -hex 32` gives 64).
MIN_API_KEY_CHARS = 32
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


class OnHostMaintenance(StrEnum):
    """What GCE does to the VM during host maintenance; a VM with a GPU must terminate."""

    TERMINATE = "TERMINATE"
    MIGRATE = "MIGRATE"


class TerminationAction(StrEnum):
    """What GCE does when maxRunHours ends or a SPOT VM is preempted."""

    STOP = "STOP"
    DELETE = "DELETE"


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
    model: ModelId = "google/gemma-4-E2B-it-qat-w4a16-ct"
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
    """gemma4-t4:endpointTtl: how long the endpoint may stay up, counted from when it is in
    service: "8h", "90m", "1d12h"; "off" (or "" or "0", the older spellings) for none."""
    raw = raw.strip()
    if raw.lower() in TTL_OFF:
        return None
    fix = (Set("endpointTtl", "8h"), " (counted from when the endpoint is in service; off for none)")
    match = TTL_PATTERN.fullmatch(raw)
    if not match or not any(match.groupdict().values()):
        try:
            datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError("endpointTtl", f"{raw!r} is not a duration like 8h, 90m or 1d12h", fix) from None
        raise ConfigError("endpointTtl", f"{raw!r} is a point in time; endpointTtl is a duration counted from "
                          "when the endpoint is in service, so it can never be in the past", fix)
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


class GceT4ServerSettings(ServingSettings):
    """Everything GceT4Server is built from."""

    project: str = ""
    network: AnyInput = None
    subnetwork: AnyInput = None
    zone: str = "us-west2-b"
    machine_type: str = ""
    gpu_type: str = "nvidia-tesla-t4"
    allow_non_t4_gpu: Flag = False
    on_host_maintenance: OnHostMaintenance = OnHostMaintenance.TERMINATE
    boot_disk_size_gb: int = Field(32, ge=MIN_BOOT_DISK_GB, le=65536)
    boot_disk_type: str = "pd-ssd"
    data_disk_size_gb: int = Field(250, ge=10, le=65536)
    data_disk_type: str = "pd-balanced"
    retain_data_disk: Flag = True
    swap_size_gb: int = Field(16, ge=0, le=65536)
    max_run_hours: int = Field(catalog.DEFAULT_MAX_RUN_HOURS, ge=0, le=catalog.GCE_MAX_RUN_DURATION_HOURS)
    spot: Flag = False
    termination_action: Annotated[TerminationAction | None, BeforeValidator(_none_if_empty)] = None
    idle_stop_minutes: int = Field(catalog.DEFAULT_IDLE_STOP_MINUTES, ge=0)
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    allow_non_loopback_host: Flag = False
    api_key: AnyInput = None
    api_source_ranges: TextList = Field("", validate_default=True)
    external_ip: Flag = True
    cloud_nat: Flag = False
    operators: TextList = Field("", validate_default=True)
    vllm_version: str = catalog.PINS["vllm.gce"]

    @property
    def region(self) -> str:
        return catalog.region_of(self.zone)

    @property
    def gpu_count(self) -> int:
        """One GPU per tensor-parallel rank."""
        return self.tensor_parallel_size

    @model_validator(mode="before")
    @classmethod
    def _shape_for_the_gpus(cls, data: Any) -> Any:
        return _default_from_tensor_parallel(data, "machineType", "machine_type", catalog.n1_standard_for)

    @field_validator("vllm_version")
    @classmethod
    def _locked_vllm(cls, version: str) -> str:
        if version not in catalog.GCE_VLLM_VERSIONS:
            known = ", ".join(f"{v} ({why})" for v, why in catalog.GCE_VLLM_VERSIONS.items())
            raise ConfigError("vllmVersion", f"{version!r} has no lock and no fit results for the Turing clamp; the "
                              f"guest installs only a locked, clamp-verified vLLM: {known}",
                              Set("vllmVersion", catalog.PINS["vllm.gce"]))
        return version

    @field_validator("port")
    @classmethod
    def _unprivileged_port(cls, port: int) -> int:
        if port < UNPRIVILEGED_PORTS:
            raise ConfigError("port", f"{port} is a privileged port: vLLM runs as an unprivileged user and could not "
                              "bind it (the idle stop would then count no answer as busy)", Set("port", 8000))
        return port

    @model_validator(mode="after")
    def _gce_facts(self) -> GceT4ServerSettings:
        self._check_network()
        self._check_gpu_and_shape()
        for key, disk_type, size in (("bootDiskType", self.boot_disk_type, self.boot_disk_size_gb),
                                     ("dataDiskType", self.data_disk_type, self.data_disk_size_gb)):
            _check_n1_disk(key, disk_type, size)
        self._check_scheduling()
        self._check_listener()
        self._check_exposure()
        self._check_egress()
        _check_operators(self.operators)
        _check_gce_labels(self.labels)
        return self

    def _check_network(self) -> None:
        # The VM takes the subnetwork; the IAP SSH firewall rule goes on its network.
        if (self.network is None) != (self.subnetwork is None):
            given, missing = ("network", "subnetwork") if self.subnetwork is None else ("subnetwork", "network")
            raise ConfigError(missing, f"{given} is set without {missing}: an existing network comes with the "
                              f"subnetwork the VM joins, in the zone's region {self.region}",
                              (Set(missing), f" (or leave out {given} for a network of the component's own)"))
        # A subnetwork is regional (projects/P/regions/REGION/subnetworks/NAME, or its self link); one known now is
        # checked against the zone, one that is an Output only when GCE creates the VM.
        where = re.search(r"(?:^|/)regions/([^/]+)/subnetworks/", self.subnetwork) \
            if isinstance(self.subnetwork, str) else None
        if where is not None and where[1] != self.region:
            there = sorted(z for z in catalog.GCE_T4_ZONES if catalog.region_of(z) == where[1])
            raise ConfigError("subnetwork", f"{self.subnetwork} is in {where[1]}, and zone {self.zone} is in "
                              f"{self.region}: a VM joins only a subnetwork of its own region",
                              (Set("zone", there[0]), f" (a T4 zone of {where[1]}), or a subnetwork in {self.region}")
                              if there else f"a subnetwork in {self.region} ({where[1]} sells no T4s)")

    def _check_gpu_and_shape(self) -> None:
        t4 = self.gpu_type in catalog.GCE_ACCELERATORS
        if not t4 and not self.allow_non_t4_gpu:
            raise ConfigError("gpuType", f"{self.gpu_type!r} is not a Tesla T4, the GPU this project is built and "
                              "priced for", (Set("gpuType", "nvidia-tesla-t4"), ", or opt in with ",
                                             Set("allowNonT4Gpu", True)))
        if not t4 and self.dtype in ("bfloat16", "auto") and self.gpu_type in catalog.NO_BFLOAT16_GPUS:
            raise ConfigError("dtype", f"'{self.dtype}' needs bfloat16, which {self.gpu_type} (compute capability "
                              "below 8.0) does not have", Set("dtype", "float16"))
        if not t4 and self.gpu_type not in catalog.N1_ATTACHABLE_GPUS:
            family = catalog.GPU_MACHINE_FAMILY.get(self.gpu_type)
            why = f"it comes only on {family} machine types" if family else "it is not one of the GPUs N1 takes"
            raise ConfigError("gpuType", f"an N1 VM cannot attach {self.gpu_type}: {why} "
                              f"(N1 takes {', '.join(sorted(catalog.N1_ATTACHABLE_GPUS))})",
                              Set("gpuType", "nvidia-tesla-t4"))
        zone_region = self.zone.rsplit("-", 1)
        if len(zone_region) != 2 or len(zone_region[1]) != 1 or not zone_region[1].isalpha():
            raise ConfigError("zone", f"{self.zone!r} is not a GCE zone (REGION-LETTER, e.g. us-west2-b)",
                              Set("zone", "us-west2-b"))
        if t4 and self.zone not in catalog.GCE_T4_ZONES:
            same_region = sorted(z for z in catalog.GCE_T4_ZONES if catalog.region_of(z) == self.region)
            where = (f"in {self.region}: {', '.join(same_region)}" if same_region
                     else f"in no zone of {self.region}; e.g. us-west2-b, us-central1-a")
            raise ConfigError("zone", f"{self.zone} does not sell T4s (GCE would reject the VM after the data disk "
                              f"exists); T4s are sold {where}",
                              Set("zone", same_region[0] if same_region else "us-west2-b"))
        shape = catalog.N1_SHAPES.get(self.machine_type)
        if shape is None:
            family = self.machine_type.split("-")[0]
            if family in ("a2", "a3", "a4", "g2", "g4"):
                why = "comes with its own GPUs (A100, H100, L4...), not a T4"
            elif self.machine_type in ("f1-micro", "g1-small") or family == "e2":
                why = "is a shared-core or E2 type, which takes no GPU"
            elif family == "n1":
                why = "is not an N1 shape GCE offers"
            else:
                why = "cannot attach a GPU: only N1 machine types take a T4"
            raise ConfigError("machineType", f"{self.machine_type} {why}", Set("machineType", "n1-standard-2"))
        if t4 and self.gpu_count not in shape.t4_counts():
            counts = shape.t4_counts()
            pick = catalog.n1_standard_for(self.gpu_count)
            vcpus, memory = catalog.T4_VM_LIMITS[self.gpu_count]
            raise ConfigError(
                "machineType", f"{self.machine_type} takes {' or '.join(map(str, counts)) or 'no'} T4s, and "
                f"tensorParallelSize {self.tensor_parallel_size} needs {self.gpu_count} (GCE: a VM with "
                f"{self.gpu_count} T4{'s' * (self.gpu_count > 1)} has at most {vcpus} vCPUs and {memory} GB)",
                (Set("machineType", pick), " (or ", Unset("machineType"), ", which picks it)"))
        if self.on_host_maintenance != "TERMINATE":
            raise ConfigError("onHostMaintenance", f"'{self.on_host_maintenance}' is refused by GCE for a VM with a "
                              "GPU (\"Instances with guest accelerators do not support live migration\")",
                              Set("onHostMaintenance", "TERMINATE"))

    def _check_scheduling(self) -> None:
        if self.termination_action and not (self.spot or self.max_run_hours):
            raise ConfigError("terminationAction", f"{self.termination_action} applies only to a SPOT VM or one with "
                              "maxRunHours; GCE refuses a termination action on a standard VM without a run limit",
                              (Unset("terminationAction"), " (or ", Set("maxRunHours", 8), ")"))
        if 0 < self.idle_stop_minutes < MIN_IDLE_STOP_MINUTES:
            raise ConfigError("idleStopMinutes", f"{self.idle_stop_minutes} min would stop a VM between two requests",
                              (Set("idleStopMinutes", MIN_IDLE_STOP_MINUTES), " (or 0 for off)"))

    def _check_listener(self) -> None:
        # The IAP tunnel (connect_command) and the idle stop both reach vLLM at 127.0.0.1:PORT.
        try:
            address = ipaddress.ip_address(self.host)
        except ValueError:
            raise ConfigError("host", f"{self.host!r} is not an IP address (a name such as localhost may resolve "
                              "to ::1, which the tunnel and the idle stop do not reach)",
                              Set("host", "127.0.0.1")) from None
        if str(address) == "127.0.0.1":
            return
        if address.is_loopback:
            raise ConfigError("host", f"vLLM on {self.host} is not reached by the tunnel or the idle stop, which "
                              "use 127.0.0.1 (the idle stop counts no answer as busy: the VM would never stop)",
                              Set("host", "127.0.0.1"))
        if not self.allow_non_loopback_host:
            raise ConfigError(
                "host", f"vLLM would listen on {self.host}, reachable beyond the VM: the OpenAI API has no auth",
                ("keep 127.0.0.1 and use the IAP tunnel, or opt in with ", Set("allowNonLoopbackHost", True)))
        if str(address) != "0.0.0.0":
            raise ConfigError("host", f"vLLM on {self.host} only is not reached by the tunnel or the idle stop, which "
                              "use 127.0.0.1", (Set("host", "0.0.0.0"), " (with allowNonLoopbackHost)"))

    def _check_exposure(self) -> None:
        """vLLM beyond the VM's loopback: only with a key on its API and the address ranges the firewall admits to
        its port (the stack's deny-all rule keeps everything else out)."""
        _check_source_ranges("apiSourceRanges", self.api_source_ranges, self.port)
        if not self.allow_non_loopback_host:
            if self.api_source_ranges:
                raise ConfigError("apiSourceRanges", f"admits {', '.join(self.api_source_ranges)} to port {self.port}, "
                                  "where nothing listens: vLLM is on the VM's loopback without allowNonLoopbackHost",
                                  (Unset("apiSourceRanges"), " (the IAP tunnel reaches vLLM), or ",
                                   Set("allowNonLoopbackHost", True), " with ", Set("host", "0.0.0.0")))
            return
        if self.api_key is None or (isinstance(self.api_key, str) and not self.api_key.strip()):
            raise ConfigError("allowNonLoopbackHost", "true without apiKey: vLLM's OpenAI API would answer anyone who "
                              "reaches the port, with no authentication",
                              (Set("apiKey", "$(openssl rand -hex 32)", secret=True), " (clients send it as "
                               "Authorization: Bearer KEY; vLLM checks it on /v1 only), or ",
                               Unset("allowNonLoopbackHost"), " and use the IAP tunnel"))
        if isinstance(self.api_key, str) and (len(self.api_key) < MIN_API_KEY_CHARS
                                              or any(c.isspace() for c in self.api_key)):
            # The value is never shown: it is a credential.
            raise ConfigError("apiKey", f"is shorter than {MIN_API_KEY_CHARS} characters or holds whitespace (it is "
                              "one line of vLLM's environment file)",
                              Set("apiKey", "$(openssl rand -hex 32)", secret=True))
        if not self.api_source_ranges:
            raise ConfigError("allowNonLoopbackHost", f"true without apiSourceRanges: the firewall admits no one to "
                              f"port {self.port} (the stack denies every source but IAP's SSH), and vLLM's routes "
                              "beyond /v1 (/tokenize, /pause, /metrics...) answer without the key",
                              (Set("apiSourceRanges", "10.0.0.0/8"), " (the CIDRs that call vLLM, comma-separated)"))

    def _check_egress(self) -> None:
        if self.cloud_nat and self.external_ip:
            raise ConfigError("cloudNat", "true for a VM with an external IP: Cloud NAT serves only VMs without one, "
                              "so it would bill and carry nothing",
                              (Set("externalIp", False), " (or ", Unset("cloudNat"), ")"))


# IAM members a role can be granted to (cloud.google.com/iam/docs/principal-identifiers); allUsers and
# allAuthenticatedUsers are anyone.
IAM_MEMBER = re.compile(r"(user|group|serviceAccount):[^@\s:]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"
                        r"|domain:[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+"
                        r"|principal(Set)?://[!-~]+")
ANYONE = ("allUsers", "allAuthenticatedUsers")


def _check_operators(members: tuple[str, ...]) -> None:
    if len(set(members)) != len(members):
        twice = next(member for member in members if members.count(member) > 1)
        raise ConfigError("operators", f"{twice} is listed twice", Set("operators", ",".join(dict.fromkeys(members))))
    for member in members:
        if member in ANYONE:
            raise ConfigError("operators", f"{member} is anyone: it would let anyone open an IAP tunnel to the VM "
                              "and log in", Set("operators", "user:YOU@example.com"))
        if not IAM_MEMBER.fullmatch(member):
            raise ConfigError("operators", f"{member!r} is not an IAM member (user:EMAIL, group:EMAIL, "
                              "serviceAccount:EMAIL, domain:DOMAIN, principal://... or principalSet://...)",
                              Set("operators", f"user:{member}" if "@" in member and ":" not in member
                                  else "user:YOU@example.com"))


def _check_source_ranges(key: str, ranges: tuple[str, ...], port: int) -> None:
    """CIDRs a firewall rule takes as its sources: IPv4 (the VM has no IPv6 address, and one rule takes no mix),
    a network address, and never the whole internet (vLLM answers there beyond the key's /v1)."""
    for text in ranges:
        try:
            network = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise ConfigError(key, f"{text!r} is not an IPv4 CIDR range (ADDRESS/PREFIX)",
                              Set(key, "10.0.0.0/8")) from None
        if network.version != 4:
            raise ConfigError(key, f"{text} is IPv6: the VM has only an IPv4 address", Set(key, "10.0.0.0/8"))
        if network.network_address != ipaddress.ip_interface(text).ip:
            raise ConfigError(key, f"{text} has host bits set; the range it names is {network}", Set(key, str(network)))
        if network.prefixlen == 0:
            raise ConfigError(key, f"{text} is every address on the internet: vLLM's key covers /v1 only, and its "
                              f"other routes (/tokenize, /pause, /metrics...) would answer anyone on port {port}",
                              (Set(key, "CIDR"), " (the networks that call vLLM; or put a proxy that checks the "
                               "key on every route in front of it)"))


def _check_n1_disk(key: str, disk_type: str, size_gb: int) -> None:
    size_key = key.replace("Type", "SizeGb")
    limits = catalog.N1_DISK_TYPES.get(disk_type)
    if limits is None:
        why = ("exists, but an N1 VM cannot attach it" if disk_type in catalog.NOT_ON_N1_DISK_TYPES
               else "is not a persistent disk type")
        raise ConfigError(key, f"{disk_type!r} {why} (N1 takes {', '.join(sorted(catalog.N1_DISK_TYPES))})",
                          Set(key, "pd-balanced"))
    if not limits.min_gb <= size_gb <= limits.max_gb:
        raise ConfigError(size_key, f"{size_gb} GB is outside {disk_type}'s {limits.min_gb}-{limits.max_gb} GB",
                          Set(size_key, min(max(size_gb, limits.min_gb), limits.max_gb)))


def _gce_label(text: str, key: bool = False) -> str:
    """TEXT made to follow GCE's label rule, for a fix that works: lowercase letters, digits, _ and
    -, at most 63, a key starting with a letter."""
    cleaned = re.sub(r"[^a-z0-9_-]", "_", text.lower())[:63]
    if key and not cleaned[:1].isalpha():
        cleaned = f"l{cleaned}"[:63] if cleaned else "team"
    return cleaned


# The labels the GCE component sets itself: app on every resource, and the data disk's retainDataDisk as its
# last `up` saved it (components/gce.py RETAIN_LABEL).
GCE_OWN_LABELS = {"app": "app=gemma4-t4", "gemma4-t4-retain-data-disk": "gemma4-t4-retain-data-disk=true|false"}


def _check_gce_labels(labels: dict[str, str]) -> None:
    user_max = catalog.GCE_MAX_LABELS - len(GCE_OWN_LABELS)
    if len(labels) > user_max:
        raise ConfigError("labels", f"{len(labels)} labels, and GCE allows {catalog.GCE_MAX_LABELS} per resource "
                          f"including {' and '.join(GCE_OWN_LABELS.values())}",
                          (Unset("labels.NAME"), f" (keep {user_max})"))
    for name, value in labels.items():
        fix = Set(f"labels.{_gce_label(name, key=True)}", _gce_label(value) or "VALUE")
        if name in GCE_OWN_LABELS:
            raise ConfigError("labels", f"{name} is the project's own label ({GCE_OWN_LABELS[name]})",
                              "use another label name")
        if not catalog.GCE_LABEL_KEY.fullmatch(name):
            raise ConfigError(f"labels.{name}", f"label key {name!r} breaks GCE's rule: 1-63 lowercase letters, "
                              "digits, _ or -, starting with a letter", fix)
        if not catalog.GCE_LABEL_VALUE.fullmatch(value):
            raise ConfigError(f"labels.{name}", f"label value {value!r} breaks GCE's rule: 0-63 lowercase letters, "
                              "digits, _ or -", fix)
