"""Text parsing and safe arithmetic, backed by the Rust core (`agentrl._core`).

These functions are the reward's contract: they reproduce the seed trainer's behaviour
exactly (see tests/test_golden_parsing.py) while running in linear time on any input.
"""

from __future__ import annotations

from typing import Any

from agentrl import _core


def canonicalize_expression(text: str) -> str:
    """Full-width characters to ASCII, ``^`` to ``**``, whitespace removed."""
    return _core.canonicalize_expression(text)


def safe_eval(expr: str) -> float:
    """Evaluate an arithmetic expression with Python float semantics, never with ``eval``.

    Raises ``ValueError`` (``SafeEvalError``) saying what was wrong for any invalid input.
    """
    return _core.safe_eval(expr)


def format_number(value: float) -> str:
    """Integral values as exact integer digits, others with at most 10 decimals."""
    return _core.format_number(value)


def extract_expressions(text: str, max_exprs: int = 8) -> list[str]:
    """Arithmetic expressions found in mixed Chinese/English text, each validated."""
    return _core.extract_expressions(text, max_exprs)


def parse_tool_calls(text: str) -> list[dict[str, Any]]:
    """Seed-compatible tool-call parsing: tagged JSON blocks, else function-style calls."""
    return _core.parse_tool_calls(text)


__all__ = [
    "canonicalize_expression",
    "extract_expressions",
    "format_number",
    "parse_tool_calls",
    "safe_eval",
]
