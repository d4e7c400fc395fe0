"""Hung tool calls cannot pile up: calls that outlive their timeout in threads (which
cannot be stopped) are counted, and at the cap the run stops in one line."""

from __future__ import annotations

import threading

import pytest
from agentrl.errors import RecurringError
from agentrl.tools import ToolRegistry
from agentrl.tools import threads as threads_module
from agentrl.tools.registry import HungToolCalls, hung_tool_threads


class Environment:
    """An environment's tool is a bound method: it runs in a thread of this process."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def wait_forever(self) -> str:
        """Hangs until released."""
        self.release.wait(60)
        return "late"


def test_hung_calls_are_capped_and_stop_the_run(monkeypatch):
    monkeypatch.setattr(threads_module, "MAX_HUNG_THREADS", 4)
    env = Environment()
    registry = ToolRegistry(timeout=0.05)
    registry.register(env.wait_forever)
    before = hung_tool_threads()
    try:
        for _ in range(4 - before - 1):
            event = registry.execute({"name": "wait_forever", "arguments": {}})
            assert event["result"] == {"error": "timed out after 0.05s"}
        assert hung_tool_threads() == 3
        with pytest.raises(HungToolCalls, match=r"4 tool calls \(wait_forever\) still run past"):
            registry.execute({"name": "wait_forever", "arguments": {}})
        assert isinstance(HungToolCalls("x"), RecurringError)  # exit 1, one line
    finally:
        env.release.set()
    for thread in threading.enumerate():
        if thread.name == "agentrl-tool-wait_forever":
            thread.join(5)
    assert hung_tool_threads() == 0  # threads that finish are no longer counted
