"""The task text of a prompt: what the reward reads to find the expressions to solve.

The seed takes the user turns (or, when there are none, the system and user turns) of a
conversation; for an already-rendered prompt it recovers those turns from the
``<|im_start|>role ... <|im_end|>`` markup. Both are written here with plain scans, linear
in the length of the text whatever it contains.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

_TURN_OPEN = "<|im_start|>"
_TURN_CLOSE = "<|im_end|>"
_TOOLS_OPEN = "<|tools|>"
_TOOLS_CLOSE = "<|/tools|>"
_TURN_ROLES = ("system", "user", "assistant", "tool")


def prompt_text_from_messages(
    messages: Sequence[Mapping[str, Any]], roles: Iterable[str] = ("system", "user")
) -> str:
    """Contents of the messages with the given roles, one per line."""
    wanted = set(roles)
    return "\n".join(str(m.get("content", "")) for m in messages if m.get("role") in wanted)


def task_text_from_messages(messages: Sequence[Mapping[str, Any]] | None) -> str:
    """User turns joined by newlines; the system turns too when no user turn has text."""
    if not messages:
        return ""
    user_text = prompt_text_from_messages(messages, roles=("user",))
    if user_text.strip():
        return user_text
    return prompt_text_from_messages(messages, roles=("system", "user"))


def _remove_tool_blocks(text: str) -> str:
    """Drop every ``<|tools|>...<|/tools|>`` span (shortest match, left to right)."""
    out: list[str] = []
    cursor = 0
    while True:
        start = text.find(_TOOLS_OPEN, cursor)
        if start < 0:
            break
        end = text.find(_TOOLS_CLOSE, start + len(_TOOLS_OPEN))
        if end < 0:
            break
        out.append(text[cursor:start])
        cursor = end + len(_TOOLS_CLOSE)
    out.append(text[cursor:])
    return "".join(out)


def _turns(text: str) -> list[tuple[str, str]]:
    """``(role, content)`` of each complete ``<|im_start|>role\\n...<|im_end|>`` turn."""
    turns: list[tuple[str, str]] = []
    cursor = 0
    while True:
        start = text.find(_TURN_OPEN, cursor)
        if start < 0:
            break
        head = start + len(_TURN_OPEN)
        role = next((r for r in _TURN_ROLES if text.startswith(r + "\n", head)), None)
        if role is None:
            cursor = head
            continue
        body = head + len(role) + 1
        end = text.find(_TURN_CLOSE, body)
        if end < 0:
            break  # no later turn can close either
        turns.append((role, text[body:end]))
        cursor = end + len(_TURN_CLOSE)
    return turns


def task_text_from_prompt(prompt: str) -> str:
    """The task text of a rendered prompt (user turns, else system+user, else the text)."""
    raw = _remove_tool_blocks(str(prompt))
    turns = _turns(raw)
    if turns:
        user_parts = [c.strip() for r, c in turns if r == "user" and c.strip()]
        if user_parts:
            return "\n".join(user_parts)
        parts = [c.strip() for r, c in turns if r in ("system", "user") and c.strip()]
        if parts:
            return "\n".join(parts)
    return raw.strip()


__all__ = ["prompt_text_from_messages", "task_text_from_messages", "task_text_from_prompt"]
