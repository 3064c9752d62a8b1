"""Everything the GCE component owns, in one folder:

- component.py: ``GceT4Server`` and ``GceT4ServerArgs`` (the VM, its network, firewall, data disk and grants);
- settings.py: ``GceT4ServerSettings``, the rules only a GCE VM has;
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
