"""The task text of a prompt: what the reward reads to find the expressions to solve.

A conversation's task is what its users asked; a prompt whose user turns are all blank
falls back to its system and user turns together. A prompt that arrives already rendered
is split back into turns by its ``<|im_start|>role ... <|im_end|>`` markers first. The
scans below are plain ``str.find`` loops, so any text, however large or odd, costs time
linear in its length.
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
    keep = frozenset(roles)
    lines = [str(m.get("content", "")) for m in messages if m.get("role") in keep]
    return "\n".join(lines)


def task_text_from_messages(messages: Sequence[Mapping[str, Any]] | None) -> str:
    """What the users asked; the system turns join in when the user turns hold no text."""
    if not messages:
        return ""
    asked = prompt_text_from_messages(messages, roles=("user",))
    return asked if asked.strip() else prompt_text_from_messages(messages)


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
    """The task text of a rendered prompt: its user turns, else its system and user turns,
    else (no turn markers at all) the whole text without tool blocks."""
    raw = _remove_tool_blocks(str(prompt))
    bodies = [(role, body.strip()) for role, body in _turns(raw)]
    for wanted in (("user",), ("system", "user")):
        found = [body for role, body in bodies if role in wanted and body]
        if found:
            return "\n".join(found)
    return raw.strip()


__all__ = ["prompt_text_from_messages", "task_text_from_messages", "task_text_from_prompt"]
