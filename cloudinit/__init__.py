"""The GCE guest's set-up: scripts, units and the user-data renderer."""
