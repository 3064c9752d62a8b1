"""SageMaker autoscaling (maxInstanceCount): an Application Auto Scaling target on the endpoint's
variant and a target-tracking policy, only when configured; the cost as a range; an endpoint that
is replaced, not updated, on a new configuration; the TTL's right to deregister. The planned target
and policy are then registered in moto's Application Auto Scaling through the real API, against a
real (moto) endpoint: moto checks that the namespace, the resource id's form and the dimension agree, as
the service does. Budget: ~15 s."""

from __future__ import annotations

import json

import pytest

from gemma4_t4 import catalog
from gemma4_t4.components.sagemaker.names import endpoint_name
from gemma4_t4.core.plan_lines import cost_line, cost_range

TARGET = "aws:appautoscaling/target:Target"
POLICY = "aws:appautoscaling/policy:Policy"
ENDPOINT = "aws:sagemaker/endpoint:Endpoint"
PRICE = catalog.SAGEMAKER_REGIONAL_PRICES["us-east-2"]["ml.g4dn.xlarge"].usd_per_hour


def test_no_autoscaling_unless_configured(run_stack):
    plan = run_stack("sagemaker-t4")
    assert plan.find(TARGET) == [] and plan.find(POLICY) == []
    assert "cost_per_hour_usd_max" not in plan.outputs and "scalable_target" not in plan.outputs
    assert cost_range(plan) == [PRICE, PRICE]


def test_the_variant_is_a_scalable_target_tracked_on_concurrent_requests(run_stack):
    plan = run_stack("sagemaker-t4", "maxInstanceCount=4")
    endpoint = plan.one(ENDPOINT)
    target = plan.one(TARGET)
    assert target.inputs["resourceId"] == f"endpoint/{endpoint.state['name']}/variant/AllTraffic"
    assert target.inputs["scalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    assert target.inputs["serviceNamespace"] == "sagemaker"
    assert (target.inputs["minCapacity"], target.inputs["maxCapacity"]) == (1.0, 4.0)
    assert f"{ENDPOINT}::{endpoint.name}" in target.options["dependsOn"], "registered once the endpoint is up"
    policy = plan.one(POLICY).inputs
    assert policy["policyType"] == "TargetTrackingScaling"
    assert (policy["resourceId"], policy["scalableDimension"], policy["serviceNamespace"]) == (
        target.inputs["resourceId"], target.inputs["scalableDimension"], target.inputs["serviceNamespace"])
    tracking = policy["targetTrackingScalingPolicyConfiguration"]
    assert tracking["predefinedMetricSpecification"] == {
        "predefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"}
    assert tracking["targetValue"] == 8.0, "maxNumSeqs: the requests vLLM serves at once"
    assert tracking["scaleOutCooldown"] == catalog.SAGEMAKER_DEFAULT_STARTUP_HEALTH_CHECK_S, "a new instance is not serving before its /ping answers"
    assert plan.outputs["scalable_target"] == target.inputs["resourceId"]


def test_the_cost_is_a_range_from_the_fewest_to_the_most_instances(run_stack):
    plan = run_stack("sagemaker-t4", "instanceCount=2", "minInstanceCount=1", "maxInstanceCount=5")
    assert plan.outputs["cost_per_hour_usd"] == round(PRICE, 4)
    assert plan.outputs["cost_per_hour_usd_max"] == round(5 * PRICE, 4)
    assert plan.as_json()["running_usd_per_hour_range"] == [round(PRICE, 4), round(5 * PRICE, 4)]
    assert f"${PRICE:.4f}/h to ${5 * PRICE:.4f}/h, fewest to most instances" in cost_line(plan, spot=False)
    assert plan.one(TARGET).inputs["minCapacity"] == 1.0
    assert plan.one("aws:sagemaker/endpointConfiguration:EndpointConfiguration").inputs[
        "productionVariants"][0]["initialInstanceCount"] == 2.0


def test_invocations_per_instance_with_its_own_target(run_stack):
    plan = run_stack("sagemaker-t4", "maxInstanceCount=3", "scalingMetric=invocations", "scalingTarget=30")
    tracking = plan.one(POLICY).inputs["targetTrackingScalingPolicyConfiguration"]
    assert tracking["predefinedMetricSpecification"]["predefinedMetricType"] == "SageMakerVariantInvocationsPerInstance"
    assert tracking["targetValue"] == 30.0


def test_a_new_configuration_replaces_an_autoscaled_endpoint(run_stack):
    """SageMaker fails an update that changes an autoscaled variant's instance type, and restarts
    an updated fleet at its initial count: a new endpoint comes up beside the old one instead."""
    plan = run_stack("sagemaker-t4", "maxInstanceCount=2")
    endpoint = plan.one(ENDPOINT)
    assert endpoint.options["replaceOnChanges"] == ["endpointConfigName"]
    assert endpoint.options["deleteBeforeReplace"] is False, "the old endpoint serves until the new one is up"
    # Named from the configuration: a new configuration's endpoint has a new name, so old and new exist at once.
    config = plan.one("aws:sagemaker/endpointConfiguration:EndpointConfiguration").state["name"]
    assert endpoint.inputs["name"] == endpoint_name("sagemaker-t4", config)


def test_the_ttl_may_deregister_the_target_it_deletes_the_endpoint_of(run_stack):
    def ttl_statements(*overrides):
        plan = run_stack("sagemaker-t4", "endpointTtl=8h", *overrides)
        policy = json.loads(plan.find("aws:iam/rolePolicy:RolePolicy", "gemma4-t4-ttl-policy")[0].inputs["policy"])
        return plan, policy["Statement"]

    _, fixed = ttl_statements()
    assert not any(s["Action"].startswith("application-autoscaling:") for s in fixed)
    plan, scaled = ttl_statements("maxInstanceCount=2")
    deregister = [s for s in scaled if s["Action"] == "application-autoscaling:DeregisterScalableTarget"]
    # As AWS's "Delete endpoints configured for auto scaling" asks: the action (Application Auto Scaling
    # checks it on SageMaker's behalf); the delete itself stays this endpoint's alone.
    assert deregister == [{"Effect": "Allow", "Action": "application-autoscaling:DeregisterScalableTarget",
                           "Resource": "*"}]
    endpoint = f"arn:aws:sagemaker:us-east-2:123456789012:endpoint/{plan.one(ENDPOINT).state['name'].lower()}"
    assert [s for s in scaled if s["Action"].startswith("sagemaker:")] == [
        {"Effect": "Allow", "Action": "sagemaker:DeleteEndpoint", "Resource": endpoint}]
    assert [s for s in scaled if s["Resource"] == "*"] == deregister, "nothing else unscoped"


# --- the planned target and policy, registered in moto through the real API --------------------------


@pytest.mark.standin
def test_the_planned_target_and_policy_register_on_a_real_endpoint(moto, run_stack):
    moto.reset()
    plan = run_stack("sagemaker-t4", "maxInstanceCount=3", "minInstanceCount=1")
    sagemaker = moto.client("sagemaker")
    sagemaker.create_model(ModelName="m", ExecutionRoleArn="arn:aws:iam::123456789012:role/x",
                           PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-2.amazonaws.com/r@sha256:0"})
    sagemaker.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[
        {"VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "ml.g4dn.xlarge", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="gemma", EndpointConfigName="c")
    planned_name = plan.one(ENDPOINT).state["name"]

    target, policy = plan.one(TARGET).inputs, plan.one(POLICY).inputs
    scaling = moto.client("application-autoscaling")
    resource_id = target["resourceId"].replace(planned_name, "gemma")
    scaling.register_scalable_target(ServiceNamespace=target["serviceNamespace"], ResourceId=resource_id,
                                     ScalableDimension=target["scalableDimension"],
                                     MinCapacity=int(target["minCapacity"]), MaxCapacity=int(target["maxCapacity"]))
    tracking = policy["targetTrackingScalingPolicyConfiguration"]
    scaling.put_scaling_policy(
        PolicyName="gemma4-t4-scaling-policy", ServiceNamespace=policy["serviceNamespace"], ResourceId=resource_id,
        ScalableDimension=policy["scalableDimension"], PolicyType=policy["policyType"],
        TargetTrackingScalingPolicyConfiguration={
            "TargetValue": tracking["targetValue"], "ScaleOutCooldown": int(tracking["scaleOutCooldown"]),
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": tracking["predefinedMetricSpecification"]["predefinedMetricType"]}})
    (registered,) = scaling.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    assert (registered["ResourceId"], registered["MinCapacity"], registered["MaxCapacity"]) == (resource_id, 1, 3)
    (stored,) = scaling.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]
    assert stored["TargetTrackingScalingPolicyConfiguration"]["PredefinedMetricSpecification"] == {
        "PredefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"}
    # A target that does not follow the endpoint/NAME/variant/VARIANT form is refused by the API.
    with pytest.raises(scaling.exceptions.ValidationException):
        scaling.register_scalable_target(ServiceNamespace="sagemaker", ResourceId="gemma/AllTraffic",
                                         ScalableDimension=target["scalableDimension"], MinCapacity=1, MaxCapacity=3)
