"""Autoscaling (maxInstanceCount): the variant as an Application Auto Scaling target, and its target-tracking
policy."""

import pulumi
import pulumi_aws as aws

from gemma4_t4 import catalog

from .names import VARIANT
from .settings import SageMakerT4EndpointSettings


def autoscale(name: str, args: SageMakerT4EndpointSettings, endpoint: aws.sagemaker.Endpoint,
              tags: dict[str, str], parent: pulumi.Resource) -> aws.appautoscaling.Target:
    """The variant as an Application Auto Scaling target between the fewest and the most
    instances, and a target-tracking policy that keeps the metric at the target per instance.

    Registered once the endpoint is in service (the target reads the endpoint's name, and the
    endpoint resource is created only when SageMaker reports InService). The scale-out cooldown
    is the time a new instance may take to answer /ping: until it serves, the metric still shows
    the old load, and the policy would otherwise add instances for load already being met."""
    target = aws.appautoscaling.Target(
        f"{name}-scaling",
        service_namespace=catalog.SAGEMAKER_SCALING_NAMESPACE,
        scalable_dimension=catalog.SAGEMAKER_SCALABLE_DIMENSION,
        resource_id=endpoint.name.apply(lambda endpoint_name: catalog.sagemaker_scalable_resource_id(
            endpoint_name, VARIANT)),
        min_capacity=args.instances_min,
        max_capacity=args.instances_max,
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    aws.appautoscaling.Policy(
        f"{name}-scaling-policy",
        policy_type="TargetTrackingScaling",
        service_namespace=target.service_namespace,
        scalable_dimension=target.scalable_dimension,
        resource_id=target.resource_id,
        target_tracking_scaling_policy_configuration=aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationArgs(
            target_value=args.scaling_target_value,
            predefined_metric_specification=aws.appautoscaling.
            PolicyTargetTrackingScalingPolicyConfigurationPredefinedMetricSpecificationArgs(
                predefined_metric_type=catalog.SAGEMAKER_SCALING_METRICS[args.scaling_metric]),
            scale_out_cooldown=args.startup_health_check_timeout_seconds,
        ),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    pulumi.log.info(f"autoscaling: {args.instances_min} to {args.instances_max} x {args.instance_type}, keeping "
                    f"{args.scaling_metric} at {args.scaling_target_value:g} per instance", resource=parent)
    return target
