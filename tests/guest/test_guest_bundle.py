"""The guest bundle applied on a running VM (cloudinit/scripts/guest_bundle.py): the plan's real user-data, written
into a folder standing for the VM's root, with systemd's side played by the test: each systemctl call is recorded,
and provisioning's state is what the test says it is, moved on as systemd would (a restart starts a run, the test
ends it). Booted for real in tests/guest/test_guest_boot.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from gemma4_t4 import clouds
from gemma4_t4.components.gce import guest as render

SCRIPTS = REPO / "cloudinit" / "scripts"
# The guest scripts import their neighbours as the folder they run from (python3 PATH puts it on sys.path).
sys.path.insert(0, str(SCRIPTS))


def user_data(*overrides: str) -> str:
    plan = clouds.offline_plan("gce-t4", clouds.stack_config("gce-t4", list(overrides), REPO))
    return plan.one("gcp:compute/instance:Instance").inputs["metadata"]["user-data"]


def edited(text: str, path: str, content: str | None) -> str:
    """TEXT with the file at PATH holding CONTENT (None: without that file), as a later release's bundle would."""
    config = yaml.safe_load(text)
    config["write_files"] = [dict(entry, content=content) if entry["path"] == path else entry
                             for entry in config["write_files"] if not (entry["path"] == path and content is None)]
    return "#cloud-config\n" + yaml.dump(config, Dumper=render._BlockStyleDumper, sort_keys=False, width=4096)


class Vm:
    """The module, its root in a folder, what it asked systemd for, and provisioning as systemd runs it."""

    def __init__(self, tmp_path: Path, monkeypatch):
        spec = importlib.util.spec_from_file_location("guest_bundle", SCRIPTS / "guest_bundle.py")
        self.module = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.root = tmp_path / "root"
        for name, value in (("ROOT", self.root), ("APPLIED", tmp_path / "applied.yaml"),
                            ("PENDING", tmp_path / "pending.json")):
            monkeypatch.setattr(module, name, str(value))
        self.calls: list[tuple[str, ...]] = []
        self.phases: list[list[str]] = []
        self.provision = ("active", "exited")  # the first boot's run ended long ago
        self.provisioned_us = 1
        monkeypatch.setattr(module, "systemctl", self._systemctl)
        monkeypatch.setattr(module, "unit_state", lambda unit: self.provision)
        monkeypatch.setattr(module, "active_since_us", lambda unit: self.provisioned_us)
        monkeypatch.setattr(module, "boot_id", lambda: "boot-1")
        monkeypatch.setattr(module.guest_attributes, "main", self.phases.append)

    def _systemctl(self, *args: str) -> int:
        self.calls.append(args)
        if args == ("restart", "--no-block", self.module.PROVISION_UNIT):
            self.provision = ("activating", "start")
        return 0

    def provisioning_ends(self, state: str = "active") -> None:
        """Provisioning's run ends (ACTIVE: done; failed: a failure it does not retry)."""
        self.provision = (state, "exited" if state == "active" else "failed")
        self.provisioned_us = 10**15 if state == "active" else self.provisioned_us

    def cloud_init(self, text: str) -> None:
        """The first boot: cloud-init wrote the bundle's files."""
        for path, (content, mode) in self.module.files_of(text).items():
            where = self.root / path.lstrip("/")
            where.parent.mkdir(parents=True, exist_ok=True)
            where.write_text(content)
            where.chmod(mode)

    def file(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def restarted(self) -> list[str]:
        return [call[-1] for call in self.calls if call[0] in ("restart", "try-restart")]


@pytest.fixture
def vm(tmp_path, monkeypatch):
    machine = Vm(tmp_path, monkeypatch)
    machine.cloud_init(user_data())
    machine.module.apply_once(user_data())
    return machine


def test_the_first_boots_bundle_changes_nothing(vm):
    assert [call for call in vm.calls if call[0] != "show"] == [] and vm.phases == [], "cloud-init wrote it"
    vm.module.apply_once(user_data())
    assert vm.calls == [] and not Path(vm.module.PENDING).exists()


def test_a_new_idle_stop_lands_in_guest_env_and_restarts_no_vllm(vm):
    vm.module.apply_once(user_data("idleStopMinutes=45"))
    assert "IDLE_STOP_MINUTES=45\n" in vm.file(render.ETC_DIR + "/guest.env").read_text()
    assert vm.phases[0][:2] == ["phase", "update"] and "guest.env" in vm.phases[0][2]
    units = yaml.safe_load(user_data())["runcmd"][1][2:]
    assert ("enable", *units) in vm.calls
    assert ("start", "--no-block", *[u for u in units if u not in (render.PROVISION_UNIT, render.VLLM_UNIT)]) \
        in vm.calls, "a unit a release adds runs now, not at the next boot"
    vm.provisioning_ends()
    assert vm.module.act_on_pending() is False
    assert vm.restarted() == [render.PROVISION_UNIT], "provisioning runs again (each step checks first); vLLM serves on"
    calls = len(vm.calls)
    vm.module.apply_once(user_data("idleStopMinutes=45"))
    assert len([c for c in vm.calls[calls:] if c[0] != "show"]) == 0, "the same bundle twice: nothing more"


def test_a_new_vllm_lock_restarts_vllm_only_once_provisioning_has_run_after_it(vm):
    vm.module.apply_once(user_data("vllmVersion=0.33.0"))
    assert "vllm==0.33.0" in vm.file(render.VLLM_LOCK).read_text()
    assert vm.restarted() == [render.PROVISION_UNIT]
    for _ in range(3):  # the new venv takes a while: each look of the watch loop finds it still running
        assert vm.module.act_on_pending() is True
    assert vm.restarted() == [render.PROVISION_UNIT]
    vm.provisioning_ends()
    assert vm.module.act_on_pending() is False
    assert vm.restarted() == [render.PROVISION_UNIT, render.VLLM_UNIT]


def test_a_provisioning_run_under_way_finishes_before_it_runs_again(vm):
    vm.provision = ("activating", "start")  # e.g. the first boot's driver build, when the user changed a value
    vm.module.apply_once(user_data("swapSizeGb=20"))
    assert vm.restarted() == [], "not stopped in the middle of its work"
    vm.provisioning_ends()
    vm.module.act_on_pending()
    assert vm.restarted() == [render.PROVISION_UNIT]


def test_a_provisioning_that_keeps_failing_does_not_hold_back_the_next_bundle(vm):
    """A new lock with a swap size the disk cannot hold: provisioning retries for ever (systemd's auto-restart), and
    vLLM waits for it. The corrected value still lands, and vLLM restarts once provisioning gets through."""
    vm.module.apply_once(user_data("vllmVersion=0.33.0", "swapSizeGb=200"))
    vm.provision = ("activating", "auto-restart")
    for _ in range(3):
        assert vm.module.act_on_pending() is True
    vm.module.apply_once(user_data("vllmVersion=0.33.0", "swapSizeGb=20"))
    assert "SWAP_SIZE_GB=20\n" in vm.file(render.ETC_DIR + "/guest.env").read_text()
    vm.module.act_on_pending()  # the corrected bundle's run: asked for at once (the failing one only waits to retry)
    vm.provisioning_ends()
    assert vm.module.act_on_pending() is False
    assert vm.restarted() == [render.PROVISION_UNIT, render.PROVISION_UNIT, render.VLLM_UNIT]


def test_provisioning_that_stops_for_good_leaves_vllm_on_its_venv_until_a_person_runs_it_again(vm):
    vm.module.apply_once(user_data("vllmVersion=0.33.0"))
    vm.provisioning_ends("failed")  # exit 3: the lock's files do not match it
    for _ in range(3):
        assert vm.module.act_on_pending() is True
    assert vm.restarted() == [render.PROVISION_UNIT], "vLLM was not restarted onto a venv that is not there"
    vm.provisioning_ends()  # `sudo systemctl restart gemma4-t4-provision` after the fix
    assert vm.module.act_on_pending() is False
    assert vm.restarted() == [render.PROVISION_UNIT, render.VLLM_UNIT]


def test_a_release_with_a_new_script_and_unit_reloads_systemd_and_restarts_what_runs_them(vm):
    old = user_data()
    serve, progress = f"{render.LIB_DIR}/serve.sh", f"{render.LIB_DIR}/progress.py"
    unit = f"{render.UNIT_DIR}/{render.SERVING_WATCH_UNIT}"
    new = old
    for path in (serve, progress, unit):
        new = edited(new, path, vm.file(path).read_text() + "# a later release\n")
    vm.module.apply_once(new)
    assert vm.file(serve).read_text().endswith("# a later release\n")
    assert ("daemon-reload",) in vm.calls
    assert vm.restarted() == [render.PROGRESS_UNIT, render.SERVING_WATCH_UNIT, render.PROVISION_UNIT]
    vm.provisioning_ends()
    vm.module.act_on_pending()
    assert vm.restarted()[-1] == render.VLLM_UNIT


def test_a_file_a_release_drops_is_removed_and_a_unit_disabled_first(vm):
    old = user_data()
    dropped_unit, dropped_script = f"{render.UNIT_DIR}/{render.SERVING_WATCH_UNIT}", f"{render.LIB_DIR}/serve.sh"
    vm.module.apply_once(edited(edited(old, dropped_unit, None), dropped_script, None))
    assert not vm.file(dropped_unit).exists() and not vm.file(dropped_script).exists()
    assert ("disable", "--now", render.SERVING_WATCH_UNIT) in vm.calls
    assert vm.calls.index(("disable", "--now", render.SERVING_WATCH_UNIT)) < vm.calls.index(("daemon-reload",))


def test_a_stop_after_the_writes_still_restarts_what_they_touch(vm):
    """The watcher stopped between writing the files and its next step (a restart of the unit, a crash): the next
    apply finds nothing to write, but the last bundle applied had another lock, so vLLM still restarts."""
    new = user_data("vllmVersion=0.33.0")
    vm.module.write_files(vm.module.files_of(new))  # written, never acted on
    vm.module.apply_once(new)
    vm.provisioning_ends()
    vm.module.act_on_pending()
    assert vm.restarted() == [render.PROVISION_UNIT, render.VLLM_UNIT]


def test_what_was_left_to_do_at_another_boot_is_void(vm, monkeypatch):
    vm.module.apply_once(user_data("vllmVersion=0.33.0"))
    monkeypatch.setattr(vm.module, "boot_id", lambda: "boot-2")  # the reboot provisions and starts vLLM anew
    assert vm.module.act_on_pending() is False
    assert vm.restarted() == [render.PROVISION_UNIT]


@pytest.mark.parametrize("value", ["#!/bin/bash\necho hi\n", "#cloud-config\nruncmd: []\n",
                                   "#cloud-config\nwrite_files:\n- path: ../etc/passwd\n  content: x\n"])
def test_a_value_that_is_not_a_bundle_writes_nothing(vm, value):
    vm.module.apply_once(value)
    assert [call for call in vm.calls if call[0] not in ("show",)] == [] and not (vm.root.parent / "etc").exists()
