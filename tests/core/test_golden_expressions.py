"""Golden parity: extraction, canonical form, safe evaluation and formatting match the golden file.

The golden file (copied from ../shared/golden/expressions.jsonl) records, for each text, the
reference implementation's `extract_arithmetic_expressions`, `canonicalize_expression`,
`safe_eval_math` value (or the exception it raised) and `format_number` string (or that it
raised). Only "raised or
not" is part of the contract, not the exception class. Non-finite values are written as the
strings "nan", "inf", "-inf".
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from agentrl._core import SafeEvalError
from agentrl.parsing import (
    canonicalize_expression,
    extract_expressions,
    format_number,
    safe_eval,
)

from tests.fakes.checks import read_jsonl, same_float

GOLDEN = Path(__file__).parents[1] / "data" / "expressions.jsonl"


ROWS = read_jsonl(GOLDEN)


def as_float(value: float | str) -> float:
    """Golden values are JSON numbers, or "nan" / "inf" / "-inf" strings."""
    return float(value)


def report(mismatches: list[str]) -> str:
    shown = "\n".join(mismatches[:15])
    return f"{len(mismatches)} of {len(ROWS)} rows differ from the golden file:\n{shown}"


def test_golden_file_covers_every_outcome() -> None:
    assert len(ROWS) >= 1000
    assert any(row["extracted"] for row in ROWS)
    assert any("eval_error" in row and "eval" not in row for row in ROWS)
    assert any("eval" in row and "eval_error" in row for row in ROWS)  # formatting raised
    assert any("formatted" in row for row in ROWS)


def test_extracted_expressions_match_the_golden_outputs() -> None:
    mismatches = []
    for row in ROWS:
        got = extract_expressions(row["text"])
        if got != row["extracted"]:
            mismatches.append(f"{row['text']!r:.120}: got {got}, golden {row['extracted']}")
    assert not mismatches, report(mismatches)


def test_canonical_forms_match_the_golden_outputs() -> None:
    mismatches = [
        f"{row['text']!r:.120}"
        for row in ROWS
        if canonicalize_expression(row["text"]) != row["canonical"]
    ]
    assert not mismatches, report(mismatches)


def test_evaluation_matches_the_golden_value_or_raises_where_it_raised() -> None:
    mismatches = []
    for row in ROWS:
        try:
            got: float | None = safe_eval(row["text"])
        except ValueError:
            got = None
        if "eval" in row:
            want = as_float(row["eval"])
            if got is None or not same_float(got, want):
                mismatches.append(f"{row['text']!r:.120}: got {got}, golden {want!r}")
        elif got is not None:
            mismatches.append(f"{row['text']!r:.120}: got {got}, golden raised {row['eval_error']}")
    assert not mismatches, report(mismatches)


def test_formatting_matches_the_golden_string_or_raises_where_it_raised() -> None:
    mismatches = []
    for row in ROWS:
        if "eval" not in row:
            continue
        value = as_float(row["eval"])
        try:
            got: str | None = format_number(value)
        except (ValueError, OverflowError):
            got = None
        want = row.get("formatted")
        if got != want:
            mismatches.append(f"{value!r}: got {got!r}, golden {want!r}")
    assert not mismatches, report(mismatches)


def test_format_number_raises_overflow_for_infinity_and_value_error_for_nan() -> None:
    with pytest.raises(OverflowError):
        format_number(math.inf)
    with pytest.raises(OverflowError):
        format_number(-math.inf)
    with pytest.raises(ValueError):
        format_number(math.nan)


def test_safe_eval_errors_are_value_errors_that_say_what_and_where() -> None:
    with pytest.raises(SafeEvalError, match=r"unknown name 'x'.*character 2"):
        safe_eval("1 + x")
    assert issubclass(SafeEvalError, ValueError)
