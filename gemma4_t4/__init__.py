"""Operator tools for gemma4-t4: the offline plan, the Turing fit checker, and more."""
