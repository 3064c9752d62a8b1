"""SageMaker's client library's failures (botocore) in one line with the fix: no or expired credentials, an
SSO session that ended, no network, a denied call; the API's other refusals in its own words."""

from __future__ import annotations

from ...core import failures
from ...core.failures import EXIT_USAGE, Failure, first_line

AWS_LOGIN = "`aws sso login` (or `aws configure`), or set AWS_PROFILE"


def explain(err: BaseException) -> Failure | None:
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
        return Failure(f"your AWS SSO session has expired ({first_line(err)}): run `aws sso login`")
    if isinstance(err, boto.EndpointConnectionError | boto.ConnectTimeoutError | boto.ProxyConnectionError):
        return Failure(f"cannot reach AWS ({first_line(err)}): check the network, a proxy (HTTPS_PROXY), "
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
        return Failure(f"AWS: {code}: {message}", api_answer=True)
    if isinstance(err, boto.BotoCoreError):
        return Failure(f"AWS: {first_line(err)}", api_answer=True)
    return None


def cloud_message(err: BaseException) -> str | None:
    """The line for a credentials or network failure of this cloud's client (core.failures.cloud_message)."""
    return failures.cloud_message(err, (explain,))
