"""The guest's idle stop on recorded vLLM /metrics (the same logic meets the real server in
test_operator_cli.py)."""

from __future__ import annotations

import importlib.util

import pytest
from conftest import REPO

pytestmark = pytest.mark.guest


@pytest.fixture(scope="module")
def idle():
    spec = importlib.util.spec_from_file_location("idle_stop", REPO / "cloudinit" / "scripts" / "idle_stop.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def metrics(finished_stop: float, finished_length: float, running: float = 0, waiting: float = 0) -> str:
    return f"""# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="google/gemma-4-E2B-it-qat-w4a16-ct"}} {running}
vllm:num_requests_waiting{{engine="0",model_name="google/gemma-4-E2B-it-qat-w4a16-ct"}} {waiting}
# TYPE vllm:request_success_total counter
vllm:request_success_total{{engine="0",finished_reason="stop",model_name="google/gemma-4-E2B-it-qat-w4a16-ct"}} {finished_stop}
vllm:request_success_total{{engine="0",finished_reason="length",model_name="google/gemma-4-E2B-it-qat-w4a16-ct"}} {finished_length}
vllm:request_success_total_created{{engine="0",finished_reason="stop",model_name="x"}} 1.7e9
"""


def test_idle_for_the_window_stops(idle):
    state, stop, _ = idle.decide({}, metrics(3, 12), now=1000.0, idle_minutes=30)
    assert not stop and state == {"last_active": 1000.0, "finished": 15.0}
    state, stop, why = idle.decide(state, metrics(3, 12), now=1000.0 + 29 * 60, idle_minutes=30)
    assert not stop and "idle 29.0 of 30 min" in why
    _, stop, _ = idle.decide(state, metrics(3, 12), now=1000.0 + 30 * 60, idle_minutes=30)
    assert stop


def test_a_finished_request_or_one_in_flight_restarts_the_clock(idle):
    state = {"last_active": 0.0, "finished": 15.0}
    new, stop, _ = idle.decide(state, metrics(3, 13), now=5000.0, idle_minutes=5)
    assert not stop and new["last_active"] == 5000.0
    new, stop, _ = idle.decide(state, metrics(3, 12, running=1), now=5000.0, idle_minutes=5)
    assert not stop and new["last_active"] == 5000.0
    new, stop, _ = idle.decide(state, metrics(3, 12, waiting=2), now=5000.0, idle_minutes=5)
    assert not stop


def test_a_server_that_does_not_answer_is_never_idle(idle):
    state = {"last_active": 0.0, "finished": 15.0}
    new, stop, why = idle.decide(state, None, now=99999.0, idle_minutes=5)
    assert not stop and new["last_active"] == 99999.0 and "not answering" in why
    _, stop, _ = idle.decide(state, "# no vllm metrics here\n", now=99999.0, idle_minutes=5)
    assert not stop


def test_the_clock_starts_anew_at_every_boot(idle):
    assert idle.STATE_FILE.startswith("/run/"), "a clock kept across boots stops a restarted VM at its first tick"
