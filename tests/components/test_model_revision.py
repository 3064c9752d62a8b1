"""The model's Hub revision: modelRevision, else the catalog's commit, reaches vLLM on both clouds; a bad value is
refused at preview; the plan and the preview say when nothing pins it."""

from __future__ import annotations

import dataclasses
import json
import logging

import pytest
import yaml

from gemma4_t4 import catalog
from gemma4_t4.catalog import models
from gemma4_t4.cli import plan as plan_cli
from gemma4_t4.components.gce import guest as render
from gemma4_t4.components.model_facts import Unsized, read_hub
from gemma4_t4.core.plan_lines import revision_line

INSTANCE = "gcp:compute/instance:Instance"
MODEL = "aws:sagemaker/model:Model"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
DEFAULT_MODEL = "google/gemma-4-E2B-it-qat-w4a16-ct"
CHOSEN = "google/gemma-4-E2B-it"  # a catalog model the user names (no Hub needed to size it)


def _vllm_args(plan) -> list[str]:
    env = plan.one(INSTANCE).inputs["metadata"][render.SERVING_METADATA_KEY]
    return next(line for line in env.splitlines() if line.startswith("VLLM_ARGS=")).split("=", 1)[1].split()


def _revision_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and ("revision" in r.getMessage() or "modelRevision" in r.getMessage())]


def test_the_revision_reaches_vllm_on_gce(run_stack):
    args = _vllm_args(run_stack("gce-t4", f"modelRevision={COMMIT}"))
    assert args[args.index("--revision") + 1] == COMMIT
    assert "--revision" not in _vllm_args(run_stack("gce-t4"))


def test_the_revision_reaches_vllm_on_sagemaker(run_stack):
    env = run_stack("sagemaker-t4", f"modelRevision={COMMIT}").one(MODEL).inputs["primaryContainer"]["environment"]
    assert env["SM_VLLM_REVISION"] == COMMIT  # the container's entrypoint: SM_VLLM_REVISION -> --revision
    unpinned = run_stack("sagemaker-t4").one(MODEL).inputs["primaryContainer"]["environment"]
    assert "SM_VLLM_REVISION" not in unpinned


def test_the_catalogs_commit_is_used_when_the_setting_is_left_out(run_stack, monkeypatch):
    known = catalog.find_model(DEFAULT_MODEL)
    assert known is not None
    monkeypatch.setitem(models.MODELS, DEFAULT_MODEL.lower(), dataclasses.replace(known, revision=COMMIT))
    plan = run_stack("gce-t4")
    args = _vllm_args(plan)
    assert args[args.index("--revision") + 1] == COMMIT
    assert plan.outputs["model_revision"] == COMMIT
    other = "fedcba9876543210fedcba9876543210fedcba98"
    args = _vllm_args(run_stack("gce-t4", f"modelRevision={other}"))
    assert args[args.index("--revision") + 1] == other, "the setting wins over the catalog"


@pytest.mark.parametrize("value", ["main branch", "-main", "a..b", "v1/", "x" * 300])
def test_a_revision_that_is_not_one_is_refused_naming_the_key(refused_stack, value):
    error, _ = refused_stack("gce-t4", f"modelRevision={value}")
    assert error.setting == "modelRevision"
    assert "not a Hugging Face Hub revision" in error.problem


def test_a_revision_for_a_checkpoint_on_the_server_is_refused(refused_stack):
    error, _ = refused_stack("sagemaker-t4", "model=/data/checkpoint", "allowUnsizedModel=true",
                             f"modelRevision={COMMIT}")
    assert error.setting == "modelRevision" and "directory on the server" in error.problem


def test_at_the_defaults_the_plan_says_the_revision_once_as_a_fact_and_nothing_warns(run_stack, caplog, capsys):
    """The catalog cites no Hub commit for the default model: the user chose nothing, so nothing warns."""
    caplog.set_level(logging.WARNING)
    plan = run_stack("gce-t4")
    assert _revision_warnings(caplog) == []
    assert plan.outputs["model_revision"] == ""
    assert revision_line(plan) == (f"model revision: the Hub's main of the default model {DEFAULT_MODEL} (no source "
                                   "the catalog cites gives a commit for it; set modelRevision to a commit to pin it)")
    plan_cli.show(plan)
    assert revision_line(plan) in capsys.readouterr().out.splitlines()


def test_a_chosen_model_unpinned_is_warned_once_and_shown_in_the_plan(run_stack, caplog, capsys):
    caplog.set_level(logging.WARNING)
    plan = run_stack("gce-t4", f"model={CHOSEN}")
    assert _revision_warnings(caplog) == [
        f"model revision not pinned: the Hub's main of {CHOSEN} may change under the stack; "
        "set modelRevision to a commit"]
    assert plan.outputs["model_revision"] == ""
    assert revision_line(plan) == ("model revision: not pinned: the Hub's main may change under the stack; set "
                                   "modelRevision to a commit")
    plan_cli.show(plan)
    assert revision_line(plan) in capsys.readouterr().out.splitlines()


def test_a_commit_is_not_warned_and_is_shown_in_the_plan(run_stack, caplog):
    caplog.set_level(logging.WARNING)
    plan = run_stack("sagemaker-t4", f"modelRevision={COMMIT}")
    assert _revision_warnings(caplog) == []
    assert plan.outputs["model_revision"] == COMMIT
    assert revision_line(plan) == f"model revision: {COMMIT} (a Hub commit)"


def test_a_branch_is_warned_as_movable(run_stack, caplog):
    caplog.set_level(logging.WARNING)
    plan = run_stack("gce-t4", "modelRevision=v1.0")
    assert _revision_warnings(caplog) == [
        "modelRevision v1.0 is a branch or tag, which the model's owner can move; set modelRevision to a commit "
        "(40 hex digits) to pin it"]
    assert "can move" in (revision_line(plan) or "")


def test_a_checkpoint_on_the_server_has_no_revision_to_pin(run_stack, caplog):
    caplog.set_level(logging.WARNING)
    plan = run_stack("gce-t4", "model=/data/checkpoint", "allowUnsizedModel=true")
    assert _revision_warnings(caplog) == []
    assert "model_revision" not in plan.outputs and revision_line(plan) is None


def test_the_hub_is_read_at_the_revision_not_from_mains_cache(monkeypatch, tmp_path):
    """Facts cached for main are not another revision's: that one is read from the Hub (here: offline, so not)."""
    monkeypatch.setenv("GEMMA4_T4_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    record = {"id": "m/x", "sha": "a" * 40, "read_at": "2026-12-05", "config": {},
              "safetensors": {"parameters": {"BF16": 1000}, "total": 1000}}
    (tmp_path / "hub-models").mkdir()
    (tmp_path / "hub-models" / "m--x.json").write_text(json.dumps(record))
    assert read_hub("m/x").parameters == {"BF16": 1000}
    with pytest.raises(Unsized, match="HF_HUB_OFFLINE"):
        read_hub("m/x", COMMIT)


def test_pulumi_yaml_declares_the_setting_as_optional_text():
    from conftest import REPO

    config = yaml.safe_load((REPO / "Pulumi.yaml").read_text())["config"]
    assert config["modelRevision"]["type"] == "string"
