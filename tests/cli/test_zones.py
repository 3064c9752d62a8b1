"""`gemma4-t4 zones`: where T4s are on both clouds with the hourly list price, offline, cheapest first."""

from __future__ import annotations

import json
import os
import sys

import pytest
from conftest import REPO, run

from gemma4_t4 import catalog


def zones(*args: str):
    # No cloud credentials and no network: the command answers from the catalog alone.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GOOGLE_", "CLOUDSDK_"))}
    return run([sys.executable, "-m", "gemma4_t4", "zones", *args], cwd=REPO,
               env={**env, "COLUMNS": "200", "AWS_CONFIG_FILE": "/nonexistent", "HTTPS_PROXY": "http://127.0.0.1:9"})


def _offers(*args: str) -> list[dict]:
    result = zones("--json", *args)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema_version"] == 1
    return doc["offers"]


def test_every_t4_zone_and_priced_sagemaker_region_is_listed_cheapest_first():
    offers = _offers()
    assert {o["location"] for o in offers if o["cloud"] == "gce"} == set(catalog.GCE_T4_ZONES)
    assert {o["location"] for o in offers if o["cloud"] == "sagemaker"} == set(catalog.SAGEMAKER_REGIONAL_PRICES)
    prices = [o["usd_per_hour"] for o in offers if o["usd_per_hour"] is not None]
    assert prices == sorted(prices)
    assert [o["usd_per_hour"] for o in offers[len(prices):]] == [None] * (len(offers) - len(prices)), "unknown last"


def test_a_gce_offer_is_the_machine_and_one_t4_on_demand_and_spot():
    zone = next(o for o in _offers("--cloud", "gce") if o["location"] == "europe-west4-a")
    prices = catalog.GCE_PRICES["europe-west4"]
    assert zone["instance"] == "n1-standard-2+T4"
    assert zone["usd_per_hour"] == pytest.approx(prices["machine:n1-standard-2"].usd_per_hour
                                                 + prices["gpu:nvidia-tesla-t4"].usd_per_hour)
    assert zone["spot_usd_per_hour"] == pytest.approx(prices["machine:n1-standard-2:spot"].usd_per_hour
                                                      + prices["gpu:nvidia-tesla-t4:spot"].usd_per_hour)
    assert zone["source"] == catalog.GCE_PRICE_LIST


def test_cloud_filters_and_sagemaker_has_no_spot():
    offers = _offers("--cloud", "sagemaker")
    assert offers and {o["cloud"] for o in offers} == {"sagemaker"}
    assert all(o["instance"] == "ml.g4dn.xlarge" and o["spot_usd_per_hour"] is None for o in offers)


def test_an_unknown_price_is_a_dash_in_text_and_null_in_json(monkeypatch):
    from gemma4_t4 import clouds

    monkeypatch.setitem(catalog.SAGEMAKER_REGIONAL_PRICES, "eu-west-1", {})
    unknown = next(o for o in clouds.t4_offers("sagemaker") if o.location == "eu-west-1")
    assert unknown.usd_per_hour is None and unknown.source == "-"
    assert clouds.t4_offers("sagemaker")[-1] == unknown, "unknown sorts last"


def test_the_text_table_names_the_price_list_and_what_is_left_out():
    result = zones()
    assert result.returncode == 0, result.stderr
    assert "us-central1-a" in result.stdout and "ml.g4dn.xlarge" in result.stdout
    assert catalog.GCE_PRICE_LIST in result.stdout
    assert "the disks and the address come on top" in result.stdout


def test_a_bad_cloud_is_bad_usage():
    result = zones("--cloud", "azure")
    assert result.returncode == 2 and "invalid choice: 'azure'" in result.stderr
