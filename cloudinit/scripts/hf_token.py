#!/usr/bin/python3
"""Print the Hugging Face token held by the Secret Manager secret SECRET (projects/P/secrets/S), read as the VM's
own service account. serve.sh runs it before vLLM's start, only while the model is not whole on the data disk, and
hands the token to vLLM as HF_TOKEN: it is never written to a file or a log.

    hf_token.py projects/PROJECT/secrets/SECRET

The VM's access token comes from the metadata server (Compute Engine, "Authenticate workloads using service
accounts": GET instance/service-accounts/default/token with `Metadata-Flavor: Google` answers {"access_token",
"expires_in", "token_type"}). The secret's latest version from Secret Manager's REST API (projects.secrets.versions.
access: GET v1/NAME/versions/latest:access answers {"name", "payload": {"data": BASE64, "dataCrc32c"}}; an error
is Google's JSON error, {"error": {"code", "message", "status"}}).
"""

from __future__ import annotations

import base64
import json
import sys
import urllib.error
import urllib.request

TOKEN_URL = "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token"
SECRET_MANAGER = "https://secretmanager.googleapis.com/v1"
TIMEOUT_S = 30


class TokenError(Exception):
    """Why the token could not be read, and what to do."""


def _get_json(request: urllib.request.Request) -> dict:
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        try:
            message = json.load(error).get("error", {}).get("message", "")
        except (ValueError, AttributeError):
            message = ""
        raise TokenError(f"{request.full_url.split('?')[0]} answered {error.code}"
                         + (f": {message}" if message else "")) from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise TokenError(f"{request.full_url.split('?')[0]} did not answer: {error}") from None


def access_token() -> str:
    try:
        answer = _get_json(urllib.request.Request(TOKEN_URL, headers={"Metadata-Flavor": "Google"}))
    except TokenError as error:
        raise TokenError(f"{error} (the VM has no service account to read the secret with: `pulumi up` gives it "
                         "one when hfToken is set)") from None
    return str(answer["access_token"])


def hub_token(secret: str) -> str:
    """The latest version of SECRET, as text."""
    request = urllib.request.Request(f"{SECRET_MANAGER}/{secret}/versions/latest:access",
                                     headers={"Authorization": f"Bearer {access_token()}"})
    try:
        answer = _get_json(request)
    except TokenError as error:
        raise TokenError(f"{error} (the VM's service account needs roles/secretmanager.secretAccessor on {secret}, "
                         "which `pulumi up` grants, and the secret a version: set hfToken again)") from None
    token = base64.b64decode(answer["payload"]["data"]).decode().strip()
    if not token:
        raise TokenError(f"{secret} holds an empty token: set gemma4-t4:hfToken (a secret) and `pulumi up`")
    return token


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].startswith("projects/"):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        print(hub_token(argv[0]))
    except TokenError as error:
        print(f"hf-token: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
