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

    def optional_secret(self, key: str) -> pulumi.Output[str] | None:
        """A value that must be a Pulumi secret when set: refused if it sits in plain text."""
        if self._config.get(key) in (None, ""):
            return None
        if not pulumi.runtime.is_config_secret(f"{PROJECT}:{key}"):
            raise ConfigError(key, "is stored in plain text in the stack file",
                              f"pulumi config rm {PROJECT}:{key} && pulumi config set --secret {PROJECT}:{key} VALUE")
        return self._config.get_secret(key)

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
        max_run_hours=cfg.int("maxRunHours"),
        spot=cfg.bool("spot"),
        termination_action=cfg.str("terminationAction"),
        idle_stop_minutes=cfg.int("idleStopMinutes"),
    )


def sagemaker_settings(cfg: StackConfig):
    from .sagemaker import SageMakerT4Settings  # imported here: pulumi_aws is only needed by this stack

    region = pulumi.Config("aws").get("region")
    if not region:
        raise ConfigError("aws:region", "is not set", "pulumi config set aws:region us-east-2")
    return SageMakerT4Settings(
        region=region,
        instance_type=cfg.str("instanceType"),
        instance_count=cfg.int("instanceCount"),
        inference_ami_version=cfg.str("inferenceAmiVersion"),
        base_image=cfg.str("baseImage"),
        startup_health_check_timeout_s=cfg.int("startupHealthCheckTimeoutSeconds"),
        model_data_download_timeout_s=cfg.int("modelDataDownloadTimeoutSeconds"),
        keep_images=cfg.bool("keepImages"),
        allow_non_t4_instance=cfg.bool("allowNonT4Instance"),
        endpoint_ttl=cfg.str("endpointTtl"),
    )


def hf_token(cfg: StackConfig) -> pulumi.Output[str] | None:
    """The optional Hugging Face token (Gemma 4 is not gated, so usually none)."""
    return cfg.optional_secret("hfToken")
