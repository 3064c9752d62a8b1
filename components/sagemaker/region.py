"""The region the AWS provider makes resources in, for a component given none: the endpoint's and the image's
default, read from the provider the component is given (opts) or the default one."""

import pulumi
import pulumi_aws as aws

from gemma4_t4.errors import ConfigError, Set

from ..provider_answers import USE_PROVIDER_MOCKS, provider_message


def provider_region(provider: pulumi.ProviderResource | None, opts: pulumi.ResourceOptions | None) -> str:
    """The region the AWS provider makes resources in, as its getRegion answers it: from its own configuration,
    without an AWS call (terraform-provider-aws, data source aws_region). The provider always answers one (it
    does not start without a region), so an empty answer is a mock's."""
    try:
        found = aws.get_region(opts=pulumi.InvokeOptions(provider=provider, parent=opts.parent if opts else None))
    except Exception as error:
        raise ConfigError("region", f"is not set, and the AWS provider could not say its own: "
                          f"{provider_message(error)}",
                          (Set("region", "us-east-2"), " (or give the AWS provider a region: aws:region)")) from None
    region = found.region or found.name or ""
    if not region:
        raise ConfigError("region", "is not set, and aws:index/getRegion:getRegion answered no region, which the AWS "
                          "provider never does", USE_PROVIDER_MOCKS)
    return region
