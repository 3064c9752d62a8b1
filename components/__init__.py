"""Reusable Pulumi components for Gemma 4 on a Tesla T4: one per cloud plus the shared pieces."""
