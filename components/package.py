"""The components as a Pulumi package for every language: the schema Pulumi's own analyzer infers from
the Args and outputs, and the provider that constructs a component for a TypeScript, Go, C#, Java or
YAML program (`pulumi package add` of the source-based package in provider/).

The schema is the analyzer's, with two things it cannot see filled in: the descriptions of what the
components inherit (ServingArgs' settings, T4ServingComponent's outputs: it reads docstrings from a
class's own source only), and each input's default, from the component's Settings (the one source
of defaults). The
committed schema.json is this schema; a test regenerates it and fails on any drift.

A refused setting reaches the caller as an input property error naming the input and the fix in
the schema's words, not as a Python traceback.

pulumi.provider (3.272) registers its own copy of google.rpc.Status, which googleapis-common-protos
(google-cloud-compute's) registers too: the two cannot load in one process. Nothing else imports
this module; the operator tools read the committed schema.json instead.
"""

import inspect
import json
import os
import sys
from enum import Enum
from typing import Any

import pulumi
import pulumi.provider
from pulumi.errors import InputPropertyError
from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.experimental.schema import generate_schema
from pulumi.provider.experimental.util import camel_case
from pulumi.provider.provider import ConstructResult
from pulumi.provider.server import ComponentInitError
from pydantic import BaseModel

from gemma4_t4 import __version__
from gemma4_t4.errors import PACKAGE_INPUTS, PROJECT, ConfigError

from .base import ServingArgs, T4ServingComponent, output_names
from .config import GceT4ServerSettings, keys_of
from .gce import GceT4Server
from .sagemaker import SageMakerT4Endpoint
from .sagemaker.image import TuringImage
from .sagemaker.image_settings import TuringImageSettings
from .sagemaker.settings import SageMakerT4EndpointSettings
from .step import foreign_program_note

COMPONENTS: list[type[pulumi.ComponentResource]] = [GceT4Server, SageMakerT4Endpoint, TuringImage]
# Inputs the schema marks secret (the analyzer cannot see it): every language's SDK then sends them as secrets,
# and the engine keeps them encrypted in the state. The stack program's secret keys are the same
# (clouds/stack_config.py SECRET_KEYS; a test holds them equal).
SECRET_INPUTS = frozenset({"hfToken", "apiKey"})
# Each component whose inputs have Settings: where the defaults come from.
SETTINGS: dict[type[pulumi.ComponentResource], type[BaseModel]] = {
    GceT4Server: GceT4ServerSettings, SageMakerT4Endpoint: SageMakerT4EndpointSettings,
    TuringImage: TuringImageSettings}


def _jsonable(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def _clean_descriptions(node: Any) -> None:
    """Every description as `inspect.cleandoc` makes it: CPython 3.13 strips a docstring's indentation at
    compile time and 3.11 does not, so the analyzer's raw class docstrings differ between the two."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "description" and isinstance(value, str):
                node[key] = inspect.cleandoc(value)
            else:
                _clean_descriptions(value)
    elif isinstance(node, list):
        for item in node:
            _clean_descriptions(item)


def schema(version: str = __version__) -> dict[str, Any]:
    """The package schema, as the provider serves it and schema.json holds it."""
    analyzer = Analyzer(PROJECT)
    result = analyzer.analyze(COMPONENTS)
    spec = generate_schema(PROJECT, version, None, result["component_definitions"], result["type_definitions"],
                           sorted(result["dependencies"], key=lambda d: f"{d.name}{d.version}")).to_json()
    inherited = {name: analyzer.get_docstring(ServingArgs, name) for name in ServingArgs.__annotations__}
    contract = {camel_case(name): analyzer.get_docstring(T4ServingComponent, name)
                for name in output_names(T4ServingComponent)}
    for component, settings in SETTINGS.items():
        resource = spec["resources"][f"{PROJECT}:index:{component.__name__}"]
        for key, prop in resource["properties"].items():
            if "description" not in prop and contract.get(key):
                prop["description"] = contract[key]
        inputs = resource["inputProperties"]
        defaults = keys_of(settings)
        for key, prop in inputs.items():
            python_name = result["component_definitions"][component.__name__].inputs_mapping[key]
            if "description" not in prop and inherited.get(python_name):
                prop["description"] = inherited[python_name]
            default = _jsonable(defaults.get(key))
            if isinstance(default, bool | int | float | str) and default != "" and "type" in prop:
                prop["default"] = default
            if key in SECRET_INPUTS:
                prop["secret"] = True
    _clean_descriptions(spec)
    return spec


class Provider(ComponentProvider):
    """The components' provider: the analyzer's constructor, this package's schema, refusals as input errors."""

    def __init__(self, version: str = __version__) -> None:
        super().__init__(COMPONENTS, PROJECT, version=version)
        self.schema = json.dumps(schema(version))

    def construct(self, name: str, resource_type: str, inputs: pulumi.Inputs,
                  options: pulumi.ResourceOptions | None = None) -> ConstructResult:
        note = foreign_program_note(resource_type.rsplit(":", 1)[-1], os.environ)
        if note:
            pulumi.log.warn(note)
        try:
            return super().construct(name, resource_type, inputs, options)
        except ComponentInitError as error:
            if isinstance(error.inner, ConfigError):
                refused = error.inner.for_front_end(PACKAGE_INPUTS)
                raise InputPropertyError(refused.setting, f"{refused.problem}; fix: {refused.fix}") from None
            raise


def main(args: list[str] | None = None) -> None:
    """The provider plugin's entry point (provider/__main__.py): the engine's address and flags in ARGS."""
    pulumi.provider.main(Provider(), sys.argv[1:] if args is None else args)


if __name__ == "__main__":
    # `python -m gemma4_t4.components.package > components/schema.json` writes the committed schema.
    print(json.dumps(schema(), indent=2, sort_keys=True))
