"""hfToken on GCE: the token in a Secret Manager secret of the stack that the VM's own service account (and only
it) may read; the VM's metadata, user-data and labels hold the secret's name, never the token."""

from __future__ import annotations

import json
import re

import pulumi
from conftest import REPO

from gemma4_t4 import clouds
from gemma4_t4.components.gce import GceT4Server, guest, hf_token
from gemma4_t4.core import plan as offline

INSTANCE = "gcp:compute/instance:Instance"
SECRET = "gcp:secretmanager/secret:Secret"
VERSION = "gcp:secretmanager/secretVersion:SecretVersion"
ACCOUNT = "gcp:serviceaccount/account:Account"
READER = "gcp:secretmanager/secretIamMember:SecretIamMember"
SERVICE = "gcp:projects/service:Service"
ACT_AS = "gcp:serviceaccount/iAMMember:IAMMember"
TOKEN = "hf_" + "t" * 34  # the shape of a Hugging Face user access token


def with_token(**args) -> offline.Plan:
    """GceT4Server in a program of its own, given the token as a secret Output (as the stack program hands a
    `pulumi config set --secret` value), under the clouds' stand-ins: the plan sees the token, to find it
    wherever it would leak."""
    handlers = {}
    for cloud in clouds.CLOUDS.values():
        handlers.update(cloud.mock_invokes(None))
    return offline.run_program("dev", {}, invokes=handlers, standins=clouds.standins(),
                               program=lambda: GceT4Server("llm", {"hf_token": pulumi.Output.secret(TOKEN), **args}))


def test_the_token_is_in_a_secret_only_the_vms_account_may_read():
    plan = with_token()
    secret, version, account, reader = (plan.one(t) for t in (SECRET, VERSION, ACCOUNT, READER))
    assert version.inputs["secretData"] == offline.SECRET_PLACEHOLDER, "the token is a secret in the state"
    assert version.inputs["secret"] == secret.state["name"], "the id of a secret is its resource name"
    assert reader.inputs["role"] == "roles/secretmanager.secretAccessor"
    assert reader.inputs["member"] == f"serviceAccount:{account.state['email']}"
    assert reader.inputs["secretId"] == secret.inputs["secretId"]
    api = plan.one(SERVICE)
    assert api.inputs["service"] == "secretmanager.googleapis.com" and api.inputs["disableOnDestroy"] is False
    assert api.urn.split("::")[-1] in " ".join(secret.options["dependsOn"]), "the API is on before the secret"
    vm = plan.one(INSTANCE)
    assert vm.inputs["serviceAccount"] == {"email": account.state["email"], "scopes": [hf_token.CLOUD_PLATFORM_SCOPE]}
    serving = vm.inputs["metadata"][guest.SERVING_METADATA_KEY]
    assert f"{guest.HF_TOKEN_SECRET_ENV}={secret.state['name']}\n" in serving


def test_the_token_appears_nowhere_but_in_the_secrets_version():
    """A value made from the token stays a secret (Pulumi carries secretness through apply): only the version's
    data may be one. The VM's metadata is not, so it holds no token, and a viewer of the VM reads the secret's
    name only."""
    plan = with_token()
    holding = [(r.type, key) for r in plan.resources for key, value in r.inputs.items()
               if offline.SECRET_PLACEHOLDER in json.dumps(value, default=str) or TOKEN in json.dumps(value, default=str)]
    assert holding == [(VERSION, "secretData")], holding


def test_without_a_token_no_secret_no_account_and_no_api():
    plan = clouds.offline_plan("gce-t4", clouds.stack_config("gce-t4", (), REPO))
    for typ in (SECRET, VERSION, ACCOUNT, READER, SERVICE):
        assert not plan.find(typ), typ
    vm = plan.one(INSTANCE)
    assert not vm.inputs.get("serviceAccount") and guest.HF_TOKEN_SECRET_ENV not in \
        vm.inputs["metadata"][guest.SERVING_METADATA_KEY]


def test_operators_may_log_in_to_a_vm_that_runs_as_the_account():
    """OS Login to a VM with an attached service account asks its users for Service Account User on it: each
    operator gets it on this account alone; without operators, nobody does."""
    plan = with_token(operators=["user:alice@example.com"])
    account = plan.one(ACCOUNT)
    (grant,) = plan.find(ACT_AS)
    assert (grant.inputs["serviceAccountId"], grant.inputs["role"], grant.inputs["member"]) == \
        (account.state["name"], "roles/iam.serviceAccountUser", "user:alice@example.com")
    assert not with_token().find(ACT_AS)


def test_the_stack_takes_the_token_from_a_secret_config_value_only():
    config = clouds.stack_config("gce-t4", (), REPO)
    config["gemma4-t4:hfToken"] = {"secure": "AAABAGVuY3J5cHRlZA=="}  # as `pulumi config set --secret` stores it
    assert clouds.offline_plan("gce-t4", config).one(SECRET)


def test_the_service_account_id_fits_iams_rule_for_any_prefix():
    rule = re.compile(r"^[a-z](?:[-a-z0-9]{4,28}[a-z0-9])$")  # IAM: projects.serviceAccounts.create, accountId
    for prefix in ("gemma4-t4-gce-t4", "a" * 63, "gce-t4-" + "x" * 50, "9lives-stack", "ab"):
        account_id = hf_token.service_account_id(prefix)
        assert rule.match(account_id), (prefix, account_id)
    assert hf_token.service_account_id("p" * 40 + "a") != hf_token.service_account_id("p" * 40 + "b")
