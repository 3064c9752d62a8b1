"""The gemma4-t4 stack program: one consumer of the components, as any Pulumi program could be.

It reads the stack's config into its cloud's Args (refusing a bad value before anything is
registered, in `pulumi config` words and without a traceback), builds that one component, and
exports the contract's outputs (gemma4_t4.contract) and the component's own. The project's
__main__.py runs it; so does the offline plan (`gemma4-t4 plan`), under Pulumi's mocks.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

import pulumi
from pulumi.runtime import config as runtime

from .clouds import CLOUDS
from .clouds.base import Secret
from .clouds.stack_config import stack_settings
from .errors import PROJECT, STACK_CONFIG, ConfigError

NAME = PROJECT  # the component's name: its children's logical names start with it


def read_pulumi_config() -> tuple[dict[str, Any], set[str]]:
    """Every config value the Pulumi engine handed this program, and which keys are secrets."""
    values = {**runtime.get_config_env(), **runtime.CONFIG.get()}
    return values, {k for k in values if pulumi.runtime.is_config_secret(k)}


def _as_input(value: Any) -> Any:
    """A credential the stack config holds becomes a Pulumi secret; maps are walked."""
    if isinstance(value, Secret):
        return pulumi.Output.secret(value.value)
    if isinstance(value, dict):
        return {k: _as_input(v) for k, v in value.items()}
    return value


def main() -> None:
    from .components.base import InvalidArgs, output_names

    values, secrets = read_pulumi_config()
    try:
        cloud, args = stack_settings(values, CLOUDS, secrets,
                                     secret=lambda key: pulumi.Config(PROJECT).get_secret(key))
        module, _, name = cloud.component.partition(":")
        component_type = getattr(import_module(module), name)
        args = {"name_prefix": cloud.name_prefix(pulumi.get_project(), pulumi.get_stack()),
                **{key: _as_input(value) for key, value in args.items()}}
        component = component_type(NAME, args)
    except ConfigError as error:
        raise InvalidArgs.of(error, STACK_CONFIG) from None
    for output in output_names(component_type):
        if (value := getattr(component, output)) is not None:  # None: a feature the stack does not use
            pulumi.export(output, value)


if __name__ == "__main__":
    main()
