"""The gce-t4 stack's resource graph, under Pulumi mocks, against the facts it must hold."""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import REPO, require_tool, run

from gemma4_t4 import catalog
from gemma4_t4.components.gce import guest as render
from gemma4_t4.components.model_facts import model_facts

INSTANCE = "gcp:compute/instance:Instance"
DISK = "gcp:compute/disk:Disk"
FIREWALL = "gcp:compute/firewall:Firewall"
COMPONENT = "gemma4-t4:index:GceT4Server"


def test_vm_is_an_n1_standard_2_with_one_t4_that_terminates_on_maintenance(run_stack):
    vm = run_stack("gce-t4").one(INSTANCE).inputs
    assert vm["machineType"] == "n1-standard-2"
    assert vm["zone"] == "us-west2-b"
    assert vm["guestAccelerators"] == [{"type": "nvidia-tesla-t4", "count": 1.0}]
    assert vm["scheduling"]["onHostMaintenance"] == "TERMINATE"
    assert vm["scheduling"]["automaticRestart"] is True
    assert vm["scheduling"]["provisioningModel"] == "STANDARD"


def test_boot_disk_is_debian_13_on_32_gb_pd_ssd(run_stack):
    boot = run_stack("gce-t4").one(INSTANCE).inputs["bootDisk"]
    # The image by name, the one the driver ran on (catalog pins: gce.image), not the debian-13 family.
    assert boot["initializeParams"] == {"image": "debian-cloud/debian-13-trixie-v20260609", "size": 32.0,
                                        "type": "pd-ssd"}
    assert boot["autoDelete"] is True


def test_data_disk_is_its_own_retained_pd_balanced_resource_attached_by_device_name(run_stack):
    plan = run_stack("gce-t4")
    disk = plan.one(DISK)
    assert disk.inputs["type"] == "pd-balanced" and disk.inputs["size"] == 250.0
    assert disk.options["retainOnDelete"] is True, "pulumi destroy must leave the checkpoints"
    vm = plan.one(INSTANCE)
    assert vm.inputs["attachedDisks"] == [{"source": disk.state["selfLink"], "deviceName": "gemma4-data"}]
    assert f"{DISK}::gemma4-t4-data" in vm.options["dependsOn"]
    # The disk attaches to one VM at a time: a replaced VM must go before its successor comes.
    assert vm.options["deleteBeforeReplace"] is True
    # Replacement follows the provider's ForceNew fields (metadata_startup_script names the guest's hash), not
    # the whole metadata: the serving values in it are updated in place.
    assert vm.options["replaceOnChanges"] == []


def test_cost_is_the_zones_regions_list_price_and_none_where_the_catalog_has_none(run_stack):
    central = catalog.GCE_PRICES["us-central1"]
    cost = run_stack("gce-t4", "zone=us-central1-a").outputs["cost_per_hour_usd"]
    floor = central["machine:n1-standard-2"].usd_per_hour + central["gpu:nvidia-tesla-t4"].usd_per_hour
    assert floor < cost < run_stack("gce-t4").outputs["cost_per_hour_usd"], "us-west2 lists higher than us-central1"
    assert run_stack("gce-t4", "zone=europe-west4-a").outputs["cost_per_hour_usd"] is None


def test_retain_data_disk_false_lets_destroy_delete_it(run_stack):
    plan = run_stack("gce-t4", "retainDataDisk=false")
    assert plan.one(DISK).options["retainOnDelete"] is False
    assert plan.outputs["billing_after_destroy_usd_per_month"] == 0.0


@pytest.mark.parametrize("retain", ["true", "false"])
def test_the_disk_carries_the_retain_flag_the_state_gets(run_stack, retain):
    """The label changes with the flag, so one step writes both: a later lookup reads what the state says."""
    disk = run_stack("gce-t4", f"retainDataDisk={retain}").one(DISK)
    assert disk.inputs["labels"]["gemma4-t4-retain-data-disk"] == retain
    assert disk.options["retainOnDelete"] is (retain == "true")


def test_secure_boot_is_off_so_the_unsigned_dkms_module_loads(run_stack):
    assert run_stack("gce-t4").one(INSTANCE).inputs["shieldedInstanceConfig"]["enableSecureBoot"] is False


def test_every_child_is_parented_to_the_component(run_stack):
    plan = run_stack("gce-t4")
    component = plan.one(COMPONENT)
    assert component.parent is None
    children = [r for r in plan.resources if r is not component]
    assert children and all(r.parent == f"{COMPONENT}::gemma4-t4" for r in children)


def test_outputs_give_the_target_a_tunnel_that_returns_the_disk_and_cost(run_stack):
    plan = run_stack("gce-t4")
    out, vm, disk = plan.outputs, plan.one(INSTANCE).state, plan.one(DISK).state
    assert out["cloud"] == "gce" and out["port"] == 8000
    assert out["target"] == {"instance": vm["name"], "zone": "us-west2-b", "project": vm["project"]}
    assert out["data_disk_name"] == disk["name"]
    assert out["connect_command"] == (f"gcloud compute ssh {vm['name']} --project {vm['project']} --zone us-west2-b "
                                      "--tunnel-through-iap -- -f -N -L 8000:127.0.0.1:8000")
    prices = catalog.GCE_PRICES["us-west2"]
    floor = prices["machine:n1-standard-2"].usd_per_hour + prices["gpu:nvidia-tesla-t4"].usd_per_hour
    assert floor < out["cost_per_hour_usd"] < floor + 0.1
    assert out["billing_after_destroy_usd_per_month"] == 250 * prices["disk:pd-balanced:gb-month"].usd_per_hour


def test_metadata_carries_user_data_the_bootstrap_and_os_login(run_stack):
    vm = run_stack("gce-t4").one(INSTANCE).inputs
    metadata = vm["metadata"]
    # The provider's metadata_startup_script, not metadata.startup-script: the provider refuses both. It is the
    # bootstrap alone, naming nothing of the user-data, so that a new user-data is applied on the running VM.
    assert "startup-script" not in metadata
    assert vm["metadataStartupScript"] == (REPO / "cloudinit" / "bootstrap.sh").read_text()
    assert metadata["enable-oslogin"] == "TRUE"
    assert metadata["enable-guest-attributes"] == "TRUE", "the guest publishes its boot's phase there"
    assert metadata["user-data"].startswith("#cloud-config\n")
    assert len(metadata["user-data"].encode()) < render.GCE_METADATA_VALUE_LIMIT


def test_rendered_user_data_passes_cloud_init_schema(run_stack, tmp_path):
    require_tool("cloud-init")
    path = tmp_path / "user-data.yaml"
    path.write_text(run_stack("gce-t4").one(INSTANCE).inputs["metadata"]["user-data"])
    result = run(["cloud-init", "schema", "--config-file", str(path)])
    assert result.returncode == 0, result.stdout + result.stderr
    # cloud-init 22.4 (Debian 12) says "Valid cloud-config: PATH", 25.x (Debian 13, the guest's) "Valid schema PATH".
    assert re.match(r"Valid (cloud-config|schema)\b", result.stdout), result.stdout
    assert "deprecat" not in (result.stdout + result.stderr).lower(), "a key the guest's cloud-init deprecates"


def _guest_file(plan, path: str) -> str:
    user_data = yaml.safe_load(plan.one(INSTANCE).inputs["metadata"]["user-data"])
    return next(f["content"] for f in user_data["write_files"] if f["path"] == path)


def _serving_env(plan) -> str:
    return plan.one(INSTANCE).inputs["metadata"][render.SERVING_METADATA_KEY]


def test_vllm_flags_come_from_the_serving_config(run_stack):
    plan = run_stack("gce-t4")
    env = _serving_env(plan)
    written = [f["path"] for f in yaml.safe_load(plan.one(INSTANCE).inputs["metadata"]["user-data"])["write_files"]]
    assert render.VLLM_ENV not in written, "a serving value in the user-data would replace the VM"
    args = next(line for line in env.splitlines() if line.startswith("VLLM_ARGS=")).split("=", 1)[1].split()
    assert args == ["--model", "google/gemma-4-E2B-it-qat-w4a16-ct",
                    "--served-model-name", "google/gemma-4-E2B-it-qat-w4a16-ct",
                    "--host", "127.0.0.1", "--port", "8000", "--dtype", "float16", "--max-model-len", "16384",
                    "--gpu-memory-utilization", "0.9", "--max-num-seqs", "8", "--tensor-parallel-size", "1",
                    "--language-model-only"]
    assert "METRICS_URL=http://127.0.0.1:8000/metrics\n" in env
    checkpoint = model_facts("google/gemma-4-E2B-it-qat-w4a16-ct", ask_hub=False).checkpoint_bytes
    assert checkpoint > 1e9 and f"CHECKPOINT_BYTES={checkpoint}\n" in env, "the download's size, for its progress"
    changed = _serving_env(run_stack("gce-t4", "maxModelLen=8192", "languageModelOnly=false"))
    assert "--max-model-len 8192" in changed and "--language-model-only" not in changed


def test_guest_settings_carry_the_pins_and_the_data_disk(run_stack):
    env = _guest_file(run_stack("gce-t4"), "/etc/gemma4-t4/guest.env")
    assert f"VLLM_LOCK={render.VLLM_LOCK}\n" in env
    assert f"DRIVER_BRANCH={catalog.PINS['nvidia.driver_branch']}\n" in env
    assert "DATA_DEVICE=/dev/disk/by-id/google-gemma4-data\n" in env
    assert "SWAP_SIZE_GB=16\n" in env
    assert "PYTHON=python3.13\n" in env


def test_the_guest_installs_from_the_lock_of_the_pinned_vllm(run_stack):
    lock = _guest_file(run_stack("gce-t4"), render.VLLM_LOCK)
    assert lock == (REPO / "cloudinit" / "locks" / "vllm-gce-0.30.0.txt").read_text()
    assert "\nvllm==0.30.0 \\\n" in lock and catalog.PINS["vllm.gce"] == "0.30.0"


def test_vllm_0_33_stays_selectable_with_its_own_lock(run_stack):
    lock = _guest_file(run_stack("gce-t4", "vllmVersion=0.33.0"), render.VLLM_LOCK)
    assert lock == (REPO / "cloudinit" / "locks" / "vllm-gce-0.33.0.txt").read_text()
    assert "\nvllm==0.33.0 \\\n" in lock


def test_a_vllm_without_a_lock_is_refused_at_preview(refused_stack):
    error, partial = refused_stack("gce-t4", "vllmVersion=0.34.0")
    assert error.key == "gemma4-t4:vllmVersion" and "'0.34.0' has no lock" in error.problem
    assert "0.30.0" in error.problem and "0.33.0" in error.problem
    assert error.fix == "pulumi config set gemma4-t4:vllmVersion 0.30.0"
    assert partial.resources == []


def test_the_clamp_source_ships_with_the_guest(run_stack):
    plan = run_stack("gce-t4")
    shipped = _guest_file(plan, f"{render.CLAMP_SRC}/turing_clamp/plugin.py")
    assert shipped == (REPO / "turing" / "turing_clamp" / "plugin.py").read_text()
    assert "vllm.general_plugins" in _guest_file(plan, f"{render.CLAMP_SRC}/pyproject.toml")


def test_stack_files_hold_only_what_differs_from_the_defaults_and_are_the_packaged_presets():
    from gemma4_t4 import clouds, project_file

    defaults = {key: spec["default"] for key, spec in project_file.section().items()}
    for cloud in clouds.CLOUDS.values():
        config = yaml.safe_load((REPO / f"Pulumi.{cloud.stack}.yaml").read_text())["config"]
        ours = {k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("gemma4-t4:")}
        assert all(str(value) != str(defaults[key]) for key, value in ours.items()), (cloud.stack, ours)
        # What `gemma4-t4 plan` uses without a checkout is what the stack file says.
        assert config == dict(cloud.preset), cloud.stack
    assert yaml.safe_load((REPO / "Pulumi.gce-t4.yaml").read_text())["config"] == {}
