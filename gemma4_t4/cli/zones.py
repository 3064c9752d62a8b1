"""`gemma4-t4 zones`: where a Tesla T4 can be had and its hourly list price, cheapest first, offline (from the
catalog, no cloud asked): every GCE zone that sells T4s (an n1-standard-2 with one T4, on demand and Spot; the
disks come on top: `gemma4-t4 cost`) and every SageMaker region the catalog has an ml.g4dn.xlarge price for.
`-`: no recorded list price, unknown (not free). Whether your project or account may use a zone is
`gemma4-t4 preflight STACK --all-regions`'s question."""

from __future__ import annotations

import argparse
from dataclasses import asdict

from rich import box
from rich.table import Table

from .. import clouds
from ..core import offers
from .output import EXIT_OK, console, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("zones", help="where T4s are on GCE and SageMaker, with the hourly list price (offline)",
                       description=__doc__)
    p.add_argument("--cloud", choices=list(clouds.CLOUDS), help="only this cloud (default: every one)")
    p.add_argument("--json", action="store_true", help="print the offers as one JSON document")
    p.set_defaults(run=run)


def _usd(value: float | None) -> str:
    return "-" if value is None else f"{value:,.4f}"


def run(args: argparse.Namespace) -> int:
    found = clouds.t4_offers(args.cloud)
    if args.json:
        print_json(asdict(offers.Offers(found)))
        return EXIT_OK
    table = Table("cloud", "zone / region", "instance", "$/h", "Spot $/h", box=box.SIMPLE,
                  title="Tesla T4 offers at catalog list prices, cheapest first", title_justify="left")
    for offer in found:
        table.add_row(offer.cloud, offer.location, offer.instance, _usd(offer.usd_per_hour),
                      _usd(offer.spot_usd_per_hour) if clouds.CLOUDS[offer.cloud].supports(clouds.Feature.SPOT)
                      else "no Spot")
    console.print(table)
    for cloud in clouds.CLOUDS.values():
        if args.cloud in (None, cloud.name) and cloud.offers_note:
            console.print(cloud.offers_note, markup=False)
    console.print("-: no recorded list price, unknown (not free); the bill is the truth", markup=False)
    return EXIT_OK
