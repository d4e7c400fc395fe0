"""A tool schema whose ``parameters`` is not an object schema (``"oops"``, a list, a number)
is refused with a line naming the tool, never turned into an empty schema without a word:
in a data record's tools (the record is skipped, named and counted) and in a `Tool`."""

from __future__ import annotations

import json

import pytest
from agentrl.data.prompt_pool import PromptPool
from agentrl.tools import Tool, ToolSchemaError, parse_tool_schema


def _spec(parameters: object) -> dict:
    return {"type": "function", "function": {"name": "lookup", "parameters": parameters}}


@pytest.mark.parametrize("parameters", ["oops", [1, 2], 3, '"a json string"', True])
def test_parameters_that_are_no_object_schema_are_refused(parameters: object) -> None:
    with pytest.raises(ToolSchemaError, match=r"tool 'lookup': parameters must be a JSON object"):
        parse_tool_schema([_spec(parameters)])
    with pytest.raises(ToolSchemaError, match=r"tool 'lookup': parameters must be a JSON object"):
        Tool("lookup", print, _spec(parameters))


def test_object_schemas_as_objects_or_json_text_and_no_parameters_are_accepted() -> None:
    text = json.dumps({"type": "object", "properties": {"q": {"type": "string"}}})
    for parameters in ({"type": "object", "properties": {}}, text, None):
        (spec,) = parse_tool_schema([_spec(parameters)])
        assert spec["function"]["name"] == "lookup"
    assert parse_tool_schema([_spec(text)])[0]["function"]["parameters"]["properties"] == {
        "q": {"type": "string"}
    }


def test_a_record_with_such_a_tool_is_skipped_named_and_counted(tmp_path) -> None:
    good = {"prompt": "1+1?", "gt": ["2"]}
    bad = {"prompt": "2+2?", "gt": ["4"], "tools": [_spec("oops")]}
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (good, bad, good)) + "\n")
    pool = PromptPool(str(path))
    assert len(pool) == 2 and pool.stats["bad_tools"] == 1
    (skipped,) = pool.skipped
    assert skipped.line == 2 and "tool 'lookup': parameters must be a JSON object" in str(skipped)
