"""hfToken on GCE: the token in Secret Manager, read by the VM's own service account when vLLM needs the Hub.

Not in instance metadata: every process on the VM and anyone who may view it (compute.instances.get) reads
metadata. The secret's one version holds the token (a Pulumi secret: encrypted in the state); the VM runs as a
service account of its own that may read this one secret and nothing else (roles/secretmanager.secretAccessor
on the secret), and the guest asks Secret Manager for the token at vLLM's start, only while the model is not
whole on the data disk (cloudinit/scripts/hf_token.py, serve.sh). What reaches the guest's metadata is the
secret's name.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

SECRET_MANAGER_API = "secretmanager.googleapis.com"
ACCESSOR_ROLE = "roles/secretmanager.secretAccessor"
# The access token the metadata server hands out carries the instance's scopes; cloud-platform leaves what the
# account may do to IAM, which grants it this one secret (Compute Engine docs: "Service accounts", scopes).
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# A service account's id: 6-30 characters, a lowercase letter first, lowercase letters, digits and hyphens,
# not ending in a hyphen (IAM: projects.serviceAccounts.create, accountId).
ACCOUNT_ID_MAX = 30


@dataclass(frozen=True)
class TokenAccess:
    """What the VM needs to read the token: the secret's resource name and the account it runs as."""
    secret_name: pulumi.Output[str]
    service_account: gcp.compute.InstanceServiceAccountArgs
    account: gcp.serviceaccount.Account


def service_account_id(prefix: str) -> str:
    """PREFIX-vm as a service account id: within 30 characters, the same on every `up` (a long prefix keeps its
    head and a digest of the whole, so two stacks' prefixes that share their head do not collide)."""
    base = re.sub(r"[^a-z0-9-]", "-", prefix.lower()).strip("-")
    base = base if base[:1].isalpha() else f"g-{base}"
    whole = f"{base}-vm" if len(base) >= 3 else f"{base}-gemma-vm"  # at least 6 characters
    if len(whole) <= ACCOUNT_ID_MAX:
        return whole
    digest = hashlib.sha256(prefix.encode()).hexdigest()[:5]
    return f"{base[:ACCOUNT_ID_MAX - len(digest) - 5].rstrip('-')}-{digest}-vm"


def token_secret(name: str, prefix: str, project: str | None, token: pulumi.Input[str], labels: dict[str, str],
                 child: pulumi.ResourceOptions) -> TokenAccess:
    """The secret with the token, the VM's service account and its right to read that secret (the Secret Manager
    API enabled first, and left on when the stack goes: other secrets of the project may need it)."""
    api = gcp.projects.Service(f"{name}-secretmanager-api", service=SECRET_MANAGER_API, project=project,
                               disable_on_destroy=False, opts=child)
    after_api = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[api]))
    secret = gcp.secretmanager.Secret(
        f"{name}-hf-token", secret_id=f"{prefix}-hf-token", project=project, labels=labels,
        replication=gcp.secretmanager.SecretReplicationArgs(auto=gcp.secretmanager.SecretReplicationAutoArgs()),
        opts=after_api)
    gcp.secretmanager.SecretVersion(f"{name}-hf-token", secret=secret.id, secret_data=pulumi.Output.secret(token),
                                    opts=child)
    account = gcp.serviceaccount.Account(
        f"{name}-vm", account_id=service_account_id(prefix), project=project,
        display_name="gemma4-t4 VM: reads its stack's hfToken secret, nothing else", opts=child)
    gcp.secretmanager.SecretIamMember(f"{name}-hf-token-reader", project=secret.project, secret_id=secret.secret_id,
                                      role=ACCESSOR_ROLE, member=account.member, opts=child)
    return TokenAccess(secret.name, gcp.compute.InstanceServiceAccountArgs(email=account.email,
                                                                           scopes=[CLOUD_PLATFORM_SCOPE]), account)


# OS Login to a VM that runs as a service account asks the user for roles/iam.serviceAccountUser on that account
# (Compute Engine, "Set up OS Login": users of VMs with an attached service account need it).
ACT_AS_ROLE = "roles/iam.serviceAccountUser"


def let_operators_in(name: str, members: list[str] | tuple[str, ...], token: TokenAccess,
                     child: pulumi.ResourceOptions) -> None:
    """Each operator may log in to a VM that runs as this account: the account's Service Account User role for each.
    Such an operator may also act as the account, and so read the token, as any process on the VM can."""
    for member in members:
        who = re.sub(r"[^A-Za-z0-9@._-]+", "-", member)
        gcp.serviceaccount.IAMMember(f"{name}-act-as-{who}", service_account_id=token.account.name,
                                     role=ACT_AS_ROLE, member=member, opts=child)
