"""What both serving components share: the outputs of the one contract (gemma4_t4.contract)."""

from __future__ import annotations

from typing import Any

import pulumi

from gemma4_t4.contract import OUTPUTS


class T4ServingComponent(pulumi.ComponentResource):
    """A Gemma 4 server on a Tesla T4. Subclasses build the cloud's resources, then call
    ``_register_contract`` once, as the last statement of their constructor."""

    cloud: pulumi.Output[str]
    port: pulumi.Output[int]
    served_model_name: pulumi.Output[str]
    target: pulumi.Output[dict[str, str]]
    connect_command: pulumi.Output[str]
    cost_per_hour_usd: pulumi.Output[float]
    billing_after_destroy_usd_per_month: pulumi.Output[float]
    # The component's own outputs beside the contract's (data_disk_name, image_uri, memory_plan...).
    extra_outputs: dict[str, Any]

    def _register_contract(self, extra: dict[str, Any] | None = None, **values: Any) -> None:
        if set(values) != set(OUTPUTS):
            missing, unknown = sorted(set(OUTPUTS) - set(values)), sorted(set(values) - set(OUTPUTS))
            raise TypeError(f"{type(self).__name__} must register exactly the contract's outputs; "
                            f"missing {missing}, unknown {unknown}")
        for name, value in values.items():
            setattr(self, name, pulumi.Output.from_input(value))
        self.extra_outputs = dict(extra or {})
        self.register_outputs({**values, **self.extra_outputs})
