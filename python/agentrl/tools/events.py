"""What a parsed call becomes and what goes back to the model: the call's argument object,
the event of a failed call, and the ``tool`` message that carries a result.

`ToolEvent` itself lives with the episode records (`agentrl.trajectory`), which the
rollout fills and the reward reads; it is re-exported here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentrl.errors import exception_text
from agentrl.trajectory import ToolEvent, event_dicts

# Longest error text kept in an event (characters of the exception message).
ERROR_CHARS = 200


def why(exc: BaseException) -> str:
    """A failed call's error text: the exception's message, or its type when it has none."""
    return exception_text(exc) or type(exc).__name__


def failed_event(name: str, args: dict[str, Any], message: str, canonical: bool) -> ToolEvent:
    """The event of a call that did not run or raised: ``result`` is ``{"error": text}``."""
    return ToolEvent(
        ok=False,
        name=name,
        args=args,
        result={"error": message[:ERROR_CHARS]},
        canonical=canonical,
    )


def call_arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    """The argument object of a parsed call, decoded leniently.

    ``arguments`` (or ``args``) given as a JSON string is decoded; a string that is not
    JSON is taken as ``{"expression": text}``; anything that is not an object becomes ``{}``.
    """
    raw = call.get("arguments", call.get("args", {}))
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raw = {"expression": raw}
    return raw if isinstance(raw, dict) else {}


def tool_message(result: Any, max_chars: int = 1024) -> str:
    """The content of the ``tool`` message that carries a result back to the model.

    Compact JSON, non-ASCII kept, cut to ``max_chars`` characters, as the rollout
    writes it, so that demonstrations and rollouts show the model the same text.
    """
    text = json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=str)
    return text[:max_chars] if max_chars > 0 else text


__all__ = [
    "ERROR_CHARS",
    "ToolEvent",
    "call_arguments",
    "event_dicts",
    "failed_event",
    "tool_message",
    "why",
]
