"""MCP servers' tools in episodes: tests/fakes/mcp_server.py, a tiny stdio MCP server."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp")

from agentrl.assembly.task import build_tools
from agentrl.config import resolve
from agentrl.rollout.episodes import run_episodes

from tests.fakes.engines import ScriptedEngine, tool_call
from tests.fakes.mcp_server import command


def test_an_mcp_servers_tool_is_called_in_an_episode() -> None:
    config = resolve(preset="tiny", overrides={"mcp": [command()]})
    assert config.mcp == command()
    tools = build_tools(config)
    assert "add" in tools and [s["function"]["name"] for s in tools.specs()] == ["add"]

    def script(turn: int, context: str) -> str:
        return tool_call("add", '{"a": 2, "b": 40}') if turn == 0 else "<answer>42</answer>"

    sample = {"messages": [{"role": "user", "content": "2 + 40?"}], "gt": ["42"]}
    groups = run_episodes(ScriptedEngine(script), [sample], tools, num_generations=2)
    events = [e for t in groups[0].trajectories for e in t.tool_events]
    assert [(e["ok"], e["result"]) for e in events] == [(True, "42"), (True, "42")]
