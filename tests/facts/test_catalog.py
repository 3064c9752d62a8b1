"""The facts layer: the catalog and the config error. Each fact carries where it came from, the
facts agree with one another, and the layer stands on nothing of the project above it."""

from __future__ import annotations

import ast
import math
import re
import subprocess
import sys

import pytest

from gemma4_t4 import catalog
from gemma4_t4.errors import ConfigError

# A source names evidence (docs/evidence.md), a documentation page or a date: "[sagemaker-t4-article]: ...",
# "AWS list price, ..., 2026".
SOURCE = re.compile(r"\[[a-z0-9-]+\]|\b20\d\d\b|https?://")


def _all_prices() -> list[tuple[str, catalog.Price]]:
    prices = [(f"gce {region} {item}", p) for region, items in catalog.GCE_PRICES.items() for item, p in items.items()]
    prices += [(f"sagemaker {region} {kind}", p) for region, kinds in catalog.SAGEMAKER_REGIONAL_PRICES.items()
               for kind, p in kinds.items()]
    prices += [(f"aws {item}", p) for item, p in catalog.AWS_PRICES.items()]
    return prices


@pytest.mark.parametrize(("what", "price"), _all_prices(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_price_is_a_positive_figure_with_its_source(what, price):
    assert math.isfinite(price.usd_per_hour) and price.usd_per_hour > 0, what
    assert SOURCE.search(price.source), f"{what}: {price.source!r} names no evidence, page or date"


@pytest.mark.parametrize("model", catalog.MODELS.values(), ids=lambda m: m.hf_id)
def test_every_model_has_its_source_and_a_config_that_adds_up(model):
    config = model.config
    assert SOURCE.search(model.source), model.source
    assert len(config["layer_types"]) == config["num_hidden_layers"]
    assert set(config["layer_types"]) == {"sliding_attention", "full_attention"}
    assert config["num_attention_heads"] % config["num_key_value_heads"] == 0, "GQA needs whole groups"
    assert config["num_kv_shared_layers"] < config["num_hidden_layers"]
    assert model.disk_bytes > 0
    assert catalog.find_model(model.hf_id.upper()) is model, "the Hub matches repo ids in any case"


def test_the_t4_is_turing_without_bfloat16_and_below_the_stock_kernels_ask():
    t4 = catalog.TESLA_T4
    assert t4.compute_capability == (7, 5) and not t4.supports_bfloat16 and not t4.supports_fp8
    assert "nvidia-tesla-t4" in catalog.NO_BFLOAT16_GPUS and t4.name in catalog.NO_BFLOAT16_GPUS
    # [sagemaker-t4-article]: stock vLLM's head-512 prefill asks 98,304 B against "Hardware limit: 65536".
    assert t4.max_shared_bytes_per_block == 65536 < 98304
    assert t4.memory_bytes < catalog.T4_CARD_MIB * 2**20, "CUDA reports less than the card's memory"


def test_t4_zones_are_zone_names_and_every_priced_region_has_some():
    for zone in catalog.GCE_T4_ZONES:
        assert re.fullmatch(r"[a-z]+-[a-z]+\d+-[a-f]", zone), zone
    regions = {catalog.region_of(z) for z in catalog.GCE_T4_ZONES}
    assert set(catalog.GCE_PRICES) <= regions


def test_every_t4_region_has_the_machine_and_the_t4_on_demand_and_spot_from_the_price_list():
    for region in {catalog.region_of(z) for z in catalog.GCE_T4_ZONES}:
        prices = catalog.GCE_PRICES[region]
        for item in ("machine:n1-standard-2", "gpu:nvidia-tesla-t4"):
            on_demand, spot = prices[item], prices[catalog.spot_item(item)]
            assert 0 < spot.usd_per_hour < on_demand.usd_per_hour, f"{region} {item}: Spot is the cheaper SKU"
            assert catalog.GCE_PRICE_LIST in on_demand.source and "on demand" in on_demand.source
            assert catalog.GCE_PRICE_LIST in spot.source and "Spot" in spot.source


def test_larger_n1_shapes_scale_both_prices_with_their_vcpus():
    prices = catalog.GCE_PRICES["europe-west4"]
    for suffix in ("", ":spot"):
        two = prices[f"machine:n1-standard-2{suffix}"].usd_per_hour
        assert prices[f"machine:n1-standard-4{suffix}"].usd_per_hour == pytest.approx(2 * two)
        assert prices[f"machine:n1-standard-8{suffix}"].usd_per_hour == pytest.approx(4 * two)


def test_a_disk_price_the_sources_lack_stays_unknown():
    """The price list has no disks: only the regions with a transcribed disk price have one."""
    priced = {region for region, items in catalog.GCE_PRICES.items() if "disk:pd-balanced:gb-month" in items}
    assert priced == {"us-central1", "us-west2"}


def test_the_clamp_is_verified_for_exactly_the_pinned_vllms():
    pinned = {catalog.PINS["vllm.gce"], catalog.PINS["vllm.sagemaker"], *catalog.GCE_VLLM_VERSIONS}
    assert set(catalog.CLAMP_VERIFIED_VLLM) == pinned
    assert catalog.PINS["sagemaker.ami"] == "al2023-ami-sagemaker-inference-gpu-4-1"
    assert catalog.PINS["nvidia.driver_branch"] == "615"


def _catalog_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gemma4_t4.catalog", *args], capture_output=True, text=True)


def test_shell_and_make_read_the_same_pins():
    got = _catalog_cli("get", "vllm.gce")
    assert got.returncode == 0 and got.stdout == catalog.PINS["vllm.gce"] + "\n"
    matrix = _catalog_cli("clamp-matrix").stdout.split()
    assert matrix == [f"{v}:{t}" for v, t in catalog.CLAMP_VERIFIED_VLLM.items()]
    unknown = _catalog_cli("get", "vllm.gcee")
    assert unknown.returncode == 2 and "vllm.gce" in unknown.stderr, "a typo lists the keys"


def test_the_facts_layer_imports_nothing_of_the_project_above_it():
    probe = ("import sys, gemma4_t4.catalog, gemma4_t4.errors; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('gemma4_t4', 'components')))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    modules = ast.literal_eval(loaded)
    assert all(m == "gemma4_t4" or m.startswith(("gemma4_t4.catalog", "gemma4_t4.errors")) for m in modules), modules


@pytest.mark.parametrize(("key", "qualified"), [
    ("maxModelLen", "gemma4-t4:maxModelLen"),
    ("aws:region", "aws:region"),
    ("labels.aws:owner", "gemma4-t4:labels.aws:owner"),  # a label named aws:owner, not an aws: key
    ("gcp:zone", "gcp:zone"),
])
def test_a_config_error_names_the_qualified_key_the_problem_and_the_fix(key, qualified):
    err = ConfigError(key, "is wrong", "pulumi config set X")
    assert err.key == qualified
    assert str(err) == f"{qualified}: is wrong\n  fix: pulumi config set X"
    assert isinstance(err, ValueError)
