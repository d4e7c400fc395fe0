"""The calls of one assistant turn, as the tool registry executes them (`parse_calls`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from agentrl.parsing import parse_message, parse_tool_calls

CallParser = Callable[[str, list[dict[str, Any]] | None], list[dict[str, Any]]]


def _call_key(call: Mapping[str, Any]) -> str:
    return json.dumps(
        [call.get("name"), call.get("arguments")], sort_keys=True, ensure_ascii=False, default=str
    )


def parse_calls(
    text: str,
    tools: list[dict[str, Any]] | None,
    mode: str = "lenient",
    tool_format: str = "auto",
) -> list[dict[str, Any]]:
    """The calls of one assistant turn, as dicts the tool registry executes.

    Each has ``name``, ``arguments`` and ``canonical`` (True for a well-formed tagged JSON
    call, as the reward counts it). A block the parser refuses becomes a nameless
    call with ``parse_error``, so it is executed as a failed "bad tool call", like a tagged
    block that is not JSON.
    """
    reward_calls = parse_tool_calls(text)
    if mode == "reward":
        return reward_calls
    parsed = parse_message(text, tools=tools, tool_format=tool_format)
    canonical = {_call_key(c) for c in reward_calls if c.get("canonical")}
    calls = [
        {"name": c["name"], "arguments": c["arguments"], "canonical": _call_key(c) in canonical}
        for c in parsed.calls
    ]
    calls += [
        {
            "name": "",
            "arguments": {},
            "parse_error": str(e.get("text", ""))[:512],
            "canonical": False,
        }
        for e in parsed.errors
    ]
    if calls:
        return calls
    return [c for c in reward_calls if not c.get("canonical")]


__all__ = ["CallParser", "parse_calls"]
