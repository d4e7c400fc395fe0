"""Conversation messages in one shape: ``{role, content[, tool_calls][, reasoning_content]}``.

Datasets, agents and users write messages in many shapes (``from``/``value`` keys, role
aliases, content as text parts or JSON, tool calls flat or nested, arguments as objects or
JSON strings). Every renderer reads the one shape :func:`normalize_message` returns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agentrl.utils.fields import object_list

Message = dict[str, Any]

ROLE_ALIASES = {
    "human": "user",
    "gpt": "assistant",
    "bot": "assistant",
    "model": "assistant",
    "function": "tool",
    "observation": "tool",
    "ipython": "tool",
}
ROLES = ("system", "user", "assistant", "tool")


class MessageError(ValueError):
    """A message that cannot be rendered; ``reason`` is a short machine-readable key."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _content_text(content: Any) -> str:
    """Message content as text: strings as is, text parts joined, other JSON compact."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, bool | int | float):
        return str(content)
    if isinstance(content, list) and all(
        isinstance(p, dict) and isinstance(p.get("text"), str) for p in content
    ):
        return "".join(p["text"] for p in content)
    try:
        return _compact_json(content)
    except (TypeError, ValueError) as exc:
        raise MessageError("bad_content", f"content is not text or JSON: {exc}") from None


def _normalize_tool_calls(raw: Any) -> list[dict[str, Any]]:
    """Assistant ``tool_calls`` (list, one object, or a JSON string; flat ``{name,
    arguments}`` as in MiniMind's data or OpenAI's nested form) in the OpenAI form
    ``{"type": "function", "function": {name, arguments}}`` that HF chat templates read.
    Arguments given as a JSON object string are decoded."""
    if raw is None or raw == "" or raw == []:
        return []
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise MessageError("bad_tool_calls", "tool_calls is not valid JSON") from None
    items = object_list(raw)
    if items is None:
        raise MessageError("bad_tool_calls", f"tool_calls is a {type(raw).__name__}")
    calls = []
    for item in items:
        if not isinstance(item, dict):
            raise MessageError("bad_tool_calls", "a tool call is not an object")
        body = item["function"] if isinstance(item.get("function"), dict) else item
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise MessageError("bad_tool_calls", "a tool call has no name")
        arguments = body.get("arguments", {})
        if isinstance(arguments, str):
            try:
                decoded = json.loads(arguments)
            except ValueError:
                decoded = None
            if isinstance(decoded, dict):
                arguments = decoded
        calls.append({"type": "function", "function": {"name": name, "arguments": arguments}})
    return calls


def normalize_message(message: Any, unknown_role: str = "error") -> Message:
    """One message as ``{role, content[, tool_calls][, reasoning_content]}``.

    Accepts ``role``/``content`` and ``from``/``value`` keys and common role aliases
    (``human``, ``gpt``, ``function``, ...). ``unknown_role="user"`` maps any other role to
    ``user`` (the lenient reading of old datasets); the default raises :class:`MessageError`.
    """
    if not isinstance(message, Mapping):
        raise MessageError("bad_message", f"a message is a {type(message).__name__}, not an object")
    role = message.get("role", message.get("from", "user"))
    if not isinstance(role, str):
        raise MessageError("unknown_role", f"role {role!r} is not a string")
    role = ROLE_ALIASES.get(role.strip().lower(), role.strip().lower())
    if role not in ROLES:
        if unknown_role != "user":
            raise MessageError("unknown_role", f"unknown role {role!r}")
        role = "user"
    content = message.get("content", message.get("value", ""))
    out: Message = {"role": role, "content": _content_text(content)}
    if role == "assistant":
        calls = _normalize_tool_calls(message.get("tool_calls"))
        if calls:
            out["tool_calls"] = calls
        reasoning = message.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            out["reasoning_content"] = reasoning
    return out


def normalize_messages(messages: Sequence[Any], unknown_role: str = "error") -> list[Message]:
    """:func:`normalize_message` over a conversation."""
    return [normalize_message(m, unknown_role=unknown_role) for m in messages]


__all__ = [
    "ROLES",
    "ROLE_ALIASES",
    "Message",
    "MessageError",
    "normalize_message",
    "normalize_messages",
]
