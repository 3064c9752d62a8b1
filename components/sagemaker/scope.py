"""Which Pulumi stack a SageMaker resource belongs to: its organization, project and stack, carried as three tags
(catalog: SAGEMAKER_ORGANIZATION_TAG, SAGEMAKER_PROJECT_TAG, SAGEMAKER_STACK_TAG). A stack name is unique only
within a project of an organization, so the account check, preflight, status and the endpoint watch count an
endpoint as the stack's only when all three match: two stacks named alike elsewhere never see each other's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gemma4_t4.catalog import SAGEMAKER_ORGANIZATION_TAG, SAGEMAKER_PROJECT_TAG, SAGEMAKER_STACK_TAG

# A fleet's resources are named with the head of its key (fleet.py), which its endpoint's fleet tag carries whole:
# here, with the stack's tags, so that the operator side (strays.py) reads a name from the tags without the
# component's Pulumi imports.
ID_LENGTH = 8  # hex digits of the key in the fleet's resource names


def fleet_id(key: str) -> str:
    return key[:ID_LENGTH]


@dataclass(frozen=True)
class StackScope:
    """A stack as its backend names it. An empty organization or project: not known (a target recorded by a
    release before 0.4.0 names the stack alone); only what is known is compared."""

    stack: str
    project: str = ""
    organization: str = ""

    @classmethod
    def current(cls) -> StackScope:
        """The stack the Pulumi program runs in."""
        import pulumi

        return cls(pulumi.get_stack(), pulumi.get_project(), pulumi.get_organization())

    @classmethod
    def of(cls, found: Mapping[str, str] | None, stack: str) -> StackScope:
        """From a tags map (a stack's target output); STACK when it names none."""
        found = found or {}
        return cls(found.get(SAGEMAKER_STACK_TAG) or stack, found.get(SAGEMAKER_PROJECT_TAG, ""),
                   found.get(SAGEMAKER_ORGANIZATION_TAG, ""))

    def tags(self) -> dict[str, str]:
        """The tags that mark the stack's resources (only those known)."""
        return {key: value for key, value in ((SAGEMAKER_ORGANIZATION_TAG, self.organization),
                                              (SAGEMAKER_PROJECT_TAG, self.project),
                                              (SAGEMAKER_STACK_TAG, self.stack)) if value}

    def owns(self, tags: Iterable[Mapping[str, str]] | Mapping[str, str], strict: bool = False) -> bool:
        """Whether TAGS (AWS's [{"Key", "Value"}] list, or a map) mark a resource of this stack: every tag known here
        present with the same value. An endpoint tagged by a release before 0.4.0 carries the stack's name alone; it
        is taken as the stack's (as it was then) until the first `pulumi up` tags it in full, so that `up` still
        counts it as the running fleet; STRICT (for what deletes) takes it as no one's: it may be another project's
        stack of the same name."""
        found = dict(tags) if isinstance(tags, Mapping) else {t["Key"]: t["Value"] for t in tags}
        if not self.stack or found.get(SAGEMAKER_STACK_TAG) != self.stack:
            return False
        if SAGEMAKER_PROJECT_TAG not in found and SAGEMAKER_ORGANIZATION_TAG not in found:
            return not strict  # tagged before 0.4.0
        return all(found.get(key) == value for key, value in self.tags().items())

    def __str__(self) -> str:
        return "/".join(part or "?" for part in (self.organization, self.project, self.stack))
