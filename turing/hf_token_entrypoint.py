"""The clamped image's entrypoint: the Hugging Face token from Secrets Manager, then the base's entrypoint.

The endpoint's model environment holds only the secret's ARN (HF_TOKEN_SECRET_ARN), never the token, which
DescribeModel would show. At start this reads the secret with the execution role (botocore: the AWS vLLM
container installs it for the system Python), puts it in HF_TOKEN for vLLM's download, and execs the base
image's own entrypoint with the same arguments (`serve`). Without the variable it execs at once.

    python3 hf_token_entrypoint.py BASE_ENTRYPOINT [ARGS...]
"""

from __future__ import annotations

import os
import sys

SECRET_ENV = "HF_TOKEN_SECRET_ARN"  # catalog.HF_TOKEN_SECRET_ENV


def fail(message: str) -> int:
    # The container's stderr is the endpoint's log (CloudWatch): say what to fix there.
    print(f"hf-token: {message}", file=sys.stderr, flush=True)
    return 1


def read_token(arn: str) -> str:
    import botocore.session

    # The secret's region is in its ARN (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME).
    client = botocore.session.get_session().create_client("secretsmanager", region_name=arn.split(":")[3])
    return client.get_secret_value(SecretId=arn)["SecretString"]


def main(argv: list[str]) -> int:
    if not argv:
        return fail("usage: hf_token_entrypoint.py BASE_ENTRYPOINT [ARGS...]")
    arn = os.environ.get(SECRET_ENV, "")
    if arn:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            os.environ["HF_TOKEN"] = read_token(arn)
        except ClientError as error:
            found = error.response.get("Error", {})
            return fail(f"could not read the token's secret {arn}: {found.get('Code')}: {found.get('Message')} "
                        "(the execution role needs secretsmanager:GetSecretValue on it)")
        except (BotoCoreError, IndexError) as error:
            return fail(f"could not read the token's secret {arn!r}: {error}")
    os.execv(argv[0], argv)
    return 0  # not reached: execv replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
