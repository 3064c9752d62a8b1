"""`python -m gemma4_t4 plan`: the offline plan as a user runs it (no Pulumi CLI, no cloud)."""

from __future__ import annotations

import json
import os
import sys

import pytest
import yaml
from conftest import REPO, run

from gemma4_t4.core.stack_files import apply_override, load_stack_config

pytestmark = pytest.mark.standin


def plan_cli(*args: str):
    return run([sys.executable, "-m", "gemma4_t4", "plan", *args], cwd=REPO)


def test_json_has_the_documented_shape():
    result = plan_cli("gce-t4", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) == {"schema_version", "stack", "resources", "outputs", "running_usd_per_hour",
                        "running_usd_per_hour_range"}
    assert doc["schema_version"] == 1
    assert doc["stack"] == "gce-t4"
    assert doc["running_usd_per_hour"] == doc["outputs"]["cost_per_hour_usd"] > 0
    assert doc["running_usd_per_hour_range"] == [doc["running_usd_per_hour"]] * 2, "one VM: one price"
    for resource in doc["resources"]:
        assert {"type", "name", "parent", "inputs"} <= set(resource)
    vm = next(r for r in doc["resources"] if r["type"] == "gcp:compute/instance:Instance")
    assert vm["inputs"]["machineType"] == "n1-standard-2"  # engine names: camelCase


def test_human_plan_lists_resources_and_cost():
    result = plan_cli("gce-t4")
    assert result.returncode == 0, result.stderr
    assert "+ gcp:compute/instance:Instance  gemma4-t4" in result.stdout
    assert "memory plan (Tesla T4): 0.9 x 14.56 GiB = 13.11 GiB for vLLM" in result.stdout
    assert "KV cache 4.66 GiB" in result.stdout
    assert "estimated cost while running: $" in result.stdout


def test_human_plan_shows_the_sagemaker_stacks_tags_whole():
    """The endpoint's tags name the Pulumi organization (under the plan's mocks, a DIY backend's "organization"),
    project and stack: what tells two stacks named alike in one account apart."""
    result = plan_cli("sagemaker-t4")
    assert result.returncode == 0, result.stderr
    assert ('"gemma4-t4:organization": "organization", "gemma4-t4:project": "gemma4-t4", '
            '"gemma4-t4:stack": "sagemaker-t4"') in result.stdout


def test_human_plan_lists_the_cost_guards_and_what_one_off_can_cost():
    result = plan_cli("gce-t4")
    assert result.returncode == 0, result.stderr
    assert "cost guards (what stops a forgotten stack's bill):" in result.stdout
    assert "  idleStopMinutes 60: the VM stops itself after 60 min without a request" in result.stdout
    assert "  maxRunHours 24: GCE stops the VM after 24 h running" in result.stdout
    assert "OFF" not in result.stdout and "cost guard" not in result.stderr
    result = plan_cli("sagemaker-t4", "--config", "endpointTtl=off")
    assert result.returncode == 0, result.stderr
    assert "  endpointTtl OFF: nothing deletes the endpoint: it bills until `pulumi destroy`; can bill $17.66/day" \
        in result.stdout
    assert "cost guard endpointTtl is off" in result.stderr, "the program's warning, as `pulumi preview` shows it"


def test_human_plan_says_whether_the_models_revision_is_pinned():
    result = plan_cli("gce-t4")
    assert result.returncode == 0 and result.stderr == "", "at the defaults the plan warns of nothing"
    assert "model revision: the Hub's main of the default model google/gemma-4-E2B-it-qat-w4a16-ct" in result.stdout
    result = plan_cli("gce-t4", "--config", "model=google/gemma-4-E2B-it")
    assert result.returncode == 0, result.stderr
    assert ("model revision: not pinned: the Hub's main may change under the stack; set modelRevision to a commit"
            in result.stdout)
    assert "model revision not pinned" in result.stderr, "the program's warning, as `pulumi preview` shows it"
    commit = "0123456789abcdef0123456789abcdef01234567"
    result = plan_cli("sagemaker-t4", "--config", f"modelRevision={commit}")
    assert result.returncode == 0, result.stderr
    assert f"model revision: {commit} (a Hub commit)" in result.stdout and "not pinned" not in result.stderr


def test_config_override_and_dotted_path_apply_like_pulumi_config_set(tmp_path):
    result = plan_cli("gce-t4", "--json", "--config", "gemma4-t4:zone=us-central1-a",
                      "--config", "gemma4-t4:labels.team=ml", "--user-data", str(tmp_path / "ud.yaml"))
    assert result.returncode == 0, result.stderr
    vm = next(r for r in json.loads(result.stdout)["resources"] if r["type"] == "gcp:compute/instance:Instance")
    assert vm["inputs"]["zone"] == "us-central1-a"
    assert vm["inputs"]["labels"] == {"app": "gemma4-t4", "team": "ml"}
    assert yaml.safe_load((tmp_path / "ud.yaml").read_text())["write_files"]


def test_refused_config_exits_2_with_the_message():
    result = plan_cli("gce-t4", "--config", "gemma4-t4:dtype=bfloat16")
    assert result.returncode == 2
    assert "gemma4-t4:dtype" in result.stderr and "pulumi config set gemma4-t4:dtype float16" in result.stderr
    assert result.stdout == ""


def test_a_refusal_prints_the_key_as_typed_not_an_emoji():
    result = plan_cli("gce-t4", "--config", "cloud=aws")  # rich would print gemma4-t4:cloud: as "gemma4-t4☁"
    assert result.returncode == 2 and "gemma4-t4:cloud: unknown cloud 'aws'" in result.stderr, result.stderr


@pytest.mark.parametrize("stack,override", [
    ("gce-t4", "gemma4-t4:maxModelLen.x=1"),
    ("gce-t4", "gemma4-t4:model=google/gemma 4"),
    ("gce-t4", "gemma4-t4:maxModelLen=inf"),
    ("sagemaker-t4", "gemma4-t4:baseImage=docker.io/vllm/vllm-openai:v0.30.0"),
])
def test_what_once_ended_in_a_traceback_is_refused_with_exit_2(stack, override):
    result = plan_cli(stack, "--config", override)
    assert result.returncode == 2, result.stderr
    assert "refused: gemma4-t4:" in result.stderr and "fix: " in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_stack_names_the_known_ones():
    result = plan_cli("nope")
    assert result.returncode == 2 and "gce-t4" in result.stderr


def test_apply_override_nested_paths():
    config = {"gemma4-t4:labels": {}}
    apply_override(config, "labels.a.b=1")
    apply_override(config, "gemma4-t4:labels.c=2")
    assert config["gemma4-t4:labels"] == {"a": {"b": "1"}, "c": "2"}
    with pytest.raises(ValueError):
        apply_override(config, "no-equals-sign")


def test_defaults_come_from_pulumi_yaml_only(tmp_path):
    (tmp_path / "Pulumi.yaml").write_text(yaml.safe_dump({"config": {"a": {"type": "integer", "default": 3}}}))
    (tmp_path / "Pulumi.s.yaml").write_text(yaml.safe_dump({"config": {"gcp:project": "p"}}))
    assert load_stack_config("s", repo=tmp_path) == {"gemma4-t4:a": 3, "gcp:project": "p"}


def _json(command: str, stack: str, *config: str) -> dict:
    args = [a for c in config for a in ("--config", c)]
    result = run([sys.executable, "-m", "gemma4_t4", command, stack, "--json", *args], cwd=REPO)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize(("stack", "config"), [
    ("gce-t4", ("gemma4-t4:spot=true",)),
    ("sagemaker-t4", ("gemma4-t4:maxInstanceCount=3",)),
    ("gce-t4", ("gemma4-t4:zone=europe-west4-a",)),
    ("sagemaker-t4", ("aws:region=eu-west-1",)),
], ids=["spot", "autoscaling", "gce-europe", "sagemaker-europe"])
def test_cost_shows_what_plan_shows(stack, config):
    planned, costed = _json("plan", stack, *config), _json("cost", stack, *config)
    assert costed["running_usd_per_hour"] == planned["running_usd_per_hour"]
    assert costed["running_usd_per_hour_range"] == planned["running_usd_per_hour_range"]


def test_spot_is_cheaper_in_cost_and_plan_alike():
    on_demand, spot = _json("cost", "gce-t4"), _json("cost", "gce-t4", "gemma4-t4:spot=true")
    assert spot["running_usd_per_hour"] < on_demand["running_usd_per_hour"]
    assert any("Spot" in note for note in spot["notes"]) and not any("Spot" in n for n in on_demand["notes"])


def test_cost_prints_the_autoscaling_range_plan_prints():
    config = ("--config", "gemma4-t4:maxInstanceCount=3")
    planned = run([sys.executable, "-m", "gemma4_t4", "plan", "sagemaker-t4", *config], cwd=REPO).stdout
    costed = run([sys.executable, "-m", "gemma4_t4", "cost", "sagemaker-t4", *config], cwd=REPO,
                 env={**os.environ, "COLUMNS": "200"}).stdout
    low, high = _json("cost", "sagemaker-t4", "gemma4-t4:maxInstanceCount=3")["running_usd_per_hour_range"]
    assert low < high
    shown = f"${low:.4f}/h to ${high:.4f}/h, fewest to most instances"
    assert shown in planned and shown in costed


def test_outside_the_us_the_machine_is_priced_and_the_unknown_disks_leave_the_total_unknown():
    from gemma4_t4 import catalog

    assert "gpu:nvidia-tesla-t4" in catalog.GCE_PRICES["europe-west4"], "the T4 has a list price there"
    costed = _json("cost", "gce-t4", "gemma4-t4:zone=europe-west4-a")
    assert costed["running_usd_per_hour"] is None and costed["running_usd_per_hour_range"] is None
    assert all(disk["usd_per_month"] is None for disk in costed["disks"])


def test_outside_the_us_cost_gives_the_machine_and_t4_floor_and_names_the_unpriced_disks():
    """`zones` knows the machine's and the T4's price in europe-west4: `cost` shows it as a floor, never only `-`,
    and names what it leaves out."""
    from gemma4_t4 import clouds

    zone = "europe-west4-a"
    offer = next(o for o in clouds.t4_offers("gce") if o.location == zone)
    for extra, price in (((), offer.usd_per_hour), (("gemma4-t4:spot=true",), offer.spot_usd_per_hour)):
        costed = _json("cost", "gce-t4", f"gemma4-t4:zone={zone}", *extra)
        assert costed["running_usd_per_hour"] is None, "still unknown: a floor is not the price"
        assert costed["running_usd_per_hour_at_least"] == pytest.approx(price, abs=1e-4) and price > 0
        assert costed["unpriced"] == ["disk:pd-ssd:gb-month in europe-west4",
                                      "disk:pd-balanced:gb-month in europe-west4"]
        assert "machine and GPUs" in costed["at_least_covers"]
    text = run([sys.executable, "-m", "gemma4_t4", "cost", "gce-t4", "--config", f"gemma4-t4:zone={zone}"], cwd=REPO,
               env={**os.environ, "COLUMNS": "200"}).stdout
    assert f"≥ ${offer.usd_per_hour:.4f}/h + disks, price unknown" in text
    assert "no list price for disk:pd-ssd:gb-month in europe-west4" in text and "$0.00" not in text
    assert _json("cost", "gce-t4")["running_usd_per_hour_at_least"] is None, "a whole price needs no floor"


def _project(tmp_path, stack_file: str):
    import shutil

    shutil.copy(REPO / "Pulumi.yaml", tmp_path)
    (tmp_path / "Pulumi.gce-t4.yaml").write_text(stack_file)
    return run([sys.executable, "-m", "gemma4_t4", "cost", "gce-t4", "--project-dir", str(tmp_path), "--json"],
               cwd=REPO)


def test_a_mistyped_top_level_key_of_the_stack_file_is_warned_with_the_fix(tmp_path):
    """Pulumi reads five top-level keys and ignores the rest silently: `conifg:` would plan every default."""
    result = _project(tmp_path, "conifg:\n  gemma4-t4:zone: europe-west4-a\n  gemma4-t4:maxModelLen: 8192\n")
    assert result.returncode == 0, result.stderr
    warning = next(line for line in result.stderr.splitlines() if "conifg" in line)
    assert warning.startswith("warning: Pulumi.gce-t4.yaml: top-level key 'conifg' is not one Pulumi reads")
    assert "its 2 settings are ignored" in warning and "did you mean config:? rename it" in warning
    clean = _project(tmp_path, "secretsprovider: passphrase\nconfig:\n  gemma4-t4:zone: us-central1-a\n")
    assert clean.returncode == 0 and "warning" not in clean.stderr, clean.stderr


def test_a_config_that_is_not_a_mapping_is_refused_in_one_whole_sentence(tmp_path):
    result = _project(tmp_path, "config:\n  - gemma4-t4:zone: us-central1-a\n")
    assert result.returncode == 2
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and line.endswith("(as `pulumi config set gemma4-t4:KEY VALUE` writes it)")
    assert "its config: is a list, not a mapping" in line
    assert json.loads(result.stdout)["error"]["message"] == line.split(": ", 1)[1]


@pytest.mark.parametrize("change", ["idleStopMinutes=30", "swapSizeGb=20", "vllmVersion=0.33.0", "maxModelLen=8192"])
def test_a_guard_a_guest_setting_or_a_serving_value_says_the_vm_is_updated_in_place(change):
    result = plan_cli("gce-t4", "--config", change)
    assert result.returncode == 0, result.stderr
    said = result.stdout.split("against the stack file as it stands", 1)[1]
    assert "gcp:compute/instance:Instance::gemma4-t4: update in place (metadata)" in said
    assert "replace" not in said


def test_a_new_zone_says_the_vm_and_its_disk_are_replaced_and_what_that_costs():
    result = plan_cli("gce-t4", "--config", "zone=us-central1-a")
    assert result.returncode == 0, result.stderr
    said = result.stdout.split("against the stack file as it stands", 1)[1]
    assert ("gcp:compute/instance:Instance::gemma4-t4: replace (networkInterfaces, zone): the VM is deleted and "
            "created again: a first boot of ~16-28 min") in " ".join(said.split())
    assert "gcp:compute/disk:Disk::gemma4-t4-data: replace (zone): a new data disk" in said
    doc = json.loads(plan_cli("gce-t4", "--config", "zone=us-central1-a", "--json").stdout)
    vm = next(c for c in doc["changes"] if c["label"] == "gcp:compute/instance:Instance::gemma4-t4")
    assert vm["action"] == "replace" and vm["keys"] == ["networkInterfaces", "zone"]


def test_the_same_config_changes_nothing():
    result = plan_cli("gce-t4", "--config", "zone=us-west2-b")
    assert result.returncode == 0, result.stderr
    assert "against the stack file as it stands (with zone=us-west2-b):\n  nothing changes" in result.stdout
