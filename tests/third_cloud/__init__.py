"""A stand-in third cloud, from this one folder: its component (a ComponentResource with one child), its
Settings, its target (HTTP, to a server on this machine's loopback), one preflight check and its stack file.
tests/clouds/test_third_cloud.py registers it with the one registry call (gemma4_t4.clouds.register) and drives the
offline plan, cost, preflight, status and the MCP tools through it; nothing outside this folder knows it."""
