"""Everything the GCE component owns, in one folder:

- component.py: ``GceT4Server`` and ``GceT4ServerArgs``, its constructor as named steps;
- settings.py: ``GceT4ServerSettings``, the rules only a GCE VM has;
- checks.py: what is refused before anything is registered; names.py: the VM's and data disk's fixed names;
- network.py (network, firewall, Cloud NAT), storage.py (the data disk), server.py (the VM), access.py (the
  operators' grants), hf_token.py (the token's secret), guards.py (maxRunHours, idleStopMinutes), outputs.py;
- cost.py: every GCE price, for the component and the operator tools alike (no Pulumi);
- guest.py: the VM's user-data, from the files in cloudinit/;
- guest_lock.py: the guest's vLLM locks (`make guest-lock`);
- provider_answers.py: what the GCP provider's getDisk answers, word for word, with its source.

The component loads on first use, so the settings import without the GCP provider's SDK.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = ["GceT4Server", "GceT4ServerArgs"]

if TYPE_CHECKING:
    from .component import GceT4Server, GceT4ServerArgs


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(".component", __name__), name)
