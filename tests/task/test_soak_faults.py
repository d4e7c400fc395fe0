"""The soak's faults (benches/soak.py) are keyed on the call, not on timing: its MCP server
dies on the same calls whichever order they arrive in, answering the calls sent with them,
so an uninterrupted run and a killed-and-resumed one meet the same failures."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("mcp")

from agentrl.tools import ToolRegistry
from agentrl.tools.mcp import MCPServer

from tests.fakes.repo import load_bench


def _soak():
    return load_bench("soak")


@pytest.mark.slow
def test_the_soak_server_fails_the_same_calls_in_any_order(tmp_path):
    soak = _soak()
    (tmp_path / "soak_server.py").write_text(soak.SERVER)
    said: list[str] = []
    server = MCPServer(
        f"{sys.executable} {tmp_path / 'soak_server.py'}", timeout=30, log=said.append
    )
    try:
        registry = ToolRegistry(timeout=60)
        for item in server.tools:
            registry.register(item)
        dying = {"name": "add", "arguments": {"a": 9, "b": 1}}
        fine = {"name": "add", "arguments": {"a": 4, "b": 1}}
        for calls in ([dying, fine], [fine, dying], [dying, fine, dying]):
            events = registry.execute_many(calls)
            for call, event in zip(calls, events, strict=True):
                if call is fine:
                    assert event["ok"] and event["result"] == "5"
                else:
                    assert event["result"]["error"] == "the MCP server exited with status 7"
        assert server.restarts == 3  # once per round: the deaths of one round are one exit
        assert (tmp_path / "faults.log").read_text().split() == ["server_exit"] * 3
    finally:
        server.close()


def test_the_soak_tool_is_slow_for_the_keys_its_rule_names(tmp_path):
    soak = _soak()
    (tmp_path / "soak_tools.py").write_text(soak.TOOLS)
    sys.path.insert(0, str(tmp_path))
    try:
        import soak_tools
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("soak_tools", None)
    keys = [key for key in soak.WORDS if soak_tools.slow(key)]
    assert 0 < len(keys) < len(soak.WORDS)  # the prompts meet both kinds
    assert soak_tools.slow_lookup.timeout == 2 and not soak_tools.slow_lookup.isolate
