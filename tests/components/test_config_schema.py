"""The stack config's schema: Pulumi.yaml mirrors it, booleans are strict, keys are the project's
and the stack's own, secrets stay secret, and each cloud's component takes its one Settings class."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from conftest import REPO
from pydantic import ValidationError

from gemma4_t4 import clouds, generate, project_file
from gemma4_t4.clouds.stack_config import config_keys, stack_settings
from gemma4_t4.components.config import GceT4ServerSettings, SageMakerT4EndpointSettings, keys_of
from gemma4_t4.core import plan as plan_mod
from gemma4_t4.errors import ConfigError

SETTINGS = {"gce-t4": GceT4ServerSettings, "sagemaker-t4": SageMakerT4EndpointSettings}


class Loaded(dict):
    """The Args the stack program builds its component from, by attribute."""

    __getattr__ = dict.__getitem__


def _load(stack: str, *overrides: str, secret_keys: frozenset[str] = frozenset()):
    config = clouds.stack_config(stack, overrides, REPO)
    cloud, args = stack_settings({k: plan_mod._as_config_string(v) for k, v in config.items()}, clouds.CLOUDS,
                                 secret_keys, secret=lambda key: f"<secret {key}>")
    settings = cloud.settings.model_validate(args)
    return Loaded({name: getattr(settings, name) for name in type(settings).model_fields})


def test_pulumi_yaml_declares_every_key_with_the_schemas_type_default_and_description():
    text = (REPO / "Pulumi.yaml").read_text()
    declared = yaml.safe_load(text)["config"]
    expected = project_file.section()
    assert list(declared) == list(expected), "Pulumi.yaml must list the schema's keys, in its order: `make generate`"
    for key, spec in expected.items():
        assert declared[key] == spec, f"{key}: Pulumi.yaml says {declared[key]}, the schema {spec}: `make generate`"
        assert spec["description"], f"{key} has no description"
    committed = json.loads((REPO / "components" / "schema.json").read_text())
    assert generate.with_config_section(text, committed) == text, "Pulumi.yaml's config section, as laid out: `make generate`"


def test_each_stack_file_plans_to_its_components_settings():
    gce, sagemaker = _load("gce-t4"), _load("sagemaker-t4")
    assert gce.zone == "us-west2-b" and gce.size_from_hub is True, "the stack program asks the Hub"
    assert sagemaker.region == "us-east-2"
    assert sagemaker.max_model_len == 8192 and sagemaker.instance_type == "ml.g4dn.xlarge"


def test_each_components_args_are_its_settings():
    """The public Args (a TypedDict, what the schema is made from) and the Settings (the rules) name the
    same settings: the one source of rules covers every argument."""
    from gemma4_t4.components import GceT4ServerArgs, SageMakerT4EndpointArgs

    for args, settings in ((GceT4ServerArgs, GceT4ServerSettings), (SageMakerT4EndpointArgs,
                                                                      SageMakerT4EndpointSettings)):
        assert args.__required_keys__ | args.__optional_keys__ == set(settings.model_fields), args.__name__


BOOLEAN_KEYS = sorted({key for model in SETTINGS.values() for key, default in config_keys(model).items()
                       if isinstance(default, bool)})


@pytest.mark.parametrize("key", BOOLEAN_KEYS)
@pytest.mark.parametrize("text", ["maybe", "yes", "no", "1", "0", "on", "off", "", "ture", "t"])
def test_a_boolean_is_true_or_false_and_nothing_else(key, text):
    """Pulumi's own boolean getter takes true or false: "maybe" or "yes" must be refused with the
    key, not read as a guess."""
    stack = "gce-t4" if key in keys_of(GceT4ServerSettings) else "sagemaker-t4"
    with pytest.raises(ConfigError) as caught:
        _load(stack, f"{key}={text}")
    assert caught.value.key == f"gemma4-t4:{key}" and "expected true or false" in str(caught.value)


@pytest.mark.parametrize("text,value", [("true", True), ("false", False), ("True", True), ("FALSE", False)])
def test_true_and_false_in_any_case_are_booleans(text, value):
    assert _load("gce-t4", f"spot={text}").spot is value


def test_another_clouds_key_left_at_its_default_is_harmless():
    # Pulumi hands the program every key of Pulumi.yaml: defaults of the other cloud are always there.
    assert _load("gce-t4", "instanceType=", "maxInstanceCount=0", "keepImages=false").zone == "us-west2-b"


@pytest.mark.parametrize("stack", ["gce-t4", "sagemaker-t4"])
def test_a_secret_hf_token_reaches_the_args_as_pulumi_gives_it(stack):
    args = _load(stack, "hfToken=AAAB", secret_keys=frozenset({"gemma4-t4:hfToken"}))
    assert args.hf_token == "<secret hfToken>"
    assert _load(stack).hf_token is None


def test_settings_are_typed_python_objects_that_check_themselves():
    settings = GceT4ServerSettings(machine_type="n1-standard-4", max_run_hours=8)
    assert settings.region == "us-west2" and settings.machine_type == "n1-standard-4"
    assert settings.max_model_len == 16384
    with pytest.raises(ValidationError, match="does not sell T4s"):
        GceT4ServerSettings(zone="us-west2-a")
    with pytest.raises(ValidationError, match="is not a GCE zone"):
        GceT4ServerSettings.model_validate({**settings.model_dump(), "zone": "x"})
    with pytest.raises(ValidationError):  # frozen: a component's inputs do not change under it
        settings.zone = "us-central1-a"  # type: ignore[misc]


def test_half_is_float16():
    assert _load("gce-t4", "dtype=half").dtype == "float16"


README_SET = re.compile(r"pulumi config set (--secret |--path )?gemma4-t4:(\w[\w.]*) ([^\s`&]+)")
README_FLAG = re.compile(r"--config gemma4-t4:(\w[\w.]*)=(\S+)")
PLACEHOLDER = re.compile(r"^[A-Z_]+$|\.\.\.$")


def _readme_examples() -> list[tuple[str, str, bool]]:
    """(key, value, secret) of every `pulumi config set` and `--config` example the README and
    docs/ give, but the one they show being refused and placeholders such as ZONE."""
    text = "\n".join(path.read_text() for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])
    examples = [(key, value, bool(flag and "secret" in flag)) for flag, key, value in README_SET.findall(text)]
    examples += [(key, value, False) for key, value in README_FLAG.findall(text)]
    refused = {("dtype", "bfloat16")}
    return [(k, v, s) for k, v, s in examples if (s or not PLACEHOLDER.search(v)) and (k, v) not in refused]


def test_the_readme_gives_examples():
    assert len(_readme_examples()) >= 4


@pytest.mark.parametrize("key,value,secret", _readme_examples())
def test_every_config_the_readme_shows_plans(run_stack, key, value, secret, tmp_path):
    name = key.split(".")[0]
    stacks = [s for s, model in SETTINGS.items() if name in keys_of(model)]
    for stack in stacks:
        if secret:
            config = clouds.stack_config(stack, (), REPO)
            config[f"gemma4-t4:{key}"] = {"secure": "AAABAGVuY3J5cHRlZA=="}
            plan = clouds.offline_plan(stack, config)
        else:
            plan = run_stack(stack, f"{key}={value}")
        assert plan.outputs["cloud"] == ("gce" if stack == "gce-t4" else "sagemaker")
