"""The one error a bad setting raises: the setting, what is wrong, and the fix, each front end in its own words.

A setting is named as the components' schema names it (camelCase: ``maxModelLen``); ``labels.NAME`` is
one label. The fix is a sequence of parts: text, and settings to change (``Set``) or leave out
(``Unset``). Who renders it decides how a change is spelled:

- the stack program (``STACK_CONFIG``): ``pulumi config set gemma4-t4:maxModelLen 8192``;
- a Python program using the components (``PythonArgs("GceT4ServerArgs")``): ``GceT4ServerArgs(max_model_len=8192)``;
- a program in another Pulumi language through the package (``PACKAGE_INPUTS``): ``maxModelLen: 8192``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

PROJECT = "gemma4-t4"
VALUE = "VALUE"  # a value only the user can choose
# What the offline plan hands the program for a stack-file secret (`secure:` ciphertext) it cannot decrypt: a value
# no check reads as the secret's (gemma4_t4.core.plan; components/gce/checks.py check_secret_key).
UNDECRYPTED_SECRET = "[secret]"


@dataclass(frozen=True)
class Set:
    """Give ``key`` ``value`` (``secret``: as a secret)."""

    key: str
    value: Any = VALUE
    secret: bool = False


@dataclass(frozen=True)
class Unset:
    """Leave ``key`` out (its default applies)."""

    key: str


FixPart = str | Set | Unset


def fix(*parts: FixPart) -> tuple[FixPart, ...]:
    return parts


class FrontEnd(Protocol):
    """How one kind of caller names a setting and changes it."""

    def key(self, key: str) -> str: ...
    def set(self, change: Set) -> str: ...
    def unset(self, change: Unset) -> str: ...


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if str(value) != "" else '""'


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def _label(key: str) -> tuple[str, str] | None:
    """("labels", NAME) for ``labels.NAME``."""
    head, dot, name = key.partition(".")
    return (head, name) if dot else None


class StackConfig:
    """The stack program: `pulumi config` commands on the project's keys; provider settings keep their
    namespace (``provider_keys``, {setting: provider key}, asked at each rendering of the clouds' registry,
    gemma4_t4.clouds.registry, which binds its lookup here: e.g. ``region`` is the stack's ``aws:region`` where a
    registered cloud takes its region from the AWS provider)."""

    def __init__(self, provider_keys: Callable[[], Mapping[str, str]] = dict) -> None:
        self._provider_keys = provider_keys

    def read_provider_keys(self, lookup: Callable[[], Mapping[str, str]]) -> None:
        """Ask LOOKUP for the provider keys from now on (the registry's, bound once when it is made)."""
        self._provider_keys = lookup

    @property
    def provider_keys(self) -> Mapping[str, str]:
        return self._provider_keys()

    # Settings the program makes itself: what changes them.
    PROGRAM_OWNED: ClassVar[dict[str, str]] = {
        "namePrefix": "deploy this stack under another stack name (the stack program names its resources "
                      "after the project and the stack)"}

    def key(self, key: str) -> str:
        if key in (provider_keys := self.provider_keys):
            return provider_keys[key]
        # A namespace before any .path: aws:region is qualified, labels.aws:owner (a label) is not.
        return key if ":" in key.split(".", 1)[0] else f"{PROJECT}:{key}"

    def set(self, change: Set) -> str:
        if change.key in self.PROGRAM_OWNED:
            return self.PROGRAM_OWNED[change.key]
        path = "--path " if _label(change.key) else ""
        secret = "--secret " if change.secret else ""
        return f"pulumi config set {secret}{path}{self.key(change.key)} {_text(change.value)}"

    def unset(self, change: Unset) -> str:
        path = "--path " if _label(change.key) else ""
        return f"pulumi config rm {path}{self.key(change.key)}"


@dataclass(frozen=True)
class PythonArgs:
    """A Python program that builds the component: its Args, by the Python field name."""

    args_type: str

    def key(self, key: str) -> str:
        label = _label(key)
        return f"labels[{label[1]!r}]" if label else _snake(key)

    def set(self, change: Set) -> str:
        label = _label(change.key)
        value = repr(change.value) if change.value is not VALUE else "VALUE"
        if change.secret:
            value = f"pulumi.Output.secret({value})"
        if label:
            return f"{self.args_type}(labels={{{label[1]!r}: {value}}})"
        return f"{self.args_type}({_snake(change.key)}={value})"

    def unset(self, change: Unset) -> str:
        return f"leave {self.key(change.key)} out of {self.args_type}"


class PackageInputs:
    """A program in another Pulumi language (YAML, TypeScript, Go...): the schema's input names."""

    def key(self, key: str) -> str:
        return key

    def set(self, change: Set) -> str:
        label = _label(change.key)
        value = _text(change.value)
        if label:
            return f"labels: {{{label[1]}: {value}}}"
        return f"{change.key}: {value}" + (" (as a secret)" if change.secret else "")

    def unset(self, change: Unset) -> str:
        return f"leave out {change.key}"


STACK_CONFIG = StackConfig()
PACKAGE_INPUTS = PackageInputs()


def render(parts: Iterable[FixPart], front_end: FrontEnd) -> str:
    rendered = []
    for part in parts:
        if isinstance(part, Set):
            rendered.append(front_end.set(part))
        elif isinstance(part, Unset):
            rendered.append(front_end.unset(part))
        else:
            rendered.append(part)
    return "".join(rendered)


class ConfigError(ValueError):
    """A setting that cannot work, refused before any resource is registered.

    ``setting`` is the schema's name; ``key`` and ``fix`` are rendered for ``front_end`` (the stack
    program unless a caller says otherwise, see ``for_front_end``)."""

    def __init__(self, setting: str, problem: str, fix: str | FixPart | Iterable[FixPart],
                 front_end: FrontEnd = STACK_CONFIG):
        self.setting = setting
        self.problem = problem
        self.fix_parts: tuple[FixPart, ...] = (fix,) if isinstance(fix, str | Set | Unset) else tuple(fix)
        self.front_end = front_end
        super().__init__(self.message)

    @property
    def key(self) -> str:
        return self.front_end.key(self.setting)

    @property
    def fix(self) -> str:
        return render(self.fix_parts, self.front_end)

    @property
    def message(self) -> str:
        return f"{self.key}: {self.problem}\n  fix: {self.fix}"

    def __str__(self) -> str:
        return self.message

    def for_front_end(self, front_end: FrontEnd) -> ConfigError:
        """The same refusal in another front end's words (same class, same parts)."""
        copy = type(self).__new__(type(self))
        ConfigError.__init__(copy, self.setting, self.problem, self.fix_parts, front_end)
        return copy


class UsageError(ValueError):
    """A command asked for something that cannot work as asked: a bad flag or flag combination, a file that
    is missing or malformed (a stack file that is not YAML). Every front end reports it in one line as the
    user's to fix (the command line: exit 2). ``prog``: the command whose usage it is, where known."""

    def __init__(self, message: str, prog: str = ""):
        super().__init__(message)
        self.prog = prog
