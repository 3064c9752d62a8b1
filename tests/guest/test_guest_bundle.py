"""The guest bundle applied on a running VM (cloudinit/scripts/guest_bundle.py): the plan's real user-data, written
into a folder standing for the VM's root, with systemd's answers recorded (systemctl is the VM's; here each call is
recorded and provisioning's state is what the test says). Booted for real in tests/guest/test_guest_boot.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from gemma4_t4 import clouds
from gemma4_t4.components.gce import guest as render

SCRIPTS = REPO / "cloudinit" / "scripts"


def user_data(*overrides: str) -> str:
    plan = clouds.offline_plan("gce-t4", clouds.stack_config("gce-t4", list(overrides), REPO))
    return plan.one("gcp:compute/instance:Instance").inputs["metadata"]["user-data"]


def edited(text: str, path: str, content: str) -> str:
    """TEXT with the file at PATH holding CONTENT, as a later release's bundle would."""
    config = yaml.safe_load(text)
    for entry in config["write_files"]:
        if entry["path"] == path:
            entry["content"] = content
    return "#cloud-config\n" + yaml.dump(config, Dumper=render._BlockStyleDumper, sort_keys=False, width=4096)


class Vm:
    """The module, its root in a folder, and what it asked systemd for."""

    def __init__(self, tmp_path: Path, monkeypatch):
        spec = importlib.util.spec_from_file_location("guest_bundle", SCRIPTS / "guest_bundle.py")
        self.module = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.root = tmp_path / "root"
        monkeypatch.setattr(module, "ROOT", str(self.root))
        monkeypatch.setattr(module, "APPLIED", str(tmp_path / "applied.yaml"))
        self.calls: list[tuple[str, ...]] = []
        self.phases: list[list[str]] = []
        self.provisioning = ["active"]  # what `systemctl show` says after each restart, in turn
        monkeypatch.setattr(module, "systemctl", lambda *args: self.calls.append(args) or 0)
        monkeypatch.setattr(module, "unit_state", self._state)
        monkeypatch.setattr(module.guest_attributes, "main", self.phases.append)
        monkeypatch.setattr(module.time, "sleep", lambda s: None)

    def _state(self, unit: str) -> tuple[str, str]:
        assert unit == self.module.PROVISION_UNIT
        if not any(call[:2] == ("restart", unit) for call in self.calls):
            return ("active", "exited")  # the first boot's run ended long ago
        return (self.provisioning.pop(0) if len(self.provisioning) > 1 else self.provisioning[0], "")

    def cloud_init(self, text: str) -> None:
        """The first boot: cloud-init wrote the bundle's files."""
        for path, (content, mode) in self.module.files_of(text).items():
            where = self.root / path.lstrip("/")
            where.parent.mkdir(parents=True, exist_ok=True)
            where.write_text(content)
            where.chmod(mode)

    def file(self, path: str) -> str:
        return (self.root / path.lstrip("/")).read_text()

    def restarted(self) -> list[str]:
        return [call[-1] for call in self.calls if call[0] in ("restart", "try-restart")]


@pytest.fixture
def vm(tmp_path, monkeypatch):
    return Vm(tmp_path, monkeypatch)


def test_the_first_boots_bundle_changes_nothing(vm):
    text = user_data()
    vm.cloud_init(text)
    vm.module.apply_once(text)
    assert vm.calls == [] and vm.phases == [], "cloud-init already wrote it: nothing to write or restart"
    vm.module.apply_once(text)
    assert vm.calls == []


def test_a_new_idle_stop_lands_in_guest_env_and_restarts_no_vllm(vm):
    vm.cloud_init(user_data())
    vm.module.apply_once(user_data())
    vm.module.apply_once(user_data("idleStopMinutes=45"))
    assert "IDLE_STOP_MINUTES=45\n" in vm.file(render.ETC_DIR + "/guest.env")
    assert vm.restarted() == [render.PROVISION_UNIT], "provisioning runs again (each step checks first); vLLM serves on"
    assert vm.phases[0][:2] == ["phase", "update"] and "guest.env" in vm.phases[0][2]
    assert ("enable", *[u for u in yaml.safe_load(user_data())["runcmd"][1][2:]]) in vm.calls
    calls = len(vm.calls)
    vm.module.apply_once(user_data("idleStopMinutes=45"))
    assert len(vm.calls) == calls, "the same bundle twice: nothing more"


def test_a_new_swap_size_runs_provisioning_and_restarts_no_vllm(vm):
    vm.cloud_init(user_data())
    vm.module.apply_once(user_data())
    vm.module.apply_once(user_data("swapSizeGb=20"))
    assert "SWAP_SIZE_GB=20\n" in vm.file(render.ETC_DIR + "/guest.env")
    assert vm.restarted() == [render.PROVISION_UNIT]


def test_a_new_vllm_lock_restarts_vllm_once_provisioning_installed_it(vm):
    vm.cloud_init(user_data())
    vm.module.apply_once(user_data())
    vm.provisioning = ["activating", "active"]  # the new venv takes a while; a retried failure is waited through
    vm.module.apply_once(user_data("vllmVersion=0.33.0"))
    assert "vllm==0.33.0" in vm.file(render.VLLM_LOCK)
    assert vm.restarted() == [render.PROVISION_UNIT, render.VLLM_UNIT]


def test_a_release_with_a_new_script_and_unit_reloads_systemd_and_restarts_what_runs_them(vm):
    old = user_data()
    vm.cloud_init(old)
    vm.module.apply_once(old)
    serve = f"{render.LIB_DIR}/serve.sh"
    progress = f"{render.LIB_DIR}/progress.py"
    unit = f"{render.UNIT_DIR}/{render.PROGRESS_UNIT}"
    new = edited(edited(edited(old, serve, vm.file(serve) + "# a later release\n"), progress,
                        vm.file(progress) + "# a later release\n"), unit, vm.file(unit) + "# a later release\n")
    vm.module.apply_once(new)
    assert vm.file(serve).endswith("# a later release\n")
    assert ("daemon-reload",) in vm.calls
    assert vm.restarted() == [render.PROGRESS_UNIT, render.PROVISION_UNIT, render.VLLM_UNIT]


def test_a_stop_after_the_writes_still_restarts_what_they_touch(vm, monkeypatch):
    """The watcher stopped between writing the files and restarting vLLM (a restart of the unit, a crash): the
    next apply finds nothing to write, but the last bundle applied had another lock, so vLLM still restarts."""
    vm.cloud_init(user_data())
    vm.module.apply_once(user_data())
    new = user_data("vllmVersion=0.33.0")
    vm.module.write_files(vm.module.files_of(new))  # written, never acted on
    vm.module.apply_once(new)
    assert vm.restarted() == [render.PROVISION_UNIT, render.VLLM_UNIT]


def test_provisioning_that_gives_up_leaves_vllm_serving_the_old_venv(vm):
    vm.cloud_init(user_data())
    vm.module.apply_once(user_data())
    vm.provisioning = ["activating", "failed"]  # exit 3: the lock's files do not match it
    vm.module.apply_once(user_data("vllmVersion=0.33.0"))
    assert vm.restarted() == [render.PROVISION_UNIT], "vLLM was not restarted onto a venv that is not there"


@pytest.mark.parametrize("value", ["#!/bin/bash\necho hi\n", "#cloud-config\nruncmd: []\n",
                                   "#cloud-config\nwrite_files:\n- path: ../etc/passwd\n  content: x\n"])
def test_a_value_that_is_not_a_bundle_writes_nothing(vm, value):
    vm.cloud_init(user_data())
    vm.module.apply_once(user_data())
    vm.module.apply_once(value)
    assert vm.calls == [] and not (vm.root.parent / "etc").exists()
