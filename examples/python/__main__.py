"""Two GceT4Servers on your own VPC, and a SageMakerT4Endpoint through an explicit AWS provider."""

import pulumi
import pulumi_aws as aws
import pulumi_gcp as gcp

from gemma4_t4.components import GceT4Server, SageMakerT4Endpoint

network = gcp.compute.Network("llm-net", auto_create_subnetworks=False)
subnet = gcp.compute.Subnetwork("llm-subnet", network=network.id, region="us-central1", ip_cidr_range="10.8.0.0/24")
servers = [GceT4Server(name, {"zone": "us-central1-a", "network": network.id, "subnetwork": subnet.id,
                              "max_model_len": 8192}) for name in ("chat", "batch")]
east = aws.Provider("east", region="us-east-2")
endpoint = SageMakerT4Endpoint("api", {"endpoint_ttl": "8h"}, pulumi.ResourceOptions(provider=east))

pulumi.export("tunnels", [server.connect_command for server in servers])
pulumi.export("endpoint", endpoint.endpoint_name)
