"""The clamp's policy and plugin logic, without vLLM: a stand-in module with vLLM's launcher shape."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from turing_clamp import contract, plugin, policy, targets

from gemma4_t4 import catalog

FIXTURE = Path(__file__).parent.parent / "fixtures" / "fake_unified_attention.py"
T4 = targets.SM75_SHARED_LIMIT


@pytest.fixture
def fake_vllm(monkeypatch):
    spec = importlib.util.spec_from_file_location("fake_unified_attention", FIXTURE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(contract, "load_module", lambda: module)
    monkeypatch.setattr(plugin, "device_shared_limit", lambda: T4)
    return module


def launch(module, head, queries_per_kv, use_3d=False):
    module.unified_attention(module.FakeTensor((4, queries_per_kv, head)), num_kv_heads=1, use_3d=use_3d)
    return module.kernel_unified_attention_inner.launches[-1][1]


# --- policy ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("head,block_m,tile,measured", [
    # metadata.shared of the real kernel compiled for sm_75 (turing/NOTES.md, reference/turing-fit.md)
    (512, 16, 32, 98304), (512, 16, 16, 65536), (256, 16, 32, 49152), (512, 32, 16, 98304), (256, 16, 16, 32768),
])
def test_shared_memory_model_matches_the_compiled_kernel(head, block_m, tile, measured):
    assert policy.shared_bytes(head, 2, block_m, tile) == measured


def test_clamp_halves_only_what_does_not_fit():
    assert policy.clamp_tile(32, 512, 2, 16, T4) == 16
    assert policy.clamp_tile(32, 256, 2, 16, T4) == 32
    assert policy.clamp_tile(16, 512, 2, 16, T4) == 16
    assert policy.clamp_tile(64, 128, 2, 16, T4) == 64
    assert policy.clamp_tile(32, 512, 2, 16, 200 * 1024) == 32  # an H100-class limit changes nothing


def test_clamp_refuses_with_numbers_when_no_tile_fits():
    with pytest.raises(policy.ClampError, match=r"BLOCK_M 32, tile 16 needs 98,304 B .* allows 65,536 B"):
        policy.clamp_tile(32, 512, 2, policy.block_m_for(32), T4)


def test_block_m_mirrors_vllm_and_warps_widen_for_wide_heads():
    assert [policy.block_m_for(n) for n in (1, 8, 16, 17, 32)] == [16, 16, 16, 32, 32]
    assert policy.num_warps_for(512) == policy.num_warps_for(256) == 8
    assert policy.num_warps_for(128) is None


def test_catalog_reads_the_t4_limit_from_the_clamp_targets():
    assert catalog.TESLA_T4.max_shared_bytes_per_block == targets.SM75_SHARED_LIMIT
    assert catalog.TESLA_T4.compute_capability == targets.SM75


# --- plugin ---------------------------------------------------------------------------------------


def _register(module, monkeypatch, capability):
    monkeypatch.setattr(plugin, "_device_capability", lambda: capability)
    inner = module.kernel_unified_attention
    plugin.register()
    module.kernel_unified_attention_inner = inner
    return module


def test_on_turing_the_launch_fits_with_eight_warps(fake_vllm, monkeypatch):
    module = _register(fake_vllm, monkeypatch, (7, 5))
    wide = launch(module, 512, 8)
    assert (wide["TILE_SIZE"], wide["BLOCK_M"], wide["num_warps"]) == (16, 16, 8)
    sliding = launch(module, 256, 8)
    assert (sliding["TILE_SIZE"], sliding["num_warps"]) == (32, 8)
    decode = launch(module, 512, 8, use_3d=True)
    assert decode["TILE_SIZE"] == 16
    reduce_kwargs = module.reduce_segments.launches[-1][1]
    assert reduce_kwargs["TILE_SIZE"] == decode["TILE_SIZE"], "the segment reduce must see the same tile"


def test_on_turing_an_explicit_num_warps_from_vllm_is_kept(fake_vllm, monkeypatch):
    module = _register(fake_vllm, monkeypatch, (7, 5))
    kwargs = module.kernel_unified_attention.launch_kwargs(
        {"query_ptr": module.FakeTensor((1, 8, 512)), "TILE_SIZE": 16, "BLOCK_M": 16, "HEAD_SIZE_PADDED": 512,
         "num_warps": 4})
    assert kwargs["num_warps"] == 4


def test_on_turing_an_unfittable_launch_fails_loudly_before_triton(fake_vllm, monkeypatch):
    module = _register(fake_vllm, monkeypatch, (7, 5))
    with pytest.raises(policy.ClampError, match=r"32 query heads per KV head"):
        launch(module, 512, 32)
    assert module.kernel_unified_attention_inner.launches == []


@pytest.mark.parametrize("capability", [(8, 0), (8, 9), (9, 0), (12, 0), None])
def test_nothing_changes_on_ampere_and_newer_or_without_cuda(fake_vllm, monkeypatch, capability):
    before = dict(vars(fake_vllm))
    _register(fake_vllm, monkeypatch, capability)
    assert fake_vllm._get_tile_size is before["_get_tile_size"]
    assert fake_vllm.kernel_unified_attention is before["kernel_unified_attention"]
    assert launch(fake_vllm, 512, 8)["TILE_SIZE"] == 32 and "num_warps" not in launch(fake_vllm, 512, 8)


def test_apply_is_idempotent(fake_vllm, monkeypatch):
    module = _register(fake_vllm, monkeypatch, (7, 5))
    hooked = module._get_tile_size
    plugin.register()
    assert module._get_tile_size is hooked
    assert launch(module, 512, 8)["TILE_SIZE"] == 16


@pytest.mark.parametrize("mutate,missing", [
    (lambda m: delattr(m, "_get_tile_size"), "_get_tile_size() is gone"),
    (lambda m: setattr(m, "_get_tile_size", lambda head_size, element_size: 16), "no longer takes"),
    (lambda m: setattr(m.reduce_segments, "arg_names", ["HEAD_SIZE_PADDED"]), "reduce_segments no longer takes TILE_SIZE"),
    (lambda m: delattr(m, "kernel_unified_attention"), "kernel_unified_attention is gone"),
])
def test_a_vllm_that_no_longer_matches_fails_closed_naming_version_and_piece(fake_vllm, monkeypatch, mutate, missing):
    monkeypatch.setattr(contract, "vllm_version", lambda: "9.9.9")
    mutate(fake_vllm)
    monkeypatch.setattr(plugin, "_device_capability", lambda: (7, 5))
    with pytest.raises(policy.ClampError) as caught:
        plugin.register()
    assert "vLLM 9.9.9" in str(caught.value) and missing in str(caught.value)
    assert not getattr(fake_vllm, "_turing_clamp_applied", False)


def test_a_changed_launcher_body_fails_closed(tmp_path, monkeypatch):
    source = FIXTURE.read_text().replace("TILE_SIZE_DECODE = _get_tile_size(", "TILE_SIZE_DECODE = _pick_tile(")
    path = tmp_path / "changed.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("changed", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert contract.problems(module) == ["unified_attention() no longer contains `TILE_SIZE_DECODE = _get_tile_size(`"]


def test_applied_context_restores_the_module(fake_vllm):
    stock = fake_vllm._get_tile_size
    with plugin.applied(fake_vllm, lambda: T4):
        assert fake_vllm._get_tile_size is not stock
    assert fake_vllm._get_tile_size is stock and not hasattr(fake_vllm, "_turing_clamp_applied")


# --- tensor parallelism: the heads one rank holds ---------------------------------------------------


@pytest.mark.parametrize("heads,tp,per_rank", [
    ((16, 8), 2, (8, 4)), ((16, 8), 4, (4, 2)), ((16, 2), 4, (4, 1)), ((8, 1), 4, (2, 1)), ((8, 2), 1, (8, 2)),
])
def test_heads_split_over_ranks_and_kv_heads_replicate_below_one_per_rank(heads, tp, per_rank):
    assert targets.heads_per_rank(*heads, tp) == per_rank


@pytest.mark.parametrize("heads,tp,why", [
    ((14, 2), 4, "14 query heads do not split over 4"), ((8, 6), 4, "6 KV heads do not split"),
    ((12, 3), 2, "3 KV heads do not split over 2"), ((16, 3), 4, "cannot be replicated evenly"),
])
def test_shapes_vllm_refuses_are_refused(heads, tp, why):
    with pytest.raises(ValueError, match=why):
        targets.heads_per_rank(*heads, tp)


def test_the_clamps_gemma4_heads_are_the_catalogs_model_configs():
    """targets.GEMMA4_ATTENTION (what the fit checker compiles per rank) holds the head counts of
    every Gemma 4 config in the catalog, so a build the catalog serves is a build that was fitted."""
    seen = set()
    for model in catalog.MODELS.values():
        config = model.config
        sliding = (config["num_attention_heads"], config["num_key_value_heads"])
        full = (config["num_attention_heads"], config.get("num_global_key_value_heads", config["num_key_value_heads"]))
        seen.add(((config["head_dim"], sliding), (config["global_head_dim"], full)))
    fitted = {((256, by_head[256]), (512, by_head[512])) for by_head in targets.GEMMA4_ATTENTION.values()}
    assert seen == fitted


def test_every_per_rank_shape_is_a_fit_variant_on_every_path():
    from turing_clamp import fit

    compiled = {(v.head_size, v.query_heads, v.kv_heads, v.path) for v in fit.all_variants()}
    shapes = targets.per_rank_shapes()
    assert len(shapes) == 12 and all((*shape, path) in compiled for shape in shapes for path in fit.PATHS)
    assert shapes[(512, 4, 1)] == [("E2B", 2), ("E4B", 2), ("26B-A4B", 4)], "one kernel serves all three"
