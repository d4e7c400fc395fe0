"""Golden parity: `parse_tool_calls` returns exactly the golden dicts on the recorded corpus.

The golden file (copied from ../shared/golden/tool_calls.jsonl) holds the reference output;
non-finite floats are written there as the strings "nan", "inf", "-inf". Values are compared
with their Python types (``1``, ``1.0`` and ``True`` are different) and dict key order.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from agentrl.parsing import parse_tool_calls

from tests.fakes.checks import read_jsonl, typed

GOLDEN = Path(__file__).parents[1] / "data" / "tool_calls.jsonl"


ROWS = read_jsonl(GOLDEN)


def golden_form(value: Any) -> Any:
    """Comparable as the golden file writes it (non-finite floats as strings)."""
    return typed(value, nonfinite_as_text=True)


def test_golden_file_is_present_and_substantial() -> None:
    assert len(ROWS) >= 700
    assert any(call.get("parse_error") is not None for row in ROWS for call in row["calls"])
    assert any(not call["canonical"] for row in ROWS for call in row["calls"])


def test_every_golden_row_matches() -> None:
    mismatches = []
    for i, row in enumerate(ROWS):
        got = parse_tool_calls(row["text"])
        if golden_form(got) != golden_form(row["calls"]):
            mismatches.append((i, row["text"][:120], got, row["calls"]))
    assert not mismatches, f"{len(mismatches)} of {len(ROWS)} differ; first: {mismatches[0]}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '<tool_call>{"name":"f","arguments":{"x":NaN,"y":-Infinity,"z":1e400}}</tool_call>',
            [
                {
                    "name": "f",
                    "arguments": {"x": math.nan, "y": -math.inf, "z": math.inf},
                    "canonical": True,
                }
            ],
        ),
        (
            '<tool_call>{"name":"f","arguments":{"n":123456789012345678901234567890}}</tool_call>',
            [
                {
                    "name": "f",
                    "arguments": {"n": 123456789012345678901234567890},
                    "canonical": True,
                }
            ],
        ),
        (
            '<tool_call>{"name":"f","arguments":{"a":1,"b":2,"a":3}}</tool_call>',
            [{"name": "f", "arguments": {"a": 3, "b": 2}, "canonical": True}],
        ),
        (
            '<tool_call>{"name":1.5,"arguments":{}}</tool_call>',
            [{"name": 1.5, "arguments": {}, "canonical": True}],
        ),
    ],
)
def test_python_json_semantics_survive_the_binding(text: str, expected: list) -> None:
    assert golden_form(parse_tool_calls(text)) == golden_form(expected)


def test_parse_error_entries_keep_the_golden_key_order() -> None:
    (call,) = parse_tool_calls("<tool_call> [1, 2] </tool_call>")
    assert list(call) == ["name", "arguments", "parse_error", "canonical"]
    assert call == {"name": "", "arguments": {}, "parse_error": "[1, 2]", "canonical": False}


def test_non_string_input_is_converted_with_str() -> None:
    assert parse_tool_calls(None) == []
    assert parse_tool_calls(12) == []


def test_integer_literals_longer_than_cpython_allows_make_a_parse_error() -> None:
    ok = '<tool_call>{"name":"f","arguments":{"n":' + "7" * 4300 + "}}</tool_call>"
    assert parse_tool_calls(ok)[0]["arguments"]["n"] == int("7" * 4300)
    too_long = '<tool_call>{"name":"f","arguments":{"n":' + "7" * 4301 + "}}</tool_call>"
    assert "parse_error" in parse_tool_calls(too_long)[0]


def test_nesting_limit_is_pythons_json_recursion_limit_in_a_rollout() -> None:
    def block(depth: int) -> str:
        # The outer call object is one level; the arguments add depth - 1 more.
        inner = "[" * (depth - 2) + "]" * (depth - 2)
        return '<tool_call>{"name":"f","arguments":{"a":' + inner + "}}</tool_call>"

    assert "parse_error" not in parse_tool_calls(block(989))[0]
    assert "parse_error" in parse_tool_calls(block(990))[0]


def test_lone_surrogate_escapes_become_replacement_characters() -> None:
    # Python would keep "\ud800" in a str; Rust strings cannot hold it (documented deviation).
    (call,) = parse_tool_calls('<tool_call>{"name":"f","arguments":{"a":"\\ud800x"}}</tool_call>')
    assert call["arguments"] == {"a": "\ufffdx"}
