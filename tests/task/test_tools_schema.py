"""Tool-schema normalisation and merging, with the compatible rules."""

from __future__ import annotations

import json

import pytest
from agentrl.tools import (
    CALCULATE_MATH_SPEC,
    CALCULATOR_ALIAS_SPEC,
    UNIT_CONVERTER_SPEC,
    ToolSchemaError,
    append_calculator_alias,
    merge_tool_specs,
    normalize_tool_schema,
    parse_tool_schema,
    resolve_tool_specs,
    supported_tool_names,
    tool_name_set,
)

OPENAI = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


def _spec(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {}}}


@pytest.mark.parametrize(
    "raw",
    [
        [OPENAI],
        OPENAI,
        json.dumps([OPENAI]),
        json.dumps(OPENAI),
        [{"function": {"name": "f", "parameters": {"type": "object"}}}],
    ],
)
def test_openai_style_shapes_normalise_to_one_list(raw) -> None:
    assert normalize_tool_schema(raw) == [OPENAI]
    assert parse_tool_schema(raw) == [OPENAI]


def test_bare_specs_get_defaults_and_string_parameters_are_decoded() -> None:
    bare = [{"name": "g"}, {"name": "h", "description": "d", "parameters": '{"type": "object"}'}]
    out = normalize_tool_schema(bare)
    assert out == [
        {
            "type": "function",
            "function": {
                "name": "g",
                "description": "",
                "parameters": {"type": "object", "properties": {}},
            },
        },
        {
            "type": "function",
            "function": {"name": "h", "description": "d", "parameters": {"type": "object"}},
        },
    ]
    broken = normalize_tool_schema([{"name": "k", "parameters": "{not json"}])
    assert broken[0]["function"]["parameters"] == {"type": "object", "properties": {}}


def test_unusable_entries_are_skipped_and_nothing_gives_none() -> None:
    assert normalize_tool_schema([1, "x", {"other": 1}, {"name": ""}, OPENAI]) == [OPENAI]
    for raw in (None, "", [], "not json", 42, [1, 2], {"description": "no name"}):
        assert normalize_tool_schema(raw) is None


def test_parse_tool_schema_reports_malformed_fields() -> None:
    for empty in (None, "", [], "null", "[]"):
        assert parse_tool_schema(empty) is None
    with pytest.raises(ToolSchemaError, match="not valid JSON"):
        parse_tool_schema('[{"name": "f"')
    with pytest.raises(ToolSchemaError, match="list or an object"):
        parse_tool_schema(42)
    with pytest.raises(ToolSchemaError, match="no entry with a function name"):
        parse_tool_schema([{"foo": 1}])


def test_names_skip_malformed_specs() -> None:
    specs = [OPENAI, {"function": "oops"}, "x", _spec("f"), {"function": {"name": 3}}]
    assert supported_tool_names(specs) == ["f", "f"]
    assert tool_name_set(specs) == {"f"}
    assert supported_tool_names(None) == []


def test_merge_first_wins_drops_alias_and_respects_allowed_names() -> None:
    primary = [_spec("a"), _spec("calculator"), _spec("b")]
    extra = [_spec("b"), _spec("c")]
    merged = merge_tool_specs(primary, extra)
    assert supported_tool_names(merged) == ["a", "b", "c"]
    assert supported_tool_names(merge_tool_specs(primary, extra, keep_alias=True)) == [
        "a",
        "calculator",
        "b",
        "c",
    ]
    assert supported_tool_names(merge_tool_specs(primary, extra, allowed_names={"c"})) == ["c"]
    assert merge_tool_specs([], None) is None
    merged[0]["function"]["name"] = "changed"
    assert primary[0]["function"]["name"] == "a"  # deep copies


def test_resolve_uses_own_tools_else_defaults_or_both_when_forced() -> None:
    own = [_spec("x")]
    defaults = [_spec("calculate_math"), _spec("x")]
    assert supported_tool_names(resolve_tool_specs(own, defaults)) == ["x"]
    assert supported_tool_names(resolve_tool_specs(None, defaults)) == ["calculate_math", "x"]
    forced = resolve_tool_specs(own, defaults, force_all_tools=True)
    assert supported_tool_names(forced) == ["x", "calculate_math"]
    assert resolve_tool_specs(own, defaults, allowed_names={"y"}) is None


def test_calculator_alias_is_appended_once_after_calculate_math() -> None:
    tools = [CALCULATE_MATH_SPEC, UNIT_CONVERTER_SPEC]
    out = append_calculator_alias(tools)
    assert supported_tool_names(out) == ["calculate_math", "unit_converter", "calculator"]
    assert out[-1] == CALCULATOR_ALIAS_SPEC and out[-1] is not CALCULATOR_ALIAS_SPEC
    assert append_calculator_alias(out) == out
    assert append_calculator_alias([UNIT_CONVERTER_SPEC]) == [UNIT_CONVERTER_SPEC]
    assert append_calculator_alias(None) is None
