"""The one error boundary every front end (the CLI, the MCP server) passes failures through: each
failure a user meets (a refused config, no or expired credentials, no network, a bad path, Ctrl-C)
becomes one line saying what happened and what to do, with the documented exit code. Anything
else is a bug: one line too, and the traceback with --debug or GEMMA4_T4_DEBUG=1."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..errors import ConfigError, UsageError
from .targets import TargetError

EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130
DEBUG_ENV = "GEMMA4_T4_DEBUG"



@dataclass(frozen=True)
class Failure:
    message: str  # one line
    exit_code: int = EXIT_FAILED
    bug: bool = False  # not a failure the user can fix: a traceback helps (--debug)
    # What kind of failure, for a program reading the --json failure document (docs/json.md):
    # usage, config, target, cloud, network, interrupted, bug.
    kind: str = "target"
    detail: str = ""  # the client's whole text the line was cut from (--verbose; the --json document)
    api_answer: bool = False  # a cloud API's own refusal, not a credentials or network failure


# A cloud's reading of its client library's errors (credentials, network, the API's refusals): Cloud.explain, which
# the front ends pass in from the clouds' registry (gemma4_t4.clouds.registry). None: not that client's error.
Explainer = Callable[[BaseException], "Failure | None"]


def debugging() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0", "false", "no")


def explain(err: BaseException, explainers: Sequence[Explainer] = ()) -> Failure:
    """What ERR means to the user, in one line with the fix (EXPLAINERS: the clouds' clients', asked first)."""
    failure = _explain(err, explainers)
    if "\n" not in failure.message:
        return failure
    # One line: a message with more (a client's text carried along) keeps its first line, the rest as detail.
    first, rest = failure.message.split("\n", 1)
    return replace(failure, message=first.strip(), detail=failure.detail or rest.strip())


def _explain(err: BaseException, explainers: Sequence[Explainer]) -> Failure:
    if isinstance(err, KeyboardInterrupt):
        return Failure("interrupted", EXIT_INTERRUPTED, kind="interrupted")
    if isinstance(err, ConfigError):
        return Failure(f"refused: {err.key}: {err.problem}; fix: {err.fix}", EXIT_USAGE, kind="config")
    if isinstance(err, UsageError):
        return Failure(str(err), EXIT_USAGE, kind="usage")
    if isinstance(err, TargetError):
        return Failure(str(err), detail=err.detail)
    for explainer in (*explainers, _http):
        if (failure := explainer(err)) is not None:
            kind = "usage" if failure.exit_code == EXIT_USAGE else "network" if explainer is _http else "cloud"
            return replace(failure, kind=kind, detail=_more_than(failure.message, err))
    if isinstance(err, FileNotFoundError | IsADirectoryError | NotADirectoryError | PermissionError):
        what = {FileNotFoundError: "no such file or folder", IsADirectoryError: "is a folder, not a file",
                NotADirectoryError: "not a folder", PermissionError: "permission denied"}[type(err)]
        where = err.filename or err
        return Failure(f"{where}: {what}" if err.filename else str(where), EXIT_USAGE, kind="usage")
    return Failure(f"unexpected error: {type(err).__name__}: {first_line(err)} (run again with --debug, or "
                   f"{DEBUG_ENV}=1, for the traceback, and report it)", EXIT_FAILED, bug=True, kind="bug",
                   detail=str(err))


def cloud_message(err: BaseException, explainers: Sequence[Explainer]) -> str | None:
    """The line for a credentials or network failure of a cloud's client library (EXPLAINERS: that cloud's), for
    the code that turns a client's errors into its own (targets, preflight); None: not one."""
    for explainer in explainers:
        if (failure := explainer(err)) is not None and not failure.api_answer:
            return failure.message
    return None


def _http(err: BaseException) -> Failure | None:
    import httpx

    if isinstance(err, httpx.TimeoutException):
        return Failure(f"no answer in time from {_url(err)}: is the server up? (`gemma4-t4 status --url "
                       f"{_origin(err)}`)")
    if isinstance(err, httpx.HTTPStatusError):
        return Failure(f"{err.request.url}: HTTP {err.response.status_code}")
    if isinstance(err, httpx.HTTPError):
        return Failure(f"cannot reach {_url(err)} ({first_line(err)}): is the server up, the URL right?")
    return None


def _url(err: BaseException) -> str:
    try:
        return str(err.request.url)  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):  # httpx raises RuntimeError when no request is attached
        return "the server"


def _origin(err: BaseException) -> str:
    """scheme://host:port of the request ERR was for (what `--url` takes), else URL."""
    try:
        url = err.request.url  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):
        return "URL"
    return f"{url.scheme}://{url.host}" + (f":{url.port}" if url.port else "")


def _more_than(message: str, err: BaseException) -> str:
    """ERR's whole text where the line says less (a client's long answer), else nothing."""
    text = str(err).strip()
    return text if text and text not in message else ""


def first_line(err: object) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
