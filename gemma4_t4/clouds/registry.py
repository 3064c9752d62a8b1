"""The registry: one object that owns the clouds this process knows, and everything a cloud adds when it
registers (the provider keys a refusal names, its client library's errors). The layers below ask it at call
time (errors.StackConfig reads its provider keys, core.failures takes its explainers), so `unregister` takes a
cloud back whole. It imports only the clouds' base, never a cloud's folder: each folder imports clouds.base, and
the facade (clouds/__init__.py) registers the shipped clouds."""

from __future__ import annotations

import keyword
from collections.abc import Mapping
from types import MappingProxyType

from ..core import failures
from ..errors import STACK_CONFIG
from .base import Cloud

# The inputs the stop and start tools have besides a VM's names (gemma4_t4/mcp/vm.py; the CLI's --stack too).
VM_TOOL_INPUTS = ("ctx", "stack", "timeout_s", "interval_s")


class Registry:
    """The registered clouds by name (the stack config's `cloud` value, the contract's `cloud` output)."""

    def __init__(self) -> None:
        self._clouds: dict[str, Cloud] = {}
        self.clouds: Mapping[str, Cloud] = MappingProxyType(self._clouds)  # a read-only view, always current

    def register(self, cloud: Cloud) -> Cloud:
        """Add CLOUD; a name already taken, or a setting another cloud takes from a different provider key (a
        refusal's fix would name the wrong key), is refused."""
        if cloud.name in self._clouds:
            raise ValueError(f"a cloud named {cloud.name!r} is registered already")
        # Each becomes a CLI option (--NAME) and an MCP tool's input: a name that is no identifier, or one the stop and
        # start tools take already, would break those tools for every cloud when they are built.
        for name in cloud.vm_names:
            if not name.isidentifier() or keyword.iskeyword(name) or name in VM_TOOL_INPUTS:
                raise ValueError(f"{cloud.name}: vm_names has {name!r}, which is no identifier or is one of the stop "
                                 f"and start tools' own inputs ({', '.join(VM_TOOL_INPUTS)})")
        taken = self.provider_keys()
        for key, qualified in cloud.provider_keys.items():
            if taken.setdefault(key, qualified) != qualified:
                raise ValueError(f"{key} is {taken[key]} already, not {qualified}")
        self._clouds[cloud.name] = cloud
        return cloud

    def unregister(self, name: str) -> Cloud:
        """Take the cloud named NAME back, and with it its provider keys and its client's explainer."""
        if name not in self._clouds:
            raise KeyError(f"no cloud named {name!r} is registered")
        return self._clouds.pop(name)

    def provider_keys(self) -> dict[str, str]:
        """{setting: provider key} of every cloud, e.g. region -> aws:region (errors.StackConfig asks this)."""
        return {key: qualified for cloud in self._clouds.values() for key, qualified in cloud.provider_keys.items()}

    def explainers(self) -> tuple[failures.Explainer, ...]:
        """Each cloud's reading of its client library's errors (Cloud.explain)."""
        return tuple(cloud.explain for cloud in self._clouds.values())

    def explain(self, err: BaseException) -> failures.Failure:
        """ERR in one line with the fix, the registered clouds' clients' errors included (the front ends' boundary)."""
        return failures.explain(err, self.explainers())


REGISTRY = Registry()
# The stack program's words for a setting (`pulumi config set aws:region ...`) read the provider keys from here.
STACK_CONFIG.read_provider_keys(REGISTRY.provider_keys)
