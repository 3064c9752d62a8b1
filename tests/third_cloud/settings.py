"""The stand-in cloud's settings: every serving setting the project shares, and where its server listens."""

from __future__ import annotations

from gemma4_t4.components.config import ServingSettings


class LoopbackSettings(ServingSettings):
    url: str = "http://127.0.0.1:8000"  # the OpenAI-compatible server on this machine's loopback
