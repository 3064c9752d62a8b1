"""Reads the stack's config into typed objects; every key's default lives in Pulumi.yaml.

Under `pulumi up` the CLI fills in Pulumi.yaml's defaults; under `gemma4_t4 plan` the same
defaults are merged in by the plan, so no default is spelled in code.
"""

from __future__ import annotations

import json
from typing import Any, Callable, TypeVar

import pulumi

from .errors import PROJECT, ConfigError
from .serving import ServingConfig

T = TypeVar("T")


class StackConfig:
    """Typed access to `gemma4-t4:*` keys; a missing or mistyped key names itself."""

    def __init__(self, config: pulumi.Config | None = None):
        self._config = config or pulumi.Config(PROJECT)

    def _get(self, key: str, parse: Callable[[str], T], kind: str) -> T:
        raw = self._config.get(key)
        if raw is None:
            raise ConfigError(key, "is not set (Pulumi.yaml gives every key a default: is this the project's "
                              "Pulumi.yaml?)", f"pulumi config set {PROJECT}:{key} VALUE")
        try:
            return parse(raw)
        except (ValueError, TypeError) as err:
            raise ConfigError(key, f"{raw!r} is not a valid {kind} ({err})",
                              f"pulumi config set {PROJECT}:{key} <{kind}>") from None

    def str(self, key: str) -> str:
        return self._get(key, str, "string")

    def int(self, key: str) -> int:
        return self._get(key, _parse_int, "integer")

    def float(self, key: str) -> float:
        return self._get(key, float, "number")

    def bool(self, key: str) -> bool:
        return self._get(key, _parse_bool, "boolean")

    def object(self, key: str) -> dict[str, Any]:
        value = self._get(key, json.loads, "JSON object")
        if not isinstance(value, dict):
            raise ConfigError(key, f"must be an object, got {value!r}", f"pulumi config set --path {PROJECT}:{key}.NAME VALUE")
        return value

    def serving(self) -> ServingConfig:
        model = self.str("model")
        return ServingConfig(
            model=model,
            served_model_name=self.str("servedModelName") or model,
            dtype=self.str("dtype"),
            max_model_len=self.int("maxModelLen"),
            gpu_memory_utilization=self.float("gpuMemoryUtilization"),
            max_num_seqs=self.int("maxNumSeqs"),
            language_model_only=self.bool("languageModelOnly"),
            host=self.str("host"),
            port=self.int("port"),
            allow_non_loopback_host=self.bool("allowNonLoopbackHost"),
            allow_model_overflow=self.bool("allowModelOverflow"),
        )


def _parse_int(raw: str) -> int:
    value = float(raw)
    if value != int(value):
        raise ValueError("not a whole number")
    return int(value)


def _parse_bool(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError("expected true or false")


def gce_settings(cfg: StackConfig):
    from .gce import GceT4Settings  # imported here: pulumi_gcp is only needed by the GCE stack

    return GceT4Settings(
        zone=cfg.str("zone"),
        machine_type=cfg.str("machineType"),
        gpu_type=cfg.str("gpuType"),
        gpu_count=cfg.int("gpuCount"),
        on_host_maintenance=cfg.str("onHostMaintenance"),
        boot_disk_size_gb=cfg.int("bootDiskSizeGb"),
        boot_disk_type=cfg.str("bootDiskType"),
        data_disk_size_gb=cfg.int("dataDiskSizeGb"),
        data_disk_type=cfg.str("dataDiskType"),
        retain_data_disk=cfg.bool("retainDataDisk"),
        swap_size_gb=cfg.int("swapSizeGb"),
        allow_non_t4_gpu=cfg.bool("allowNonT4Gpu"),
    )
