"""GCE's client libraries' failures (google-auth, google-api-core) in one line with the fix: no or expired
credentials, no network, an API a project has off; the API's other refusals in its own words."""

from __future__ import annotations

import re

from ...core import failures
from ...core.failures import Failure, first_line

GOOGLE_LOGIN = "gcloud auth application-default login"


def explain(err: BaseException) -> Failure | None:
    try:
        from google.api_core import exceptions as api
        from google.auth import exceptions as auth
    except ImportError:
        return None
    if isinstance(err, auth.DefaultCredentialsError):
        return Failure(f"no Google credentials: run `gcloud auth login` and `{GOOGLE_LOGIN}`")
    if isinstance(err, auth.RefreshError):
        return Failure(f"your Google credentials have expired or were revoked ({first_line(err)}): "
                       f"run `{GOOGLE_LOGIN}` again")
    if isinstance(err, auth.TransportError):
        return Failure(f"cannot reach Google's servers ({first_line(err)}): check the network, a proxy "
                       "(HTTPS_PROXY), then try again")
    if isinstance(err, auth.GoogleAuthError):
        return Failure(f"Google refused the credentials ({first_line(err)}): run `{GOOGLE_LOGIN}`")
    if isinstance(err, api.GoogleAPICallError) and (disabled := _disabled_service(str(err.message or err))):
        service, project = disabled
        return Failure(f"the {service} API is off in project {project} (a new project has it off): "
                       f"gcloud services enable {service} --project {project}")
    if isinstance(err, api.GoogleAPICallError):
        return Failure(f"Google API: {first_line(err.message or err)}", api_answer=True)
    return None


def _disabled_service(message: str) -> tuple[str, str] | None:
    """(service, project) of Google's 403 for an API a project has not enabled (reason
    SERVICE_DISABLED): "Compute Engine API has not been used in project N before or it is
    disabled. Enable it by visiting https://console.developers.google.com/apis/api/SERVICE/overview?project=N ..."."""
    found = re.search(r"has not been used in project (\S+) before or it is disabled.*?/apis/api/([a-z0-9.]+)/", message,
                      re.DOTALL)
    return (found.group(2), found.group(1)) if found else None


def cloud_message(err: BaseException) -> str | None:
    """The line for a credentials or network failure of this cloud's client (core.failures.cloud_message)."""
    return failures.cloud_message(err, (explain,))
