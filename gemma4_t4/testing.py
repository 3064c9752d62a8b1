"""Pulumi mocks for the unit tests of a program that uses the components: they answer as the providers do.

    import pulumi
    from gemma4_t4.testing import ProviderMocks

    pulumi.runtime.set_mocks(ProviderMocks(), preview=False)

Pulumi's documented generic mocks (new_resource -> [name + "_id", inputs], call -> {}) leave out what the
providers always answer (an ARN, a repository URL, a disk lookup's "not found"), and the components stop at
the first such answer with one message naming this module. ProviderMocks answers each resource as its
provider does (its physical name, id and the computed outputs the components read: each cloud's standins.py) and
each provider function the components call from what already exists (GceWorld, AwsWorld: a first `pulumi up`
by default), every answer with its source beside it. The offline `gemma4-t4 plan` answers with the same.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from typing import Any

import pulumi

from .clouds import standins
from .clouds.gce.standins import GceWorld, explicit_gcp_project, gcp_state
from .clouds.sagemaker.standins import AwsWorld, default_provider_region, region_answer, region_unset
from .components.gce.provider_answers import GET_DISK
from .components.provider_answers import RUN
from .components.sagemaker.provider_answers import GET_REGION, GET_REPOSITORY
from .core.mock_answers import Invoke, ProviderInvokeError, mock_state

PROVIDERS = "pulumi:providers:"


class ProviderMocks(pulumi.runtime.Mocks):
    """Pulumi's mocks, answering as the GCP, AWS and Command providers do. GCE and AWS: what exists before the
    program runs (default: nothing, a first `pulumi up`); INVOKES: more provider functions, by token, each an
    args -> result callable (raise ProviderInvokeError with the provider's text for a failure). An explicit provider
    the program passes answers as itself: an aws.Provider with its region, a gcp.Provider in its project."""

    def __init__(self, gce: GceWorld | None = None, aws: AwsWorld | None = None,
                 invokes: Mapping[str, Invoke] | None = None) -> None:
        self.gce = gce or GceWorld()
        self.aws = aws or AwsWorld()
        self.invokes = {**self.mock_invokes(), **(invokes or {})}
        # Explicit providers' inputs, by (package, logical name): what the provider was configured with.
        self.providers: dict[tuple[str, str], dict[str, Any]] = {}

    def mock_invokes(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        return {GET_DISK: self.gce.get_disk, GET_REPOSITORY: self.aws.get_repository, RUN: self.aws.run_local_command}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        inputs = dict(args.inputs)
        if args.typ.startswith(PROVIDERS):
            self.providers[(args.typ.removeprefix(PROVIDERS), args.name)] = inputs
        # Auto-naming's suffix: random-looking as Pulumi's, but the same each run.
        suffix = hashlib.sha256(f"{pulumi.get_stack()}|{args.typ}|{args.name}".encode()).hexdigest()[:7]
        explicit = self.explicit_provider("gcp", args.provider or "")
        if args.typ.startswith("gcp:") and explicit is not None:
            return gcp_state(args.typ, args.name, inputs, suffix, explicit_gcp_project(explicit))
        return mock_state(args.typ, args.name, inputs, suffix, standins())

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        if args.token == GET_REGION and args.token not in self.invokes:
            return region_answer(self.provider_region(args.provider)), []
        handler = self.invokes.get(args.token)
        given = dict(args.args)
        explicit = self.explicit_provider("gcp", args.provider or "")
        if args.token.startswith("gcp:") and explicit is not None and not given.get("project"):
            # A GCP function without a project reads its provider's (the explicit one the program passed).
            given["project"] = explicit_gcp_project(explicit)
        # Another function answers empty: the components call none but these.
        return (handler(given) if handler is not None else {}), []

    def explicit_provider(self, package: str, reference: str) -> dict[str, Any] | None:
        """The inputs of the explicit PACKAGE provider REFERENCE names (URN::ID, as the engine hands it a resource or
        a function); None for the default provider (no reference, or one of Pulumi's default_* providers)."""
        urn = reference.rsplit("::", 1)[0] if reference else ""
        parts = urn.split("::")
        if len(parts) < 4 or parts[-1].startswith("default"):
            return None
        typ = parts[2].rsplit("$", 1)[-1]
        return self.providers.get((package, parts[3])) if typ == PROVIDERS + package else None

    def provider_region(self, reference: str) -> str:
        """The region of the provider REFERENCE names (URN::ID; empty: the default provider): its region input,
        else (the default provider) the stack's aws:region, else AWS_REGION or AWS_DEFAULT_REGION, where the
        provider reads it (Pulumi's AWS provider configuration page)."""
        explicit = self.explicit_provider("aws", reference)
        if explicit is None:
            return str(default_provider_region({})["region"])
        region = explicit.get("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if not region:
            raise region_unset()
        return str(region)


# Public API (docs/library.md), so it gathers what a user's mocks need from where each is defined; GET_REGION as
# 0.3.0's gemma4_t4.testing published it (CHANGELOG, "Imports that moved"). tests/tree/test_one_import_path.py
# lists these re-exports; the package's own modules import each name from the module that defines it.
__all__ = ["GET_REGION", "AwsWorld", "GceWorld", "ProviderInvokeError", "ProviderMocks", "default_provider_region"]
