"""SageMaker: Gemma 4 on an ml.g4dn.xlarge (one Tesla T4) endpoint, on the clamped image; split
over the four T4s of an ml.g4dn.12xlarge with tensorParallelSize; optionally autoscaled.

The host image is pinned: the CUDA 13 vLLM container needs driver 580, which only
al2023-ami-sagemaker-inference-gpu-4-1 has. Without the pin the endpoint sat in Creating for six
minutes and failed with CannotStartContainerError and no log group at all (seed 002).

Autoscaling (maxInstanceCount) is an Application Auto Scaling target on the variant and a
target-tracking policy. SageMaker refuses to update an endpoint whose autoscaled variant would
change instance type (the target must be deregistered first), and an update restarts the fleet at
its initial count. So with autoscaling a changed endpoint configuration makes a new endpoint
instead of updating the old one: the old endpoint keeps serving at whatever scale it reached, with
its policy, until the new one is in service; the new one is registered for scaling only then
(the target waits for the endpoint, which waits for InService), and only then is the old one,
with its target, deleted. Nothing scales an endpoint in while it is being created or replaced.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pulumi
import pulumi_aws as aws
import pulumi_command as command

from gemma4_t4 import catalog

from .aws_iam import service_role
from .base import T4ServingComponent
from .config import SageMakerT4EndpointArgs
from .image_build import ImageBuildArgs, TuringImage
from .serving import check_serving

DELETE_ENDPOINT_TARGET = "arn:aws:scheduler:::aws-sdk:sagemaker:deleteEndpoint"
# Printed once, right after the endpoint is in service (the Endpoint resource waits for that), and
# kept in the state: the TTL's clock. A new endpoint starts a new clock.
CLOCK = "date -u +%Y-%m-%dT%H:%M:%SZ"
# EventBridge Scheduler's most: 185 retries over 24 h. A delete refused while the endpoint is
# Updating is tried again; what still fails lands in the dead-letter queue (kept 14 days).
TTL_RETRY = {"maximum_retry_attempts": 185, "maximum_event_age_in_seconds": 86400}
DLQ_RETENTION_S = 14 * 24 * 3600


VARIANT = "AllTraffic"


def cost_per_hour_usd(args: SageMakerT4EndpointArgs, instances: int | None = None) -> float | None:
    """At ``instances`` (default: the fewest the endpoint runs), at the region's list price."""
    price = catalog.SAGEMAKER_REGIONAL_PRICES.get(args.region, {}).get(args.instance_type)
    count = args.instances_min if instances is None else instances
    return None if price is None else round(price.usd_per_hour * count, 4)


def billing_after_destroy_usd_per_month(args: SageMakerT4EndpointArgs) -> float:
    if not args.keep_images:
        return 0.0
    return round(catalog.SAGEMAKER_IMAGE_BYTES / 1e9 * catalog.AWS_PRICES["ecr:gb-month"].usd_per_hour, 2)


class SageMakerT4Endpoint(T4ServingComponent):
    endpoint_name: pulumi.Output[str]
    image_uri: pulumi.Output[str]
    memory_plan: dict | None  # components.memory.MemoryPlan.as_output(); None when unsized

    def __init__(self, name: str, args: SageMakerT4EndpointArgs, opts: pulumi.ResourceOptions | None = None):
        # Everything a refusal needs is checked before anything is registered.
        plan = check_serving(args, args.gpu)
        serving = plan.serving
        ttl = args.ttl()
        super().__init__("gemma4-t4:aws:SageMakerT4Endpoint", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = {"app": "gemma4-t4", **args.labels}
        if plan.memory is not None:
            pulumi.log.info(f"memory plan: {plan.memory.summary()}", resource=self)
        gpus = catalog.SAGEMAKER_INSTANCE_TYPES[args.instance_type].gpus
        if gpus > args.tensor_parallel_size:
            pulumi.log.warn(f"{args.instance_type} carries {gpus} GPUs and tensorParallelSize "
                            f"{args.tensor_parallel_size} uses {args.tensor_parallel_size}: "
                            f"{gpus - args.tensor_parallel_size} bill unused (tensorParallelSize {gpus} uses them all)",
                            resource=self)

        image = TuringImage(f"{name}-image", ImageBuildArgs(
            base_image=args.base_image, vllm_version=catalog.PINS["vllm.sagemaker"], region=args.region,
            keep_images=args.keep_images, tags=tags, stack=pulumi.get_stack()), opts=child)

        role, role_policy = service_role(f"{name}-execution", "sagemaker.amazonaws.com", [
                {"Sid": "EcrLogin", "Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
                {"Sid": "PullImage", "Effect": "Allow",
                 "Action": ["ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage"],
                 "Resource": image.repository_arn},
                {"Sid": "EndpointLogs", "Effect": "Allow",
                 "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents",
                            "logs:DescribeLogStreams"],
                 "Resource": f"arn:aws:logs:{args.region}:*:log-group:/aws/sagemaker/Endpoints/*"},
                {"Sid": "Metrics", "Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
                 "Condition": {"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Endpoints"}}},
            ], tags, self)

        environment: dict[str, pulumi.Input[str]] = dict(serving.sagemaker_environment())
        if args.hf_token is not None:
            environment["HF_TOKEN"] = pulumi.Output.secret(args.hf_token)
        model = aws.sagemaker.Model(
            f"{name}-model",
            execution_role_arn=role.arn,
            primary_container=aws.sagemaker.ModelPrimaryContainerArgs(image=image.image_uri, environment=environment),
            tags=tags,
            # The Model pulls the built image by digest: it must wait for the build and the role.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[image.build, role_policy]),
        )
        config = aws.sagemaker.EndpointConfiguration(
            f"{name}-config",
            production_variants=[aws.sagemaker.EndpointConfigurationProductionVariantArgs(
                variant_name=VARIANT,
                model_name=model.name,
                instance_type=args.instance_type,
                initial_instance_count=args.instance_count,
                inference_ami_version=args.inference_ami_version,
                container_startup_health_check_timeout_in_seconds=args.startup_health_check_timeout_seconds,
                model_data_download_timeout_in_seconds=args.model_data_download_timeout_seconds,
            )],
            tags=tags,
            opts=child,
        )
        # The stack tag lets preflight find this stack's endpoint (an update holds two fleets).
        # Autoscaled, a new configuration makes a new endpoint (see the module's docstring).
        endpoint = aws.sagemaker.Endpoint(
            f"{name}-endpoint", endpoint_config_name=config.name,
            tags={**tags, catalog.SAGEMAKER_STACK_TAG: pulumi.get_stack()},
            opts=pulumi.ResourceOptions(parent=self, replace_on_changes=["endpointConfigName"])
            if args.autoscaling else child)

        extra: dict[str, pulumi.Input] = {"endpoint_name": endpoint.name, "image_uri": image.image_uri}
        scaling = self._autoscale(name, args, endpoint, tags) if args.autoscaling else None
        if scaling is not None:
            extra["cost_per_hour_usd_max"] = cost_per_hour_usd(args, args.instances_max)
            extra["scalable_target"] = scaling.resource_id
        if ttl is not None:
            extra.update(self._delete_after(name, ttl, endpoint, tags, scaling))

        self.endpoint_name = endpoint.name
        self.memory_plan = plan.memory.as_output() if plan.memory else None
        self.image_uri = image.image_uri
        extra["memory_plan"] = self.memory_plan
        body = json.dumps({"model": serving.served_model_name, "max_tokens": 64,
                           "messages": [{"role": "user", "content": "Name the four inner planets."}]})
        self._register_contract(
            extra=extra,
            cloud="sagemaker",
            port=catalog.SAGEMAKER_CONTAINER_PORT,
            served_model_name=serving.served_model_name,
            target={"endpoint_name": endpoint.name, "region": args.region,
                    **({"profile": profile} if (profile := pulumi.Config("aws").get("profile")) else {})},
            connect_command=pulumi.Output.concat(
                "aws sagemaker-runtime invoke-endpoint --region ", args.region, " --endpoint-name ",
                endpoint.name, " --content-type application/json --cli-binary-format raw-in-base64-out --body '",
                body, "' /dev/stdout"),
            cost_per_hour_usd=cost_per_hour_usd(args),
            billing_after_destroy_usd_per_month=billing_after_destroy_usd_per_month(args),
        )

    def _autoscale(self, name: str, args: SageMakerT4EndpointArgs, endpoint: aws.sagemaker.Endpoint,
                   tags: dict[str, str]) -> aws.appautoscaling.Target:
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
            opts=pulumi.ResourceOptions(parent=self),
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
            opts=pulumi.ResourceOptions(parent=self),
        )
        pulumi.log.info(f"autoscaling: {args.instances_min} to {args.instances_max} x {args.instance_type}, keeping "
                        f"{args.scaling_metric} at {args.scaling_target_value:g} per instance", resource=self)
        return target

    def _delete_after(self, name: str, ttl: timedelta, endpoint: aws.sagemaker.Endpoint,
                      tags: dict[str, str], scaling: aws.appautoscaling.Target | None) -> dict[str, pulumi.Output[str]]:
        """EventBridge Scheduler deletes the endpoint ``ttl`` after it is in service, with a role
        that can do only that, retries, and a dead-letter queue for a delete that kept failing.

        The deadline comes from a clock read once when the endpoint is up, so it never depends on
        when `pulumi up` runs: after it fired, `pulumi up` still plans and changes nothing (the
        state still lists the endpoint); `pulumi refresh` drops the deleted endpoint, after which
        `pulumi destroy` removes the rest, or `pulumi up` creates a new endpoint with a new clock."""
        child = pulumi.ResourceOptions(parent=self)
        dead_letters = aws.sqs.Queue(f"{name}-ttl-dlq", message_retention_seconds=DLQ_RETENTION_S,
                                     sqs_managed_sse_enabled=True, tags=tags, opts=child)
        statements: list[dict[str, pulumi.Input]] = [
            {"Effect": "Allow", "Action": "sagemaker:DeleteEndpoint", "Resource": endpoint.arn},
            {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": dead_letters.arn}]
        if scaling is not None:
            # Deleting an autoscaled endpoint deregisters its target with the caller's rights, and
            # fails without them (SageMaker: "Delete endpoints configured for auto scaling").
            statements.append({"Effect": "Allow", "Action": "application-autoscaling:DeregisterScalableTarget",
                               "Resource": scaling.arn})
        role, policy = service_role(f"{name}-ttl", "scheduler.amazonaws.com", statements, tags, self)
        clock = command.local.Command(f"{name}-in-service-at", create=CLOCK, triggers=[endpoint.id],
                                      opts=pulumi.ResourceOptions(parent=self, depends_on=[endpoint]))
        deletes_at = clock.stdout.apply(lambda up: (datetime.fromisoformat(up.strip().replace("Z", "+00:00")) + ttl)
                                        .strftime("%Y-%m-%dT%H:%M:%SZ"))
        aws.scheduler.Schedule(
            f"{name}-ttl",
            schedule_expression=deletes_at.apply(lambda at: f"at({at.rstrip('Z')})"),
            schedule_expression_timezone="UTC",
            flexible_time_window=aws.scheduler.ScheduleFlexibleTimeWindowArgs(mode="OFF"),
            target=aws.scheduler.ScheduleTargetArgs(
                arn=DELETE_ENDPOINT_TARGET, role_arn=role.arn,
                input=pulumi.Output.json_dumps({"EndpointName": endpoint.name}),
                retry_policy=aws.scheduler.ScheduleTargetRetryPolicyArgs(**TTL_RETRY),
                dead_letter_config=aws.scheduler.ScheduleTargetDeadLetterConfigArgs(arn=dead_letters.arn)),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
        )
        return {"endpoint_deletes_at": deletes_at, "ttl_dead_letter_queue_url": dead_letters.url}
