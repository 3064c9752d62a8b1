"""The one error boundary every front end (the CLI, the MCP server) passes failures through: each
failure a user meets (a refused config, no or expired credentials, no network, a bad path, Ctrl-C)
becomes one line saying what happened and what to do, with the documented exit code. Anything
else is a bug: one line too, and the traceback with --debug or GEMMA4_T4_DEBUG=1."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace

from ..errors import ConfigError, UsageError
from .targets import TargetError

EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130
DEBUG_ENV = "GEMMA4_T4_DEBUG"

GOOGLE_LOGIN = "gcloud auth application-default login"
AWS_LOGIN = "`aws sso login` (or `aws configure`), or set AWS_PROFILE"


@dataclass(frozen=True)
class Failure:
    message: str  # one line
    exit_code: int = EXIT_FAILED
    bug: bool = False  # not a failure the user can fix: a traceback helps (--debug)
    # What kind of failure, for a program reading the --json failure document (docs/json.md):
    # usage, config, target, cloud, network, interrupted, bug.
    kind: str = "target"
    detail: str = ""  # the client's whole text the line was cut from (--verbose; the --json document)


def debugging() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0", "false", "no")


def explain(err: BaseException) -> Failure:
    """What ERR means to the user, in one line with the fix."""
    failure = _explain(err)
    if "\n" not in failure.message:
        return failure
    # One line: a message with more (a client's text carried along) keeps its first line, the rest as detail.
    first, rest = failure.message.split("\n", 1)
    return replace(failure, message=first.strip(), detail=failure.detail or rest.strip())


def _explain(err: BaseException) -> Failure:
    if isinstance(err, KeyboardInterrupt):
        return Failure("interrupted", EXIT_INTERRUPTED, kind="interrupted")
    if isinstance(err, ConfigError):
        return Failure(f"refused: {err.key}: {err.problem}; fix: {err.fix}", EXIT_USAGE, kind="config")
    if isinstance(err, UsageError):
        return Failure(str(err), EXIT_USAGE, kind="usage")
    if isinstance(err, TargetError):
        return Failure(str(err), detail=err.detail)
    for explainer in (_google, _aws, _http):
        if (failure := explainer(err)) is not None:
            kind = "usage" if failure.exit_code == EXIT_USAGE else "network" if explainer is _http else "cloud"
            return replace(failure, kind=kind, detail=_more_than(failure.message, err))
    if isinstance(err, FileNotFoundError | IsADirectoryError | NotADirectoryError | PermissionError):
        what = {FileNotFoundError: "no such file or folder", IsADirectoryError: "is a folder, not a file",
                NotADirectoryError: "not a folder", PermissionError: "permission denied"}[type(err)]
        where = err.filename or err
        return Failure(f"{where}: {what}" if err.filename else str(where), EXIT_USAGE, kind="usage")
    return Failure(f"unexpected error: {type(err).__name__}: {_first_line(err)} (run again with --debug, or "
                   f"{DEBUG_ENV}=1, for the traceback, and report it)", EXIT_FAILED, bug=True, kind="bug",
                   detail=str(err))


def cloud_message(err: BaseException) -> str | None:
    """The line for a credentials or network failure of a cloud client (google-auth, botocore),
    for the code that turns a client's errors into its own (targets, preflight); None: not one."""
    for explainer in (_google, _aws):
        if (failure := explainer(err)) is not None and not failure.message.startswith(("AWS: ", "Google API: ")):
            return failure.message
    return None


def _google(err: BaseException) -> Failure | None:
    try:
        from google.api_core import exceptions as api
        from google.auth import exceptions as auth
    except ImportError:
        return None
    if isinstance(err, auth.DefaultCredentialsError):
        return Failure(f"no Google credentials: run `gcloud auth login` and `{GOOGLE_LOGIN}`")
    if isinstance(err, auth.RefreshError):
        return Failure(f"your Google credentials have expired or were revoked ({_first_line(err)}): "
                       f"run `{GOOGLE_LOGIN}` again")
    if isinstance(err, auth.TransportError):
        return Failure(f"cannot reach Google's servers ({_first_line(err)}): check the network, a proxy "
                       "(HTTPS_PROXY), then try again")
    if isinstance(err, auth.GoogleAuthError):
        return Failure(f"Google refused the credentials ({_first_line(err)}): run `{GOOGLE_LOGIN}`")
    if isinstance(err, api.GoogleAPICallError) and (disabled := _disabled_service(str(err.message or err))):
        service, project = disabled
        return Failure(f"the {service} API is off in project {project} (a new project has it off): "
                       f"gcloud services enable {service} --project {project}")
    if isinstance(err, api.GoogleAPICallError):
        return Failure(f"Google API: {_first_line(err.message or err)}")
    return None


def _disabled_service(message: str) -> tuple[str, str] | None:
    """(service, project) of Google's 403 for an API a project has not enabled (reason
    SERVICE_DISABLED): "Compute Engine API has not been used in project N before or it is
    disabled. Enable it by visiting https://console.developers.google.com/apis/api/SERVICE/overview?project=N ..."."""
    found = re.search(r"has not been used in project (\S+) before or it is disabled.*?/apis/api/([a-z0-9.]+)/", message,
                      re.DOTALL)
    return (found.group(2), found.group(1)) if found else None


def _aws(err: BaseException) -> Failure | None:
    try:
        from botocore import exceptions as boto
    except ImportError:
        return None
    if isinstance(err, boto.NoCredentialsError | boto.PartialCredentialsError):
        return Failure(f"no AWS credentials: run {AWS_LOGIN}")
    if isinstance(err, boto.ProfileNotFound):
        return Failure(f"{err}: `aws configure --profile NAME`, or set aws:profile / AWS_PROFILE to one that exists",
                       EXIT_USAGE)
    if isinstance(err, boto.TokenRetrievalError | boto.SSOError | boto.SSOTokenLoadError):
        return Failure(f"your AWS SSO session has expired ({_first_line(err)}): run `aws sso login`")
    if isinstance(err, boto.EndpointConnectionError | boto.ConnectTimeoutError | boto.ProxyConnectionError):
        return Failure(f"cannot reach AWS ({_first_line(err)}): check the network, a proxy (HTTPS_PROXY), "
                       "then try again")
    if isinstance(err, boto.ClientError):
        error = err.response.get("Error", {})
        code, message = error.get("Code", ""), error.get("Message", "")
        if code in ("ExpiredToken", "ExpiredTokenException", "RequestExpired"):
            return Failure(f"your AWS credentials have expired ({code}: {message}): run {AWS_LOGIN}")
        if code in ("UnrecognizedClientException", "InvalidClientTokenId", "InvalidSignatureException",
                    "SignatureDoesNotMatch", "AuthFailure"):
            return Failure(f"AWS refused your credentials ({code}: {message}): run {AWS_LOGIN}")
        if code in ("AccessDenied", "AccessDeniedException"):
            return Failure(f"AWS denied the call ({code}: {message}): ask for the permission it names")
        return Failure(f"AWS: {code}: {message}")
    if isinstance(err, boto.BotoCoreError):
        return Failure(f"AWS: {_first_line(err)}")
    return None


def _http(err: BaseException) -> Failure | None:
    import httpx

    if isinstance(err, httpx.TimeoutException):
        return Failure(f"no answer in time from {_url(err)}: is the server up? (`gemma4-t4 status`)")
    if isinstance(err, httpx.HTTPStatusError):
        return Failure(f"{err.request.url}: HTTP {err.response.status_code}")
    if isinstance(err, httpx.HTTPError):
        return Failure(f"cannot reach {_url(err)} ({_first_line(err)}): is the server up, the URL right?")
    return None


def _url(err: BaseException) -> str:
    try:
        return str(err.request.url)  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):  # httpx raises RuntimeError when no request is attached
        return "the server"


def _more_than(message: str, err: BaseException) -> str:
    """ERR's whole text where the line says less (a client's long answer), else nothing."""
    text = str(err).strip()
    return text if text and text not in message else ""


def _first_line(err: object) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
