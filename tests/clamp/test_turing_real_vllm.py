"""The clamp and the fit checker against the real vLLM wheels of both pinned versions.

Each pinned vLLM lives in its own virtualenv under .fit/ (`make fit-env`: the wheel without its
GPU dependencies, CPU torch, the Triton that vLLM's torch pins). Tests run their checks there
as subprocesses. CI sets GEMMA4_T4_REQUIRE_FIT=1, so a missing environment fails there."""

from __future__ import annotations

import json
import os
import textwrap

import pytest
from conftest import REPO, run

from gemma4_t4 import catalog

VERSIONS = sorted(catalog.CLAMP_VERIFIED_VLLM)


def fit_python(version: str) -> str:
    python = REPO / ".fit" / f"vllm-{version}" / "bin" / "python"
    if not python.exists():
        message = f"no fit environment for vLLM {version}: run `make fit-env`"
        if os.environ.get("GEMMA4_T4_REQUIRE_FIT") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return str(python)


def in_fit_env(version: str, code: str, **env: str):
    return run([fit_python(version), "-c", textwrap.dedent(code)], cwd="/tmp",
               env={**os.environ, "CUDA_VISIBLE_DEVICES": "", **env})


@pytest.fixture(scope="module", params=VERSIONS)
def clamped_report(request, tmp_path_factory):
    version = request.param
    result = run([fit_python(version), "-m", "turing_clamp", "fit", "--json", "--strict"], cwd="/tmp",
                 env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    return version, result


def test_every_clamped_variant_fits_sm75_without_spills(clamped_report):
    version, result = clamped_report
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["vllm"] == version and report["triton"] == catalog.CLAMP_VERIFIED_VLLM[version]
    assert report["fits"] and report["spill_free"] and not report["refused"]
    # every head, ratio and path on one KV head, the 6 per-rank shapes those do not cover (8/2, 16/8,
    # 8/4, 4/2 at head 256; 8/2, 16/2 at head 512) on every path, plus the reduce of each 3D decode
    assert len(report["variants"]) == (2 * 5 + 6) * 3 + (2 * 5 + 6)
    assert max(v["shared_bytes"] for v in report["variants"]) == 65536
    wide = [v for v in report["variants"] if v["head_size"] == 512 and v["kernel"] == "kernel_unified_attention"]
    assert {(v["tile_size"], v["num_warps"]) for v in wide} == {(16, 8)}


def test_every_rank_of_every_build_at_tp_1_2_4_fits_without_spills(clamped_report):
    """What each T4 launches when a build is split over 1, 2 or 4 of them: its own query and KV
    heads (KV heads replicated where there are fewer than ranks), compiled on every path."""
    _, result = clamped_report
    rows = {(t["build"], t["tensor_parallel_size"], t["head_size"]): t for t in json.loads(result.stdout)
            ["tensor_parallel"]}
    assert set(rows) == {(b, tp, h) for b in ("E2B", "E4B", "26B-A4B") for tp in (1, 2, 4) for h in (256, 512)}
    assert all(t["kernels"] == 4 and t["fits"] and t["spill_free"] and t["spill_bytes"] == 0 and
               t["shared_bytes"] <= 65536 for t in rows.values())
    heads = {key: (t["query_heads"], t["kv_heads"]) for key, t in rows.items()}
    assert heads[("26B-A4B", 1, 512)] == (16, 2) and heads[("26B-A4B", 2, 512)] == (8, 1)
    assert heads[("26B-A4B", 4, 512)] == (4, 1), "2 global KV heads over 4 ranks: each rank holds a replica"
    assert heads[("26B-A4B", 4, 256)] == (4, 2) and heads[("E2B", 4, 256)] == (2, 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_stock_vllm_does_not_fit_at_head_512_as_measured(version):
    """vLLM's own parameters: the figures of the issue's table (shared bytes are exact)."""
    result = in_fit_env(version, """
        import json
        from turing_clamp import fit
        cases = [fit.Variant(512, 8, "prefill-2d"), fit.Variant(256, 8, "prefill-2d"), fit.Variant(512, 8, "decode-3d")]
        print(json.dumps(fit.build_report(clamped=False, variants=cases)))
    """)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    rows = {(v["head_size"], v["path"], v["kernel"]): v for v in report["variants"]}
    wide = rows[(512, "prefill-2d", "kernel_unified_attention")]
    assert (wide["tile_size"], wide["block_m"], wide["num_warps"]) == (32, 16, 4)
    assert wide["shared_bytes"] == 98304 and not wide["fits"]
    assert wide["spill_store_bytes"] > 0
    assert rows[(256, "prefill-2d", "kernel_unified_attention")]["shared_bytes"] == 49152
    decode = rows[(512, "decode-3d", "kernel_unified_attention")]
    assert decode["shared_bytes"] == 65536 and decode["spill_store_bytes"] > 0
    assert not report["fits"]


@pytest.mark.parametrize("version", VERSIONS)
def test_plugin_is_registered_and_check_passes(version):
    result = run([fit_python(version), "-m", "turing_clamp", "check"], cwd="/tmp")
    assert result.returncode == 0, result.stderr
    assert f"vLLM {version}" in result.stdout
    excluded = run([fit_python(version), "-m", "turing_clamp", "check"], cwd="/tmp",
                   env={**os.environ, "VLLM_PLUGINS": "someone_else"})
    assert excluded.returncode == 1 and "excludes" in excluded.stderr


@pytest.mark.parametrize("version", VERSIONS)
def test_plugin_clamps_the_real_module_on_turing_and_leaves_it_alone_on_ampere(version):
    result = in_fit_env(version, """
        from turing_clamp import contract, plugin
        module = contract.load_module()
        stock = (module._get_tile_size, module.kernel_unified_attention)
        plugin._device_capability = lambda: (8, 0)
        plugin.register()
        assert (module._get_tile_size, module.kernel_unified_attention) == stock, "changed on sm_80"
        plugin._device_capability = lambda: (7, 5)
        plugin.device_shared_limit = lambda: 65536
        plugin.register()
        print(module._get_tile_size(512, 0, 2, True), module._get_tile_size(256, 512, 2, True),
              module._get_tile_size(512, 0, 2, False), type(module.kernel_unified_attention).__name__)
    """)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["16", "32", "16", "ClampedKernel"]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_vllm_whose_launcher_changed_makes_clamp_and_checker_fail_closed(version):
    result = in_fit_env(version, """
        import sys, types
        from turing_clamp import contract, fit, plugin, policy
        real = contract.load_module()
        source = open(real.__file__).read().replace("_get_tile_size", "_pick_tile_size")
        changed = types.ModuleType(contract.MODULE)
        changed.__file__ = real.__file__
        exec(compile(source, real.__file__, "exec"), changed.__dict__)
        sys.modules[contract.MODULE] = changed
        plugin._device_capability = lambda: (7, 5)
        try:
            plugin.register()
            print("CLAMP SILENTLY PASSED")
        except policy.ClampError as err:
            print("clamp refused:", err)
        print("fit exit", fit.main(["--json"]))
    """)
    assert "CLAMP SILENTLY PASSED" not in result.stdout
    assert f"clamp refused: vLLM {version}" in result.stdout and "_get_tile_size() is gone" in result.stdout
    assert "fit exit 1" in result.stdout
    assert f"vLLM {version}" in result.stderr and "Refusing to run unclamped" in result.stderr


@pytest.mark.parametrize("version", VERSIONS)
def test_every_ranks_heads_compute_attention_right_in_tritons_interpreter(version, tmp_path):
    """vLLM's real kernel and launcher, with the clamp's T4 launch parameters, for the heads each
    rank holds at tensor parallel 1, 2 and 4, run by Triton's interpreter on the CPU against a
    float32 reference (causal, the 512-token window, replicated KV heads, paged KV): the arithmetic
    a T4 would do, not its speed (shared memory is the fit checker's). Budget: ~1 min a version."""
    out = tmp_path / "numerics.json"
    result = run([fit_python(version), str(REPO / "turing" / "gpu" / "numerics.py"), "--version", version,
                  "--cases", "per-rank", "--seeds", "1", "--interpret", "--short", "--out", str(out)], cwd="/tmp")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    report = json.loads(out.read_text())
    assert report["device"] == "Triton interpreter (CPU)" and report["all_ok"] and report["worst_rel_err"] < 1e-3
    assert len(report["cases"]) == 12 * 3, "every per-rank shape on every path"
    wide = [c for c in report["cases"] if c["case"].startswith("head 512")]
    assert {(c["launch"]["TILE_SIZE"], c["launch"]["BLOCK_M"], c["launch"]["num_warps"]) for c in wide} == {(16, 16, 8)}
