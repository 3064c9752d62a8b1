"""The providers' own stack config (gcp:*, aws:*) as the stack program reads it: a typo suggested as in the
project's keys, gcp:zone and gcp:region refused where they disagree with the stack's zone, gcp:project the
project the plan shows. And the project's keys in either spelling the components take."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from gemma4_t4 import catalog


@pytest.mark.parametrize(("override", "key", "fix"), [
    ("gcp:projet=mine", "gcp:projet", "pulumi config rm gcp:projet && pulumi config set gcp:project VALUE"),
    ("gcp:znoe=us-west2-b", "gcp:znoe", "pulumi config rm gcp:znoe && pulumi config set gcp:zone VALUE"),
    ("aws:regoin=us-east-2", "aws:regoin", "pulumi config rm aws:regoin && pulumi config set aws:region VALUE"),
])
def test_a_providers_key_misspelt_is_refused_with_the_one_it_means(refused_stack, override, key, fix):
    stack = "sagemaker-t4" if override.startswith("aws:") else "gce-t4"
    error, partial = refused_stack(stack, override)
    assert error.key == key and "which would ignore it; did you mean" in error.problem
    assert error.fix == fix and partial.resources == []


def test_the_gcp_keys_are_the_installed_providers():
    """The catalog's gcp:* keys are exactly those the installed pulumi-gcp reads (its config module)."""
    package = Path(importlib.util.find_spec("pulumi_gcp").submodule_search_locations[0])
    text = (package / "config" / "vars.py").read_text()
    assert set(re.findall(r"__config__\.get\w*\('(\w+)'\)", text)) == catalog.PULUMI_GCP_CONFIG_KEYS


@pytest.mark.parametrize(("override", "fix"), [
    ("gcp:zone=europe-west4-a", "pulumi config rm gcp:zone && pulumi config set gemma4-t4:zone europe-west4-a"),
    ("gcp:region=us-central1", "pulumi config rm gcp:region && pulumi config set gemma4-t4:zone us-central1-a"),
])
def test_a_provider_place_other_than_the_stacks_zone_is_refused_with_the_move(refused_stack, override, fix):
    key = override.split("=")[0]
    error, partial = refused_stack("gce-t4", override)
    assert error.key == key and "gemma4-t4:zone us-west2-b" in error.problem
    assert error.fix.startswith(fix) and partial.resources == []


def test_a_provider_place_that_agrees_with_the_zone_plans(run_stack):
    plan = run_stack("gce-t4", "gcp:zone=us-central1-a", "gcp:region=us-central1", "zone=us-central1-a")
    assert plan.outputs["target"]["zone"] == "us-central1-a"


def test_the_stacks_gcp_project_is_the_project_the_plan_shows(run_stack):
    plan = run_stack("gce-t4", "gcp:project=team-ml")
    assert plan.outputs["target"]["project"] == "team-ml"
    assert "--project team-ml " in plan.outputs["connect_command"]


@pytest.mark.parametrize(("override", "meant"), [("max_model_len=8192", "maxModelLen"),
                                                  ("maxmodellen=8192", "maxModelLen"),
                                                  ("max_run_hour=8", "maxRunHours")])
def test_a_key_in_the_components_spelling_is_refused_with_the_stacks(refused_stack, override, meant):
    error, _ = refused_stack("gce-t4", override)
    assert error.problem.endswith(f"did you mean {meant}?")
    assert error.fix.endswith(f"pulumi config set gemma4-t4:{meant} VALUE")
