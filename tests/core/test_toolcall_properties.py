"""Property tests for `parse_tool_calls`: round-trips, agreement with the reference, no hangs."""

from __future__ import annotations

import json
import sys

import pytest
from agentrl import _core
from agentrl.parsing import parse_tool_calls
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.checks import fastest_seconds, typed
from tests.fakes.repo import BENCHES, needs_reference

sys.path.insert(0, str(BENCHES))
from reference_baseline import load_reference

REFERENCE = load_reference()
reference_only = needs_reference(REFERENCE)

EXAMPLES = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# JSON-compatible values; strings never contain the closing tag (it would end the block).
safe_text = st.text(max_size=20).filter(lambda s: "</tool_call>" not in s)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False)
    | safe_text
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(safe_text, inner, max_size=4),
    max_leaves=12,
)
arguments = st.dictionaries(safe_text, json_values, max_size=5)
names = st.text(min_size=1, max_size=30).filter(lambda s: "</tool_call>" not in s)


@pytest.mark.slow
@EXAMPLES
@given(calls=st.lists(st.tuples(names, arguments), min_size=1, max_size=3), sep=safe_text)
def test_canonical_calls_round_trip(calls: list[tuple[str, dict]], sep: str) -> None:
    sep = sep.replace("<tool_call>", "")
    text = sep.join(
        "<tool_call>"
        + json.dumps({"name": n, "arguments": a}, ensure_ascii=False, separators=(",", ":"))
        + "</tool_call>"
        for n, a in calls
    )
    expected = [{"name": n, "arguments": a, "canonical": True} for n, a in calls]
    assert typed(parse_tool_calls(text)) == typed(expected)


@pytest.mark.slow
@EXAMPLES
@given(value=arguments, sort_keys=st.booleans(), compact=st.booleans())
def test_json_dumps_matches_python(value: dict, sort_keys: bool, compact: bool) -> None:
    separators = (",", ":") if compact else (", ", ": ")
    want = json.dumps(value, ensure_ascii=False, sort_keys=sort_keys, separators=separators)
    assert _core.json_dumps(value, sort_keys=sort_keys, compact=compact) == want


@EXAMPLES
@given(value=st.floats())
def test_json_dumps_float_repr_matches_python(value: float) -> None:
    assert _core.json_dumps([value]) == json.dumps([value], separators=(",", ":"))


# Fragments that exercise every branch of the parser when glued together.
FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "<tool_call>{",
    '{"name":"calculate_math","arguments":{"expression":"1+1"}}',
    '{"name":',
    '"arguments":',
    '"args":',
    '"tool_name":"t"',
    '"function":{"name":"g"}',
    '"function":"x"',
    "}",
    "]",
    "[",
    ",",
    '"',
    "'",
    "\\",
    "(",
    ")",
    "calculate_math(",
    "calculator (",
    "python_math\u3000(",
    "xcalculate_math(",
    "计算calculate_math(",
    "expression",
    "expression=",
    " = ",
    '"2*3"',
    "'4/2'",
    "NaN",
    "1e400",
    "-0",
    "true",
    "null",
    "12345678901234567890",
    '"\\u00e9\\ud83d\\ude00"',
    " ",
    "\n",
    "\u00a0",
    "\u2028",
    "x",
    "é",
]


@reference_only
@EXAMPLES
@given(parts=st.lists(st.sampled_from(FRAGMENTS), max_size=25))
def test_agrees_with_the_reference_on_fragment_soup(parts: list[str]) -> None:
    text = "".join(parts)
    assert typed(parse_tool_calls(text)) == typed(REFERENCE["parse_tool_calls"](text))


@reference_only
@EXAMPLES
@given(text=st.text(alphabet=st.sampled_from("()'\"\\ ex=1+calcutor_mh<>/{}:,[]"), max_size=60))
def test_agrees_with_the_reference_on_small_alphabet_text(text: str) -> None:
    assert typed(parse_tool_calls(text)) == typed(REFERENCE["parse_tool_calls"](text))


@EXAMPLES
@given(text=st.text(max_size=300))
def test_random_text_never_raises(text: str) -> None:
    calls = parse_tool_calls(text)
    assert isinstance(calls, list)
    for call in calls:
        assert isinstance(call["arguments"], dict)
        assert isinstance(call["canonical"], bool)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300))
def test_random_bytes_decoded_leniently_never_raise(data: bytes) -> None:
    assert isinstance(parse_tool_calls(data.decode("utf-8", "surrogateescape")), list)


MEGABYTE = 1 << 20


def _repeat(piece: str) -> str:
    return piece * (MEGABYTE // len(piece))


ADVERSARIAL = {
    "unclosed_open_tags": _repeat("<tool_call>"),
    "open_tags_then_one_close": _repeat("<tool_call>") + "</tool_call>",
    "repeated_open_calls": _repeat("calculate_math("),
    "repeated_open_calls_with_quote": _repeat('calculate_math("'),
    "keyword_without_closing_quote": "calculator(" + _repeat("expression='") + ")",
    "nested_parentheses": "calculate_math(" + "(" * MEGABYTE,
    "deep_brackets_in_tag": "<tool_call>" + "[" * MEGABYTE + "</tool_call>",
    "long_string_argument": '<tool_call>{"name":"f","arguments":{"s":"'
    + "a" * MEGABYTE
    + '"}}</tool_call>',
    "many_small_calls": _repeat('<tool_call>{"name":"f","arguments":{"x":1}}</tool_call>'),
    "long_identifier_runs": _repeat("abcdefghij" * 10 + " "),
    "quotes_and_escapes": _repeat("calculate_math('\\'\"(\\\"'"),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_megabyte_adversarial_input_is_fast(name: str) -> None:
    text = ADVERSARIAL[name]
    best = fastest_seconds(lambda: parse_tool_calls(text))
    assert best < 0.1, f"{name}: {best * 1000:.1f} ms"
