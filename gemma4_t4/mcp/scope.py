"""What an MCP tool may touch, checked before anything is contacted: a stack of this project by its
own name, and only what that stack's outputs describe (its VM's instance, zone and project; its
SageMaker endpoint and region); files inside the one working folder the server was started with;
`url`s on loopback, or on an origin the server was started with (--allow-url).

An agent drives these tools, and what it asks may come from text it read (a web page, a model's
answer): each refusal is one line naming what was asked and what the stack, the folder or the
allow-list holds, so the user can see why and widen the scope on purpose.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .. import clouds
from ..core.targets import TargetError, server_url
from ..errors import UsageError

REFUSED = "refused: "


class OutOfScope(TargetError):
    """A tool call reaching past the stack, the working folder or the allowed URLs (nothing was contacted)."""


# A stack of this project, by its own name as `pulumi stack init` made it (gce-t4): not
# org/project/stack, which names another project's stack, and never anything `pulumi` could read as a flag.
STACK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def stack_name(stack: str, allowed: Sequence[str] = ()) -> str:
    """STACK if it names one of this project's stacks by its own name, and (when the server was started with
    --stack) one of those ALLOWED."""
    if not STACK_NAME.fullmatch(stack):
        raise OutOfScope(f"{REFUSED}stack {stack!r}: the tools act on this project's stacks by their own name "
                         "(letters, digits, - _ .), e.g. gce-t4; not org/project/stack")
    if allowed and stack not in allowed:
        raise OutOfScope(f"{REFUSED}stack {stack}: the server was started for {', '.join(allowed)} only (--stack); "
                         f"start it with --stack {stack} to allow it")
    return stack


# The tools' names for what a stack's `target` output (gemma4_t4.contract) holds, beside the names the clouds give
# a VM (Cloud.vm_names: the target output's own keys, e.g. instance, zone, project).
OUTPUT_KEYS = {"endpoint": "endpoint_name", "region": "region"}


def _named(where: Mapping[str, Any]) -> str:
    return ", ".join(f"{key} {value}" for key, value in where.items())


def owned(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """What the stack's outputs say it owns, in the tools' words (instance/zone/project, endpoint/region)."""
    target = outputs.get("target")
    if not isinstance(target, Mapping):
        return {}
    keys = {**{name: name for name in clouds.vm_names()}, **OUTPUT_KEYS}
    return {arg: target[key] for arg, key in keys.items() if target.get(key) is not None}


def check_owned(stack: str, outputs: Mapping[str, Any], asked: Mapping[str, str | None]) -> None:
    """Every argument given (instance, zone, project, endpoint, region) must be the stack's own."""
    given = {key: value for key, value in asked.items() if value}
    has = owned(outputs)
    if any(has.get(key) != value for key, value in given.items()):
        raise OutOfScope(f"{REFUSED}{_named(given)} is not stack {stack}'s: the stack owns "
                         f"{_named(has) or 'nothing the tools can act on'}; the tools act only on it")


def needs_stack(given: Mapping[str, str | None], what: str) -> OutOfScope:
    return OutOfScope(f"{REFUSED}{_named({k: v for k, v in given.items() if v})} without a stack: the tools act "
                      f"only on {what}; name the stack (its outputs say which)")


# --- files ---------------------------------------------------------------------------------------


def inside(workdir: Path, given: str, what: str) -> Path:
    """GIVEN (relative to WORKDIR, or absolute), with its symlinks and `..` resolved, if it is inside WORKDIR,
    and neither hidden (a dotfile, or in a dot-folder: .git, .ssh, .pulumi) nor a Pulumi project or stack file."""
    root = workdir.resolve()
    path = (root / Path(given).expanduser()).resolve()
    if not path.is_relative_to(root):
        raise OutOfScope(f"{REFUSED}{what} {given} resolves to {path}, outside the working folder {root} "
                         "(start the server with --workdir to choose another)")
    relative = path.relative_to(root)
    pulumi_file = path.name.startswith("Pulumi.")
    if pulumi_file or any(part.startswith(".") for part in relative.parts):
        raise OutOfScope(f"{REFUSED}{what} {given} is {'a Pulumi file' if pulumi_file else 'hidden'} ({relative}): "
                         "the tools read and write only their reports and charts")
    return path


# A report the tools read: a bench report is a few hundred KB; anything far larger is not one.
REPORT_MAX_BYTES = 16 * 1024 * 1024


def report_to_read(path: Path, given: str, what: str) -> Path:
    """A bench report to read: a .json file of at most REPORT_MAX_BYTES."""
    if path.suffix != ".json":
        raise OutOfScope(f"{REFUSED}{what} {given}: a bench report is a .json file (bench's out)")
    if path.is_file() and path.stat().st_size > REPORT_MAX_BYTES:
        raise OutOfScope(f"{REFUSED}{what} {given} is {path.stat().st_size:,} bytes: a bench report is at most "
                         f"{REPORT_MAX_BYTES:,}")
    return path


def new_report(path: Path, given: str, what: str) -> Path:
    """A report to write: a .json file that does not exist yet (a tool never writes over a file)."""
    if path.suffix != ".json":
        raise OutOfScope(f"{REFUSED}{what} {given}: the report is written as a .json file; give a name ending in .json")
    if path.exists() or path.is_symlink():
        raise OutOfScope(f"{REFUSED}{what} {given} exists: the tools never write over a file; give a new name")
    if not path.parent.is_dir():
        raise OutOfScope(f"{REFUSED}{what} {given}: its folder {path.parent} does not exist (checked before any "
                         "work, so that no run's report is lost)")
    return path


def chart_folder(path: Path, given: str, what: str, charts: Sequence[str]) -> Path:
    """A folder to write CHARTS into: any of them already there must be a plain PNG file (a symlink would take
    the write elsewhere), which is replaced."""
    for name in charts:
        chart = path / name
        if chart.is_symlink() or (chart.exists() and not chart.is_file()):
            raise OutOfScope(f"{REFUSED}{what} {given}: {name} there is not a plain file; the tools replace only "
                             "their own charts")
    return path


# --- URLs ---------------------------------------------------------------------------------------


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host, url.port or default


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Urls:
    """Loopback (127.0.0.0/8, ::1, localhost), and the origins (scheme://host:port) the server allows."""

    allowed: Sequence[str] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        for origin in self.allowed:
            parsed = httpx.URL(origin)
            if parsed.scheme not in ("http", "https") or not parsed.host or parsed.path not in ("", "/"):
                raise ValueError(f"{origin}: give an origin, scheme://host[:port], e.g. "
                                 "https://vllm.example.com:8443")

    def check(self, url: str) -> str:
        # httpx parses it here as HttpTarget's client will when it connects: one reading of the host.
        try:
            parsed = httpx.URL(server_url(url))
        except UsageError as err:
            raise OutOfScope(f"{REFUSED}{err}") from None
        if is_loopback(parsed.host) or _origin(parsed) in {_origin(httpx.URL(a)) for a in self.allowed}:
            return url
        allowed = ", ".join(self.allowed) or "none"
        raise OutOfScope(f"{REFUSED}url {url}: host {parsed.host} is not loopback (127.0.0.0/8, ::1, localhost) "
                         f"and not allowed (--allow-url: {allowed}); start the server with --allow-url "
                         f"{parsed.scheme}://{parsed.host}:{_origin(parsed)[2]} to allow it")
