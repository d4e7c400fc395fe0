"""The R1-style rewards common in GRPO recipes: answer accuracy, an integer answer, the
``<think>``/``<answer>`` layout (strict, soft) and a partial count of its tags.

Each takes the GRPO calling convention of `agentrl.rewards.functions` and scans its
completion a bounded number of times, so it is linear in the completion's length.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def extract_answer(text: str) -> str:
    """The text after the last ``<answer>`` up to the next ``</answer>`` (or the end),
    stripped; the whole stripped text when there is no ``<answer>``."""
    start = text.rfind("<answer>")
    if start < 0:
        return text.strip()
    body = text[start + len("<answer>") :]
    end = body.find("</answer>")
    return (body if end < 0 else body[:end]).strip()


def r1_accuracy_reward(
    prompts: Sequence[Any], completions: Sequence[str], answers: Sequence[Any], **extra: Any
) -> list[float | None]:
    """2.0 when the extracted answer equals the expected answer (both stripped), else 0.0;
    ``None`` where there is no expected answer. A list of answers counts as its first item."""
    del prompts, extra
    out: list[float | None] = []
    for completion, answer in zip(completions, answers, strict=True):
        expected = first_answer(answer)
        if expected is None:
            out.append(None)
        else:
            out.append(2.0 if extract_answer(completion) == expected else 0.0)
    return out


def r1_int_reward(
    prompts: Sequence[Any], completions: Sequence[str], answers: Sequence[Any], **extra: Any
) -> list[float]:
    """0.5 when the extracted answer is a whole number (ASCII digits, optional minus sign)."""
    del prompts, answers, extra
    return [0.5 if _is_integer_text(extract_answer(c)) else 0.0 for c in completions]


def r1_strict_format_reward(
    prompts: Sequence[Any], completions: Sequence[str], answers: Sequence[Any], **extra: Any
) -> list[float]:
    """0.5 when the whole completion is ``<think>\\n…\\n</think>\\n<answer>\\n…\\n</answer>``
    with at most one trailing newline, else 0.0."""
    del prompts, answers, extra
    return [0.5 if _strict_format(c) else 0.0 for c in completions]


def r1_soft_format_reward(
    prompts: Sequence[Any], completions: Sequence[str], answers: Sequence[Any], **extra: Any
) -> list[float]:
    """0.5 when a ``<think>…</think>`` block is followed (whitespace allowed between) by an
    ``<answer>…</answer>`` block anywhere in the completion, else 0.0."""
    del prompts, answers, extra
    return [0.5 if _soft_format(c) else 0.0 for c in completions]


def r1_xml_count_reward(
    prompts: Sequence[Any], completions: Sequence[str], answers: Sequence[Any], **extra: Any
) -> list[float]:
    """Partial credit for the R1 layout: 0.125 for each of ``<think>\\n``, ``\\n</think>\\n``,
    ``\\n<answer>\\n`` and ``\\n</answer>`` appearing exactly once, minus 0.001 per character
    after the last ``\\n</answer>`` (one trailing newline is free); never below 0."""
    del prompts, answers, extra
    return [_xml_count(c) for c in completions]


def first_answer(answer: Any) -> str | None:
    if isinstance(answer, list | tuple):
        answer = answer[0] if answer else None
    return None if answer is None else str(answer).strip()


def _is_integer_text(text: str) -> bool:
    digits = text[1:] if text.startswith("-") else text
    return digits.isascii() and digits.isdigit()


def _strict_format(text: str) -> bool:
    head, separator, tail = "<think>\n", "\n</think>\n<answer>\n", "\n</answer>"
    body = text[:-1] if text.endswith(tail + "\n") else text
    if len(body) < len(head) + len(separator) + len(tail):
        return False
    if not (body.startswith(head) and body.endswith(tail)):
        return False
    return separator in body[len(head) : len(body) - len(tail)]


def _soft_format(text: str) -> bool:
    start = text.find("<think>")
    if start < 0:
        return False
    last_close = text.rfind("</answer>")
    position = text.find("</think>", start + len("<think>"))
    while position >= 0:
        after = position + len("</think>")
        # Skip whitespace; runs end at the next "<", so every character is visited once.
        answer_at = after
        while answer_at < len(text) and text[answer_at].isspace():
            answer_at += 1
        if text.startswith("<answer>", answer_at) and last_close >= answer_at + len("<answer>"):
            return True
        position = text.find("</think>", after)
    return False


def _xml_count(text: str) -> float:
    score = 0.0
    for tag in ("<think>\n", "\n</think>\n", "\n<answer>\n", "\n</answer>"):
        if text.count(tag) == 1:
            score += 0.125
    closing = text.rfind("\n</answer>")
    if closing >= 0:
        trailing = text[closing + len("\n</answer>") :]
        if trailing.startswith("\n"):
            trailing = trailing[1:]
        score -= 0.001 * len(trailing)
    return max(score, 0.0)


__all__ = [
    "extract_answer",
    "first_answer",
    "r1_accuracy_reward",
    "r1_int_reward",
    "r1_soft_format_reward",
    "r1_strict_format_reward",
    "r1_xml_count_reward",
]
