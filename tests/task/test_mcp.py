"""MCP servers' tools in episodes: a tiny stdio MCP server, written here, speaks JSON-RPC."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from agentrl.config import resolve
from agentrl.rollout.episodes import run_episodes
from agentrl.training.setup import build_tools
from test_rollout_episodes import ScriptedEngine, _call

SERVER = textwrap.dedent(
    """
    import json, sys
    TOOLS = [{"name": "add", "description": "Add two numbers.", "inputSchema": {
        "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"]}}]
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg:
            continue
        method, params = msg.get("method"), msg.get("params") or {}
        if method == "initialize":
            result = {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "tiny", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call" and params["name"] == "add":
            args = params["arguments"]
            result = {"content": [{"type": "text", "text": str(args["a"] + args["b"])}],
                      "isError": False}
        else:
            reply = {"jsonrpc": "2.0", "id": msg["id"],
                     "error": {"code": -32601, "message": "unknown method " + str(method)}}
            print(json.dumps(reply), flush=True)
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
    """
)


def test_an_mcp_servers_tool_is_called_in_an_episode(tmp_path: Path) -> None:
    server = tmp_path / "tiny_mcp_server.py"
    server.write_text(SERVER)
    config = resolve(preset="tiny", overrides={"mcp": [f"{sys.executable} {server}"]})
    assert config.mcp == f"{sys.executable} {server}"
    tools = build_tools(config)
    assert "add" in tools and [s["function"]["name"] for s in tools.specs()] == ["add"]

    def script(turn: int, context: str) -> str:
        return _call("add", '{"a": 2, "b": 40}') if turn == 0 else "<answer>42</answer>"

    sample = {"messages": [{"role": "user", "content": "2 + 40?"}], "gt": ["42"]}
    groups = run_episodes(ScriptedEngine(script), [sample], tools, num_generations=2)
    events = [e for t in groups[0].trajectories for e in t.tool_events]
    assert [(e["ok"], e["result"]) for e in events] == [(True, "42"), (True, "42")]
