"""What the judge reads and writes: the task and episode as text, the rubric's chats
(``single``: one episode; ``rank``: a group side by side), and the score lines of its reply.

Scores are integers 0-9 on ``SCORE: n`` lines (``SCORE i: n`` per episode in rank mode),
read by one anchored pattern per line, so parsing a reply is linear in its length.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

MAX_SCORE = 9
# Longest text of one judged response (characters; its start and end are kept).
MAX_RESPONSE_CHARS = 6000

_SCORE_LINE = re.compile(
    r"^[\s*#>_`-]*score(?:\s*#?\s*(\d{1,3}))?\s*[:=]\s*\**\s*(-?\d+(?:\.\d+)?)", re.I
)


def _clip(text: str, limit: int = MAX_RESPONSE_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content", "")
    if isinstance(content, str):
        text = content
    else:
        text = json.dumps(content, ensure_ascii=False, default=str)
    calls = message.get("tool_calls")
    if calls:
        text += "\n[tool calls] " + json.dumps(calls, ensure_ascii=False, default=str)
    return text


def task_text(prompt: Any) -> str:
    """The task as the judge reads it: the prompt's messages (system ones left out)."""
    if isinstance(prompt, str):
        return _clip(prompt)
    lines = [
        f"{m.get('role', 'user')}: {_content(m)}"
        for m in prompt or []
        if isinstance(m, Mapping) and m.get("role") != "system"
    ]
    return _clip("\n".join(lines))


def response_text(completion: str, trajectory: Any = None) -> str:
    """The episode as the judge reads it: every turn after the prompt (tool results
    included) when the whole episode is known, else the final completion."""
    conversation = getattr(trajectory, "conversation", None) or []
    prompt = getattr(trajectory, "messages", None) or []
    turns = conversation[len(prompt) :]
    if not turns:
        return _clip(completion)
    return _clip("\n".join(f"{m.get('role', '?')}: {_content(m)}" for m in turns))


def single_chat(rubric: str, task: str, response: str) -> list[dict[str, str]]:
    system = (
        "You are a strict, fair judge. Read the task and the response, judge the response "
        f"by the rubric, reason briefly, then end with one line `SCORE: n`, n an integer "
        f"from 0 (worst) to {MAX_SCORE} (best).\n\nRubric:\n{rubric}"
    )
    user = f"Task:\n{task}\n\nResponse:\n{response}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def rank_chat(rubric: str, task: str, responses: Sequence[str]) -> list[dict[str, str]]:
    n = len(responses)
    system = (
        f"You are a strict, fair judge. Read the task and the {n} responses to it, compare "
        "them by the rubric (a better response scores higher than a worse one), reason "
        f"briefly, then end with one line per response, `SCORE i: n` for i from 1 to {n}, "
        f"n an integer from 0 (worst) to {MAX_SCORE} (best).\n\nRubric:\n{rubric}"
    )
    body = "\n\n".join(f"Response {i}:\n{r}" for i, r in enumerate(responses, 1))
    user = f"Task:\n{task}\n\n{body}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_scores(reply: str, n: int | None) -> list[float] | None:
    """The scores a reply gives, in [0, 1]; None when it cannot be read.

    ``n=None``: one score, from the last ``SCORE: x`` line. ``n`` episodes: the last
    ``SCORE i: x`` line of each i in 1..n, all present. A value outside 0..9 is unreadable.
    Each line is matched once by an anchored pattern, so this is linear in the reply.
    """
    found: dict[int, float] = {}
    for line in reply.splitlines():
        match = _SCORE_LINE.match(line[:200])
        if match is None:
            continue
        index = int(match.group(1)) if match.group(1) else 0
        found[index] = float(match.group(2))
    wanted = [0] if n is None else list(range(1, n + 1))
    if n == 1 and 1 not in found and 0 in found:
        found[1] = found[0]
    values = [found.get(i) for i in wanted]
    if any(v is None or not 0.0 <= v <= MAX_SCORE for v in values):
        return None
    return [float(v) / MAX_SCORE for v in values]  # type: ignore[arg-type]


def cut_at_score(text: str) -> str:
    """The reasoning before a score line the judge wrote itself (its score is read after)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if _SCORE_LINE.match(line[:200]):
            return "\n".join(lines[:i]).rstrip()
    return text.rstrip()


def score_reads(mode: str, n: int) -> list[str]:
    """The suffixes after which a local judge's score digit is read: one per episode."""
    if mode == "single":
        return ["\nSCORE: "]
    return [f"\nSCORE {i}: " for i in range(1, n + 1)]


__all__ = [
    "MAX_RESPONSE_CHARS",
    "MAX_SCORE",
    "cut_at_score",
    "parse_scores",
    "rank_chat",
    "response_text",
    "score_reads",
    "single_chat",
    "task_text",
]
