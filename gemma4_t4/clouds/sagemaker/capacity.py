"""SageMaker's regions for `preflight --all-regions`: per region "<instance type> for endpoint usage"
against the instances endpoints hold there, a few calls per region, some regions at once.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ... import catalog
from ...components.sagemaker import cost
from ...components.sagemaker.quotas import EndpointQuota, endpoint_quota_name
from ...components.sagemaker.scope import StackScope
from ...core.capacity import RegionRow, RegionsReport, ordered
from ...core.offers import Offer
from ...core.preflight import Needs, PreflightError
from .failures import cloud_message
from .preflight import SageMakerNeeds

SAGEMAKER_REGIONS_AT_ONCE = 8  # a few calls per region (GCE needs three for every region)


@dataclass(frozen=True)
class RegionQuota:
    """One region as fetched: the endpoint quota, instances in use, the stack's own, the endpoints
    whose type could not be read (their config was deleted); or the error."""

    region: str
    quota: EndpointQuota | None = None
    in_use: int = 0
    own: int | None = None
    error: str = ""
    untyped: tuple[str, ...] = ()


def sagemaker_regions(needs: Needs[SageMakerNeeds], fetched: list[RegionQuota]) -> RegionsReport:
    """A region works if the stack's most instances fit its quota beside what other endpoints hold
    (the stack's own endpoint, where it runs, makes room as it goes)."""
    own = needs.own
    name = endpoint_quota_name(own.instance_type)
    most = own.most
    needed = f"{most} x {own.instance_type}" + (f" (autoscaling from {own.instances})" if most > own.instances
                                                else "")
    rows = []
    for region in fetched:
        if region.error:
            rows.append(RegionRow(region.region, False, region.error))
            continue
        if region.quota is None:
            rows.append(RegionRow(region.region, False, f"SageMaker does not offer {own.instance_type} here"))
            continue
        limit = int(region.quota.value)
        others = region.in_use - (region.own or 0)
        source = "" if region.quota.applied else " (AWS default)"
        detail = f"\"{name}\" {limit}{source}, in use {region.in_use}, free {limit - region.in_use}"
        if region.own is not None:
            detail += f"; this stack's endpoint holds {region.own}"
        ok = limit - others >= most
        if not ok:
            detail += f"; request {others + most} (quota code {region.quota.code})"
        if region.untyped:
            detail += (f"; not counted: {', '.join(region.untyped)} (serving, endpoint config deleted, "
                       "type unknown)")
        rows.append(RegionRow(region.region, ok, detail, limit, region.in_use))
    notes = []
    if needs.region not in {r.region for r in fetched}:
        notes.append(f"the stack's region {needs.region} was not asked")
    rows = ordered(rows, needs.region)
    first = next((row for row in rows if row.ok), None)
    lines = [f"pulumi config set aws:region {first.region}"] if first and first.region != needs.region else []
    return RegionsReport("sagemaker", needed, rows, first, lines, notes)


def sagemaker_region_names(regions: list[str] | None = None) -> list[str]:
    """The regions to ask: the given ones, else every region boto3 knows SageMaker in."""
    import boto3

    return list(regions) if regions else boto3.session.Session().get_available_regions("sagemaker")


# The credentials' own refusals (sagemaker/failures.py): the same in every region, so the whole report stops.
ACCOUNT_WIDE_CODES = ("ExpiredToken", "ExpiredTokenException", "RequestExpired")
# An opt-in region the account has not enabled answers with the code of an unknown access key (published
# transcripts: awslabs/landing-zone-accelerator-on-aws#269, ap-southeast-4; nccgroup/ScoutSuite#1389, me-south-1:
# "UnrecognizedClientException ... The security token included in the request is invalid").
NOT_ENABLED_CODES = ("UnrecognizedClientException", "InvalidClientTokenId")


def fetch_sagemaker_regions(instance_type: str, stack: StackScope, regions: list[str],
                            profile: str | None = None) -> list[RegionQuota]:
    """Every region asked at once (a few at a time); a region that refuses is a row with the reason; no
    credentials, or expired ones, stop the report (they are the account's, not a region's)."""
    from botocore import exceptions as boto

    from ...components.sagemaker.quotas import sagemaker_usage
    from .target import aws_session

    def one(region: str) -> RegionQuota:
        session = aws_session(region, profile, PreflightError)  # no credentials: raised, for every region
        try:
            quota, in_use, own, untyped = sagemaker_usage(session, instance_type, stack)
        except (boto.NoCredentialsError, boto.PartialCredentialsError, boto.TokenRetrievalError, boto.SSOError,
                boto.SSOTokenLoadError) as err:  # no credentials, or an SSO session that ended: every region's
            raise PreflightError(cloud_message(err) or f"AWS: {err}") from None
        except boto.ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            if code in ACCOUNT_WIDE_CODES:
                raise PreflightError(cloud_message(err) or f"AWS: {err}") from None
            reason = cloud_message(err) or f"AWS: {err}"
            if code in NOT_ENABLED_CODES:
                reason = f"not enabled for this account (opt-in region?): {reason}"
            return RegionQuota(region, error=reason.removeprefix("AWS: ")[:200])
        except boto.BotoCoreError as err:
            return RegionQuota(region, error=(cloud_message(err) or str(err)).removeprefix("AWS: ")[:200])
        return RegionQuota(region, quota, in_use, own, untyped=tuple(untyped))

    with ThreadPoolExecutor(max_workers=SAGEMAKER_REGIONS_AT_ONCE) as pool:
        return list(pool.map(one, regions))


T4_INSTANCE = catalog.sagemaker_t4_instance_for(1)


def t4_offers() -> list[Offer]:
    """Every SageMaker region the catalog has a price for: ml.g4dn.xlarge, on demand (no Spot capacity)."""
    return [region_offer(region) for region in catalog.SAGEMAKER_REGIONAL_PRICES]


def region_offer(region: str) -> Offer:
    price = cost.instance_price(region, T4_INSTANCE)
    return Offer("sagemaker", region, T4_INSTANCE, None if price is None else price.usd_per_hour, None,
                 "-" if price is None else price.source)
