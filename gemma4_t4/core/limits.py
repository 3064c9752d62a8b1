"""The bounds on what an operator command or MCP tool takes, each with its reason (an agent's call, or a
typo, must not start 300 threads, forward a 50 MiB prompt, or hold a VM awake for a day). The CLI's parsers
(gemma4_t4/cli) and the MCP tools' schemas (gemma4_t4/mcp, pydantic Field limits) state the same numbers."""

from __future__ import annotations

from .. import catalog

# Concurrent requests in one bench step. The reference steps are 1, 4 and 16 (core.bench.BenchPlan); 64 is four
# times the largest: on one T4, more threads only queue inside vLLM and measure the queue.
MAX_CONCURRENCY = 64
MAX_CONCURRENCY_STEPS = 8  # the reference run has 3
# Repeats of each measurement. The reference run takes 5 (decode) and 2 (load); 50 is ten times the larger.
MAX_REPEATS = 50
# Tokens one request may generate. The catalog's models take at most 131,072 tokens of context
# (max_position_embeddings, gemma4_t4/catalog/models.py); a T4 decodes tens of tokens a second, so 16,384 is many
# minutes per request already.
MAX_TOKENS = 16384
# A prompt's size, in characters: 1 Mi characters is far above what any catalog model's 131,072-token context holds
# of real text, and far below the 50 MiB an unbounded argument forwarded.
MAX_PROMPT_CHARS = 1024 * 1024
# How long a command waits (wait, stop, start): twice the guest's cap for the default model (catalog.
# HEALTH_BOUND_MINUTES: a VM whose vLLM never answers stops itself within it; wait's default is the cap itself).
MAX_TIMEOUT_S = 2.0 * catalog.HEALTH_BOUND_MINUTES * 60
MAX_INTERVAL_S = 600.0  # between two polls, and bench's pause between load batches
# A bench starts no request after this long: a bench counts as use, so the guest's idle stop (which counts requests)
# would never stop a VM under a bench that ran on. One hour is the idle stop's default (catalog
# DEFAULT_IDLE_STOP_MINUTES) and ten times the reference run; a request already sent ends within the HTTP read
# timeout (core.targets.READ_TIMEOUT_S), and the idle stop counts from the last one.
BENCH_MAX_S = 3600.0
