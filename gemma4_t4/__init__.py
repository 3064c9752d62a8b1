"""gemma4-t4: Gemma 4 on a Tesla T4 (GCE, SageMaker).

Packages, bottom to top: ``catalog`` and ``errors`` (facts), ``core`` (what the operator
commands do: targets, bench, preflight, the offline plan), ``cli`` (the command line).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("gemma4-t4")
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"
