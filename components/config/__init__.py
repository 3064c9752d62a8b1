"""The components' settings, validated whole: every setting typed, ranged and cross-checked against
the catalog's cloud facts before any resource is registered.

``validate`` turns a component's Args (a plain mapping: the TypedDict a Python program passes, or
the inputs the package's provider maps from another language) into its Settings. A bad value, an
argument the component does not have, or a rule two settings break together raises ConfigError
with the setting, what is wrong and the fix; the caller's front end renders it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from enum import Enum
from importlib import import_module
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from gemma4_t4.errors import VALUE, ConfigError, FrontEnd, Set, Unset

from .schema import (
    DType,
    ServingSettings,
    gce_name,
    parse_ttl,
)

if TYPE_CHECKING:
    from ..gce.settings import GceT4ServerSettings, OnHostMaintenance, TerminationAction
    from ..sagemaker.settings import ImageBuilder, SageMakerT4EndpointSettings, ScalingMetric, check_sagemaker_region

# A cloud's Settings live in its folder and import the shared rules from here: loaded on first use, not at import,
# so that either side may be imported first.
_IN_A_CLOUDS_FOLDER = {
    "GceT4ServerSettings": "..gce.settings", "OnHostMaintenance": "..gce.settings",
    "TerminationAction": "..gce.settings",
    "ImageBuilder": "..sagemaker.settings", "SageMakerT4EndpointSettings": "..sagemaker.settings",
    "ScalingMetric": "..sagemaker.settings", "check_sagemaker_region": "..sagemaker.settings",
}

Settings = TypeVar("Settings", bound=BaseModel)


def keys_of(model: type[BaseModel]) -> dict[str, Any]:
    """{setting as the schema names it (camelCase): its default} for one Settings class."""
    return {field.alias or name: field.get_default(call_default_factory=True)
            for name, field in model.model_fields.items()}


def closest_setting(key: str, names: Iterable[str]) -> str | None:
    """The setting of NAMES that KEY most likely means, whichever spelling either uses (maxModelLen, max_model_len):
    the same letters but for case and underscores, else the nearest by difflib; None if none is near."""

    def letters(name: str) -> str:
        return name.replace("_", "").lower()

    by_letters = {letters(name): name for name in names}
    if letters(key) in by_letters:
        return by_letters[letters(key)]
    close = difflib.get_close_matches(letters(key), list(by_letters), n=1, cutoff=0.6)
    return by_letters[close[0]] if close else None


def _suggestion(model: type[BaseModel], key: str, error: Mapping[str, Any]) -> Any:
    """A value that works: an integer's upper limit when it is above it (a cloud's limit), else the
    default, else (no default) the choice the input spells in another case."""
    ctx = error.get("ctx") or {}
    if isinstance(ctx.get("le"), int) and not isinstance(ctx["le"], bool):
        return ctx["le"]
    field = next((f for n, f in model.model_fields.items() if (f.alias or n) == key), None)
    default = field.get_default(call_default_factory=True) if field is not None else None
    if default is not None:
        return _plain(default)
    choices = [member.value for member in _enum_of(field.annotation)] if field is not None else []
    given = str(error.get("input", "")).strip().lower()
    return next((choice for choice in choices if choice.lower() == given), "VALUE")


def _enum_of(annotation: Any) -> list[Enum]:
    """The members of the enum an annotation names (through Optional and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return list(annotation)
    return [member for arg in getattr(annotation, "__args__", ()) for member in _enum_of(arg)]


def _setting(model: type[BaseModel], loc: str) -> str:
    """The schema's name of a field, whether the caller used it or the Python name."""
    field = model.model_fields.get(loc)
    return (field.alias or loc) if field is not None else loc


def to_config_error(err: ValidationError, model: type[BaseModel]) -> ConfigError:
    """The first error as the project's refusal (a ConfigError raised by a validator as it is)."""
    first = err.errors(include_url=False)[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, ConfigError):
        return cause
    loc = [str(part) for part in first["loc"]]
    if loc:
        loc[0] = _setting(model, loc[0])
    key = ".".join(loc) if loc else "?"
    message = str(first["msg"]).removeprefix("Value error, ")
    shown = repr(first["input"])
    shown = shown if len(shown) <= 60 else f"{shown[:50]}... ({len(str(first['input'])):,} characters)"
    problem = f"{shown}: {message[:1].lower()}{message[1:]}" if loc else message
    if loc and loc[0] == "labels":
        return ConfigError(key, problem, Set("labels.NAME"))
    if first["type"] == "extra_forbidden":
        close = closest_setting(key, keys_of(model))
        instead = (Unset(key), "; did you mean ", Set(close, _plain(first["input"])), "?") if close else (Unset(key),)
        return ConfigError(key, f"is not a setting of this component ({problem})", instead)
    fix: tuple[Any, ...] = (Set(key, _suggestion(model, key, first)),)
    if first["type"] in ("literal_error", "enum"):
        fix += (f" (one of {first['ctx']['expected']})",)
    return ConfigError(key, problem, fix)


def _plain(value: Any) -> Any:
    """An enum member as its value (pydantic matches values, and the package's provider hands enums)."""
    return value.value if isinstance(value, Enum) else value


def _given_twice(model: type[BaseModel], args: Mapping[str, Any]) -> ConfigError | None:
    """The refusal of a setting ARGS give in both its spellings (max_model_len and maxModelLen): one setting, so one
    message that says so (pydantic would call the second an unknown argument and suggest the first)."""
    for name, field in model.model_fields.items():
        alias = field.alias or name
        if alias != name and name in args and alias in args:
            both = (args[name], args[alias])
            value = both[0] if both[0] == both[1] else VALUE
            return ConfigError(alias, f"is given twice, as {name} ({both[0]!r}) and as {alias} ({both[1]!r}): one "
                               "setting in two spellings", ("give it once: ", Set(alias, value)))
    return None


def validate(model: type[Settings], args: Mapping[str, Any], front_end: FrontEnd | None = None) -> Settings:
    """ARGS (Python names or the schema's) as MODEL; a refusal is a ConfigError in FRONT_END's words."""
    try:
        if twice := _given_twice(model, args):
            raise twice
        return model.model_validate({key: _plain(value) for key, value in args.items()})
    except ConfigError as err:
        raise (err.for_front_end(front_end) if front_end else err) from None
    except ValidationError as err:
        error = to_config_error(err, model)
        raise (error.for_front_end(front_end) if front_end else error) from None


__all__ = ["DType", "GceT4ServerSettings", "ImageBuilder", "OnHostMaintenance", "SageMakerT4EndpointSettings",
           "ScalingMetric", "ServingSettings", "TerminationAction", "check_sagemaker_region", "closest_setting",
           "gce_name", "keys_of", "parse_ttl", "to_config_error", "validate"]


def __getattr__(name: str) -> Any:
    if name not in _IN_A_CLOUDS_FOLDER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_IN_A_CLOUDS_FOLDER[name], __name__), name)
