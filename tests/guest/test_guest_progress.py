"""The guest's progress (guest attributes) and its watched serving values, against the metadata server
stand-in the boot test uses (tests/guest/net.py, its sources cited there), here on this machine's loopback."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO
from guest import net

from gemma4_t4 import catalog

SCRIPTS = REPO / "cloudinit" / "scripts"
# The guest scripts import their neighbours as the folder they run from (python3 PATH puts it on sys.path).
sys.path.insert(0, str(SCRIPTS))


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def metadata_server(tmp_path):
    """(base URL, state dir, set(key, value)) of a metadata server stand-in on 127.0.0.1."""
    attributes = {"enable-guest-attributes": "TRUE", "gemma4-t4-serving": "VLLM_ARGS=--model m --max-model-len 256\n"}
    config = {"state_dir": str(tmp_path), "metadata": {"instance": {"attributes": attributes},
                                                      "project": {"attributes": {}}}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    server = net.Server(("127.0.0.1", 0), net.handler_for(net.World(config), "metadata"))
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def set_attribute(key: str, value: str | None) -> None:
        current = dict(attributes)
        path = tmp_path / "instance-attributes.json"
        if path.exists():
            current = json.loads(path.read_text())
        if value is None:
            current.pop(key, None)
        else:
            current[key] = value
        path.write_text(json.dumps(current))

    yield f"http://127.0.0.1:{server.server_address[1]}/computeMetadata/v1/", tmp_path, set_attribute
    server.shutdown()


@pytest.fixture
def attrs(tmp_path, monkeypatch):
    module = _load("guest_attributes")
    monkeypatch.setattr(module, "STATE_FILE", str(tmp_path / "phase" / "phase.json"))
    monkeypatch.setattr(module, "PUT_SPACING_S", 0)
    return module


# --- the phases and their history -----------------------------------------------------------------


def test_history_continues_through_the_driver_reboot_and_restarts_on_a_later_boot(attrs):
    state: dict = {}
    for at, phase in enumerate(["provision", "driver", "vllm-install", "reboot", "provision", "vllm-install",
                                "loading", "serving"]):
        attrs.record_phase(state, phase, "", 1000 + at)
    assert attrs.attributes(state)["history"] == ("provision@1000 driver@1001 vllm-install@1002 reboot@1003 "
                                                  "provision@1004 vllm-install@1005 loading@1006 serving@1007")
    attrs.record_phase(state, "loading", "", 2000)  # vLLM restarted with new serving values
    attrs.record_phase(state, "serving", "", 2001)
    assert attrs.attributes(state)["history"].endswith("serving@1007 loading@2000 serving@2001")
    attrs.record_phase(state, "provision", "a", 3000)  # the next boot of a VM that served
    attrs.record_phase(state, "provision", "the same phase: only its detail", 3001)
    assert attrs.attributes(state) == {"phase": "provision", "detail": "the same phase: only its detail",
                                       "history": "provision@3000"}
    with pytest.raises(ValueError, match="unknown phase"):
        attrs.record_phase(state, "downloading", "", 3002)


def test_an_update_in_place_keeps_its_history_when_the_old_vllm_is_said_serving_before_provisioning(attrs):
    """The bundle records `update`; the progress unit, restarted with it, sees the old vLLM healthy and says `serving`
    before provisioning starts again (a race the boot test met): provisioning continues the update's history."""
    state: dict = {}
    for at, phase in enumerate(("provision", "loading", "serving", "update", "serving", "provision", "loading",
                                "serving")):
        attrs.record_phase(state, phase, "", 1000 + at)
    assert attrs.attributes(state)["history"] == ("provision@1000 loading@1001 serving@1002 update@1003 serving@1004 "
                                                  "provision@1005 loading@1006 serving@1007")
    attrs.record_phase(state, "provision", "", 2000)  # a later boot, after the update served
    assert attrs.attributes(state)["history"] == "provision@2000"


def test_a_boot_that_keeps_failing_keeps_how_it_began_and_its_latest_phases(attrs):
    state: dict = {}
    phases = ["provision", "driver", "vllm-install", "reboot"] + ["provision", "driver", "retrying"] * 30
    for at, phase in enumerate(phases):
        attrs.record_phase(state, phase, "", at)
    history = attrs.attributes(state)["history"].split()
    assert len(history) == attrs.HISTORY_MAX
    assert history[:4] == ["provision@0", "driver@1", "vllm-install@2", "reboot@3"]
    assert history[-1] == f"retrying@{len(phases) - 1}"


def test_a_detail_is_one_bounded_line(attrs):
    state: dict = {}
    attrs.record_phase(state, "failed", "step 'nvidia driver' (exit 100)\n  Fix: " + "x" * 1000, 1)
    assert "\n" not in state["detail"] and len(state["detail"]) == attrs.DETAIL_MAX


def test_writes_stay_within_the_documented_rate(attrs):
    """10 queries a minute per VM at most (Google's guest attributes page): a new phase (3 keys) always finds
    room, and a download's byte counts never use it up."""
    published: dict = {}
    wanted = {"phase": "model-download", "detail": "0.1 of 8.3 GB", "history": "model-download@0"}
    puts: list[float] = []
    now = 0.0
    for second in range(600):
        now = float(second)
        if second % 5 == 0:
            wanted = {**wanted, "detail": f"{second / 100:.1f} of 8.3 GB"}
        if second == 300:
            wanted = {"phase": "loading", "detail": "loading", "history": "model-download@0 loading@300"}
        for key in attrs.due(published, wanted, puts, now):
            published[key] = wanted[key]
            puts.append(now)
        if second == 300:
            assert published == wanted, "a new phase is published at once"
    assert max(sum(1 for t in puts if start <= t < start + 60) for start in range(600)) <= attrs.PUTS_PER_MINUTE
    assert len([t for t in puts if t < 300]) >= 8, "the download's bytes are still shown"


def test_publish_writes_the_changed_keys_to_the_metadata_server(attrs, metadata_server, monkeypatch):
    base, state_dir, _set_attribute = metadata_server
    monkeypatch.setattr(attrs, "URL", base + "instance/guest-attributes/gemma4-t4/")
    branch = catalog.PINS["nvidia.driver_branch"]
    assert attrs.main(["phase", "driver", "NVIDIA", "driver", branch]) == 0
    assert sorted(attrs.publish(time.time())) == ["detail", "history", "phase"]
    stored = json.loads((state_dir / "guest-attributes.json").read_text())["gemma4-t4"]
    assert stored["phase"] == "driver" and stored["detail"] == f"NVIDIA driver {branch}"
    assert stored["history"].startswith("driver@")
    assert attrs.publish(time.time()) == [], "nothing changed, nothing written"
    with urlopen_flavored(base + "instance/guest-attributes/gemma4-t4/phase") as answer:
        assert answer.read() == b"driver"


def test_without_enable_guest_attributes_nothing_fails(attrs, metadata_server, monkeypatch, capsys):
    base, state_dir, set_attribute = metadata_server
    set_attribute("enable-guest-attributes", None)
    monkeypatch.setattr(attrs, "URL", base + "instance/guest-attributes/gemma4-t4/")
    attrs.main(["phase", "provision"])
    assert attrs.publish(time.time()) == []
    assert "403" in capsys.readouterr().err
    assert not (state_dir / "guest-attributes.json").exists()


def test_an_unreachable_metadata_server_costs_nothing_but_the_display(attrs, monkeypatch):
    monkeypatch.setattr(attrs, "URL", "http://127.0.0.1:9/computeMetadata/v1/instance/guest-attributes/gemma4-t4/")
    assert attrs.main(["phase", "provision"]) == 0
    assert attrs.publish(time.time()) == []


def urlopen_flavored(url: str):
    import urllib.request

    return urllib.request.urlopen(urllib.request.Request(url, headers={"Metadata-Flavor": "Google"}), timeout=5)


# --- vLLM's phases ---------------------------------------------------------------------------------


def _blob(repo: Path, name: str, size: int) -> None:
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    with (repo / "blobs" / name).open("wb") as f:
        f.truncate(size)


@pytest.fixture
def progress(tmp_path, monkeypatch, attrs):
    module = _load("progress")
    monkeypatch.setattr(module, "guest_attributes", attrs)
    env = tmp_path / "vllm.env"
    env.write_text(f"VLLM_ARGS=--model google/gemma-4-E2B-it --port 8001 --max-model-len 8192\n"
                   f"HF_HOME={tmp_path}/hf\nCHECKPOINT_BYTES=10000000000\n")
    monkeypatch.setattr(module, "VLLM_ENV", str(env))
    units = {module.PROVISION_UNIT: {"ActiveState": "active", "SubState": "exited"},
             module.VLLM_UNIT: {"ActiveState": "activating", "SubState": "start-pre"}}
    monkeypatch.setattr(module, "unit_state", lambda unit: units[unit])
    health = {"ok": False}
    monkeypatch.setattr(module, "healthy", lambda port: port == "8001" and health["ok"])
    monkeypatch.setattr(module, "last_line", lambda unit: "gemma4-vllm preflight: nvidia-smi does not answer")
    monkeypatch.setattr(module, "REFUSED", str(tmp_path / "gemma4-vllm" / "refused"))
    return module, units, health, tmp_path / "hf" / "hub" / "models--google--gemma-4-E2B-it"


def test_vllm_phases_from_preflight_to_download_bytes_to_serving(progress):
    module, units, health, repo = progress
    watch = module.Watch()
    units[module.PROVISION_UNIT]["ActiveState"] = "activating"
    assert watch.phase() is None, "provisioning records its own phases"
    units[module.PROVISION_UNIT]["ActiveState"] = "active"
    assert watch.phase()[0] == "loading"  # the preflight
    units[module.VLLM_UNIT].update(ActiveState="activating", SubState="auto-restart", NRestarts="2")
    phase, detail = watch.phase()
    assert phase == "retrying" and "nvidia-smi does not answer" in detail and "journalctl -u gemma4-vllm" in detail
    assert "(attempt 3;" in detail, "systemd's count of the unit's restarts, plus this one"
    units[module.VLLM_UNIT].update(ActiveState="activating", SubState="start-pre")
    assert watch.phase() == (phase, detail), "its retry (the preflight again) is still the failure, not a new phase"
    units[module.VLLM_UNIT].update(ActiveState="active", SubState="running")
    _blob(repo, "aaa", 3_100_000_000)
    _blob(repo, "bbb.incomplete", 0)
    assert watch.phase() == ("model-download", "google/gemma-4-E2B-it: 3.1 of 10.0 GB")
    (repo / "blobs" / "bbb.incomplete").unlink()
    _blob(repo, "bbb", 2_000_000_000)  # between two files: none is partial, the bytes still grow
    assert watch.phase() == ("model-download", "google/gemma-4-E2B-it: 5.1 of 10.0 GB")
    _blob(repo, "ccc", 3_900_000_000)
    assert watch.phase()[0] == "model-download"
    assert watch.phase()[0] == "loading", "no partial file and no growth: done downloading"
    health["ok"] = True
    assert watch.phase() == ("serving", "google/gemma-4-E2B-it, max-model-len 8192")


def test_a_refusal_no_retry_heals_is_failed_and_a_later_pass_clears_it(progress):
    """preflight.sh writes its verdict for what a retry cannot change (here: a kernel that does not fit sm_75);
    the phase is then `failed` with that reason, which `gemma4-t4 wait` ends on. A serving change that fits
    (the preflight passes and removes the verdict) brings vLLM up, and the phase follows."""
    module, units, health, _repo = progress
    refused = Path(module.REFUSED)
    refused.parent.mkdir()
    refused.write_text("a Gemma 4 attention kernel does not fit sm_75 with the clamp; refusing to start\n")
    watch = module.Watch()
    units[module.VLLM_UNIT].update(ActiveState="activating", SubState="auto-restart", NRestarts="0")
    phase, detail = watch.phase()
    assert phase == "failed" and "does not fit sm_75" in detail and "not healed by a retry" in detail
    units[module.VLLM_UNIT].update(ActiveState="activating", SubState="start-pre")
    assert watch.phase() == (phase, detail), "the preflight running again keeps the failure until vLLM runs"
    refused.unlink()
    units[module.VLLM_UNIT].update(ActiveState="active", SubState="running")
    assert watch.phase()[0] == "loading"
    health["ok"] = True
    assert watch.phase()[0] == "serving"


def test_vllm_serving_on_after_provisioning_stopped_for_good_is_still_said(progress):
    """An update in place whose new lock pip refuses: provisioning stops (failed), vLLM serves on from its old venv.
    The phase follows vLLM again, so that a later serving change is watched as loading, then serving."""
    module, units, health, _repo = progress
    watch = module.Watch()
    units[module.PROVISION_UNIT]["ActiveState"] = "failed"
    units[module.VLLM_UNIT].update(ActiveState="activating", SubState="auto-restart")
    assert watch.phase() is None, "not running: provisioning's own `failed` stands"
    units[module.VLLM_UNIT].update(ActiveState="active", SubState="running")
    assert watch.phase()[0] == "loading"
    health["ok"] = True
    assert watch.phase()[0] == "serving"


def test_a_model_on_the_data_disk_is_never_downloading(progress):
    module, units, _health, _repo = progress
    Path(module.VLLM_ENV).write_text("VLLM_ARGS=--model /opt1/cache/models/tiny --port 8001\n")
    units[module.VLLM_UNIT].update(ActiveState="active", SubState="running")
    assert module.Watch().phase() == ("loading", "loading /opt1/cache/models/tiny: weights, compile, CUDA graphs")


def test_a_tick_records_and_publishes(progress, metadata_server, monkeypatch):
    module, _units, health, _repo = progress
    base, state_dir, _ = metadata_server
    monkeypatch.setattr(module.guest_attributes, "URL", base + "instance/guest-attributes/gemma4-t4/")
    health["ok"] = True
    module.tick(module.Watch(), time.time())
    stored = json.loads((state_dir / "guest-attributes.json").read_text())["gemma4-t4"]
    assert stored["phase"] == "serving" and stored["history"].startswith("serving@")


# --- the serving values ----------------------------------------------------------------------------


@pytest.fixture
def serving(tmp_path, monkeypatch, metadata_server):
    module = _load("serving_config")
    base, _, set_attribute = metadata_server
    monkeypatch.setattr(module, "VLLM_ENV", str(tmp_path / "etc" / "vllm.env"))
    restarts: list[float] = []
    monkeypatch.setattr(module, "restart_vllm", lambda: restarts.append(time.time()))
    return module, base + "instance/attributes/gemma4-t4-serving", set_attribute, restarts


def test_fetch_writes_the_values_and_keeps_the_last_ones_without_an_answer(serving):
    module, url, _, _ = serving
    assert module.fetch(url) == 0
    assert Path(module.VLLM_ENV).read_text() == "VLLM_ARGS=--model m --max-model-len 256\n"
    assert oct(Path(module.VLLM_ENV).stat().st_mode & 0o777) == "0o600", "it may hold vLLM's API key"
    assert module.fetch("http://127.0.0.1:9/none", attempts=2, pause_s=0) == 0, "the last values on disk stand"
    assert Path(module.VLLM_ENV).read_text() == "VLLM_ARGS=--model m --max-model-len 256\n"


def test_fetch_without_the_key_and_without_values_on_disk_fails_with_the_fix(serving, capsys):
    module, url, set_attribute, _ = serving
    set_attribute("gemma4-t4-serving", None)
    assert module.fetch(url) == 1
    assert "run `pulumi up`" in capsys.readouterr().out


def test_watch_restarts_vllm_once_per_change_and_not_for_the_same_value(serving):
    module, url, set_attribute, restarts = serving
    module.fetch(url)
    threading.Thread(target=module.watch, args=(url, 2), daemon=True).start()
    time.sleep(1.5)
    assert restarts == [], "the value vLLM starts with is no change"
    set_attribute("gemma4-t4-serving", "VLLM_ARGS=--model m --max-model-len 128\n")
    deadline = time.monotonic() + 10
    while not restarts and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(restarts) == 1 and "--max-model-len 128" in Path(module.VLLM_ENV).read_text()
    set_attribute("enable-oslogin", "TRUE")  # another key: this value's ETag stays
    time.sleep(3)
    assert len(restarts) == 1
