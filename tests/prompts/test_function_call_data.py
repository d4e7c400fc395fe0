"""Function-calling data in the formats people have: BFCL, xLAM, OpenAI with a
``tool_calls`` target, Hermes; the schema conversion; malformed records reported by line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentrl.data import PromptPool, PromptPoolError
from agentrl.data.function_calling import FunctionCallDataError, calls_ground_truth
from agentrl.tools.schema import json_schema_tool

BFCL_FUNCTION = {
    "name": "calculate_triangle_area",
    "description": "Area of a triangle.",
    "parameters": {
        "type": "dict",
        "properties": {
            "base": {"type": "integer", "description": "The base."},
            "height": {"type": "float", "description": "The height."},
            "unit": {"type": "string", "description": "The unit."},
            "sides": {"type": "tuple", "items": {"type": "float"}, "description": "Sides."},
            "meta": {
                "type": "dict",
                "properties": {"tags": {"type": "array", "items": {"type": "any"}}},
            },
        },
        "required": ["base", "height"],
    },
}
BFCL_QUESTION = [[{"role": "user", "content": "Area of a triangle of base 10 and height 5?"}]]
BFCL_ANSWER = [{"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            },
            "required": ["city"],
        },
    },
}


def _write(path: Path, lines: list[object]) -> Path:
    text = "\n".join(x if isinstance(x, str) else json.dumps(x, ensure_ascii=False) for x in lines)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def _pool(path: Path, **options: object) -> PromptPool:
    return PromptPool(str(path), require_gt=False, **options)  # type: ignore[arg-type]


def _skipped(pool: PromptPool) -> list[tuple[int, str]]:
    return [(s.line, s.reason) for s in pool.skipped]


def test_bfcl_types_become_the_json_schema_types_the_model_sees() -> None:
    spec = json_schema_tool(BFCL_FUNCTION)
    assert spec is not None and spec["type"] == "function"
    parameters = spec["function"]["parameters"]
    properties = parameters["properties"]
    assert parameters["type"] == "object" and parameters["required"] == ["base", "height"]
    assert properties["base"]["type"] == "integer"
    assert properties["height"]["type"] == "number" and properties["height"]["format"] == "float"
    assert properties["height"]["description"].endswith("This is a float type value.")
    assert properties["sides"] == {
        "type": "array",
        "items": {
            "type": "number",
            "format": "float",
            "description": " This is a float type value.",
        },
        "description": "Sides.",
    }
    assert properties["meta"]["type"] == "object"
    assert properties["meta"]["properties"]["tags"]["items"] == {"type": "string"}
    # The record's own doc is left as it was (the reward may read BFCL's types).
    assert BFCL_FUNCTION["parameters"]["type"] == "dict"


def test_xlam_argument_tables_and_python_type_names_convert() -> None:
    doc = {
        "name": "search",
        "description": "d",
        "parameters": {
            "q": {"type": "str", "description": "query", "default": "cats"},
            "ids": {"type": "List[int]", "description": "ids"},
            "limit": {"type": "int, optional", "description": "n", "default": 5},
            "extra": {"type": "Optional[Dict[str, Any]]", "description": "e"},
            "flag": {"type": "bool", "description": "f"},
        },
    }
    spec = json_schema_tool(doc)
    assert spec is not None
    parameters = spec["function"]["parameters"]
    types = {k: v["type"] for k, v in parameters["properties"].items()}
    assert types == {
        "q": "string",
        "ids": "array",
        "limit": "integer",
        "extra": "object",
        "flag": "boolean",
    }
    assert parameters["properties"]["ids"]["items"] == {"type": "integer"}
    assert parameters["required"] == ["q", "ids", "flag"]  # optional-marked ones are not


def test_bfcl_records_with_the_possible_answer_file_beside_them(tmp_path) -> None:
    data = _write(
        tmp_path / "BFCL_v3_simple.json",
        [
            {"id": "simple_0", "question": BFCL_QUESTION, "function": [BFCL_FUNCTION]},
            {"id": "simple_1", "question": 5, "function": [BFCL_FUNCTION]},
            "{broken",
            {
                "id": "simple_3",
                "question": BFCL_QUESTION,
                "function": [{"name": "f", "parameters": "oops"}],
            },
            {"id": "simple_4", "question": BFCL_QUESTION, "function": [BFCL_FUNCTION]},
            {"id": "simple_5", "question": [BFCL_QUESTION[0]] * 2, "function": [BFCL_FUNCTION]},
        ],
    )
    (tmp_path / "possible_answer").mkdir()
    _write(
        tmp_path / "possible_answer" / data.name,
        [{"id": "simple_0", "ground_truth": BFCL_ANSWER}],
    )
    pool = _pool(data)
    assert len(pool) == 1 and pool.data_formats == {"bfcl": 1}
    assert _skipped(pool) == [
        (2, "bad_messages"),
        (3, "bad_json"),
        (4, "bad_tools"),
        (5, "bad_gt"),  # no possible answer for simple_4
        (6, "bad_messages"),  # a multi-turn entry
    ]
    assert "possible_answer" in pool.notes[0] and data.name in pool.notes[0]
    sample = pool[0]
    assert sample.messages == BFCL_QUESTION[0]
    assert sample["ground_truth"] == BFCL_ANSWER
    assert sample["function_docs"] == [BFCL_FUNCTION]  # BFCL's own types, for the reward
    assert sample["data_format"] == "bfcl" and sample["id"] == "simple_0"
    assert sample.tools == [json_schema_tool(BFCL_FUNCTION)]


def test_bfcl_answers_from_a_named_file_a_column_and_irrelevance(tmp_path) -> None:
    answers = _write(tmp_path / "answers.jsonl", [{"id": "a", "ground_truth": BFCL_ANSWER}])
    column = [{"calculate_triangle_area": {"base": [3], "height": [4.0]}}]
    data = _write(
        tmp_path / "data.jsonl",
        [
            {"id": "a", "question": BFCL_QUESTION, "function": [BFCL_FUNCTION]},
            {
                "id": "b",
                "question": BFCL_QUESTION,
                "function": [BFCL_FUNCTION],
                "ground_truth": column,
            },
            {"id": "irrelevance_7", "question": BFCL_QUESTION, "function": [BFCL_FUNCTION]},
        ],
    )
    pool = _pool(data, possible_answer=str(answers))
    assert [s["ground_truth"] for s in pool] == [BFCL_ANSWER, column, []]
    broken = _write(tmp_path / "broken.jsonl", [{"id": "a"}])
    with pytest.raises(FunctionCallDataError, match=r"broken.jsonl:1"):
        _pool(data, possible_answer=str(broken))


def test_xlam_records_and_their_malformed_lines(tmp_path) -> None:
    tools = [
        {
            "name": "live_giveaways_by_type",
            "description": "Giveaways of a type.",
            "parameters": {
                "type": {"description": "game, loot or beta", "type": "str", "default": "game"},
                "limit": {"description": "n", "type": "int, optional", "default": 5},
            },
        }
    ]
    calls = [
        {"name": "live_giveaways_by_type", "arguments": {"type": "beta"}},
        {"name": "live_giveaways_by_type", "arguments": {"type": "game", "limit": 5}},
    ]
    good = {"id": 1, "query": "Beta and game giveaways?", "tools": json.dumps(tools)}
    data = _write(
        tmp_path / "xlam.jsonl",
        [
            {**good, "answers": json.dumps(calls)},
            {**good, "answers": "[{oops"},
            {**good, "answers": json.dumps([{"arguments": {}}])},
            {**good, "answers": json.dumps(calls), "tools": "not json"},
            {**good, "answers": "[]"},
        ],
    )
    pool = _pool(data)
    assert _skipped(pool) == [(2, "bad_tool_calls"), (3, "bad_tool_calls"), (4, "bad_tools")]
    first, no_call = pool[0], pool[1]
    assert first.messages == [{"role": "user", "content": "Beta and game giveaways?"}]
    assert first["ground_truth"] == [
        {"live_giveaways_by_type": {"type": ["beta"], "limit": ["", 5]}},
        {"live_giveaways_by_type": {"type": ["game"], "limit": [5, ""]}},
    ]
    assert first.tools[0]["function"]["parameters"]["required"] == ["type"]
    assert first["function_docs"] == tools and "answers" not in first.columns
    assert no_call["ground_truth"] == []


def test_openai_records_cut_the_target_turn_from_the_prompt(tmp_path) -> None:
    call = {
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Paris?"}]
    data = _write(
        tmp_path / "openai.jsonl",
        [
            {
                "messages": [*prompt, {"role": "assistant", "content": "", "tool_calls": [call]}],
                "tools": [WEATHER],
            },
            {
                "messages": [*prompt, {"role": "assistant", "content": "No.", "tool_calls": []}],
                "tools": [WEATHER],
            },
            {
                "messages": [*prompt, {"role": "assistant", "tool_calls": "{bad"}],
                "tools": [WEATHER],
            },
            {
                "messages": [
                    *prompt,
                    {
                        "role": "assistant",
                        "tool_calls": [{"function": {"name": "get_weather", "arguments": "[1]"}}],
                    },
                ],
                "tools": [WEATHER],
            },
        ],
    )
    pool = _pool(data)
    assert pool.data_formats == {"openai": 2}
    assert _skipped(pool) == [(3, "bad_tool_calls"), (4, "bad_tool_calls")]
    assert pool[0].messages == prompt and pool[1].messages == prompt
    assert pool[0]["ground_truth"] == [{"get_weather": {"city": ["Paris"], "unit": ["", "c"]}}]
    assert pool[1]["ground_truth"] == []  # the right answer is no call
    # Named, the format takes the last assistant turn of every record as the target.
    plain = _write(
        tmp_path / "named.jsonl",
        [{"messages": [*prompt, {"role": "assistant", "content": "No."}], "tools": [WEATHER]}],
    )
    assert _pool(plain, data_format="openai")[0]["ground_truth"] == []
    assert _pool(plain, data_format="auto")[0].messages[-1]["role"] == "assistant"


def test_hermes_conversations_with_python_literal_tools(tmp_path) -> None:
    tools = "[{'type': 'function', 'function': " + repr(WEATHER["function"]) + "}]"
    system = f"You are a function calling AI model. <tools>\n{tools}\n</tools> Use <tool_call>."
    body = "{'arguments': {'city': 'Oslo', 'unit': 'f'}, 'name': 'get_weather'}"
    call = f"<tool_call>\n{body}\n</tool_call>"
    turns = [{"from": "system", "value": system}, {"from": "human", "value": "Oslo, in F?"}]
    data = _write(
        tmp_path / "hermes.jsonl",
        [
            {
                "conversations": [
                    *turns,
                    {"from": "gpt", "value": call},
                    {"from": "tool", "value": "r"},
                ]
            },
            {"conversations": [*turns, {"from": "gpt", "value": "I cannot."}]},
            {
                "conversations": [
                    *turns,
                    {"from": "gpt", "value": "<tool_call>\n{'name': \n</tool_call>"},
                ]
            },
            {"conversations": [*turns]},
            {
                "conversations": [
                    {"from": "system", "value": "<tools>\n{oops\n</tools>"},
                    *turns[1:],
                ]
            },
        ],
    )
    pool = _pool(data)
    assert pool.data_formats == {"hermes": 2}
    assert _skipped(pool) == [(3, "bad_tool_calls"), (4, "no_messages"), (5, "bad_tools")]
    sample = pool[0]
    assert sample.messages == [{"role": "user", "content": "Oslo, in F?"}]  # tools: not text
    assert sample.tools == [json_schema_tool(WEATHER)]
    assert sample["ground_truth"] == [{"get_weather": {"city": ["Oslo"], "unit": ["f"]}}]
    assert pool[1]["ground_truth"] == []


def test_function_call_records_keep_their_own_tools_whatever_the_registry(tmp_path) -> None:
    data = _write(
        tmp_path / "xlam.jsonl",
        [{"query": "q", "tools": json.dumps([WEATHER]), "answers": "[]"}],
    )
    default = [{"type": "function", "function": {"name": "calculate_math", "parameters": {}}}]
    pool = _pool(
        data, allowed_tools=["calculate_math"], default_tools=default, force_all_tools=True
    )
    assert [t["function"]["name"] for t in pool[0].tools] == ["get_weather"]


def test_a_file_is_read_in_the_format_of_its_first_record(tmp_path) -> None:
    data = _write(
        tmp_path / "mixed.jsonl",
        [
            {"query": "q", "tools": json.dumps([WEATHER]), "answers": "[]"},
            {"messages": [{"role": "user", "content": "plain"}], "gt": "1"},
        ],
    )
    pool = _pool(data)
    assert len(pool) == 1 and _skipped(pool) == [(2, "no_messages")]
    with pytest.raises(PromptPoolError, match=r"mixed.jsonl:2: no_messages"):
        _pool(data, strict=True)


def test_concrete_calls_become_bfcl_possible_answers() -> None:
    spec = json_schema_tool(
        {
            "name": "order",
            "parameters": {
                "type": "object",
                "properties": {
                    "items": {"type": "array", "items": {"type": "object"}},
                    "guest": {"type": "object"},
                    "note": {"type": "string"},
                    "express": {"type": "boolean", "default": False},
                },
                "required": ["items", "guest"],
            },
        }
    )
    assert spec is not None
    arguments = {"items": [{"id": "A", "n": 2}], "guest": {"adults": 2}, "express": False}
    assert calls_ground_truth([("order", arguments)], [spec]) == [
        {
            "order": {
                "items": [[{"id": ["A"], "n": [2]}]],
                "guest": [{"adults": [2]}],
                "express": [False, ""],
                "note": [""],
            }
        }
    ]


def test_records_a_policy_skips_are_not_counted_as_function_calling(tmp_path) -> None:
    data = _write(
        tmp_path / "xlam.jsonl", [{"query": "q", "tools": json.dumps([WEATHER]), "answers": "[]"}]
    )
    pool = PromptPool(str(data), require_gt=True, allow_empty=True)
    assert len(pool) == 0 and not pool.data_formats and pool.stats["skip_no_gt"] == 1
    assert "--reward_funcs function_call" in pool.skipped[0].detail


def test_xlam_as_shipped_a_json_array_file(tmp_path) -> None:
    tools = json.dumps([WEATHER["function"]])
    calls = json.dumps([{"name": "get_weather", "arguments": {"city": "Oslo"}}])
    rows = [{"id": i, "query": f"Oslo {i}?", "tools": tools, "answers": calls} for i in range(3)]
    path = tmp_path / "xlam_function_calling_60k.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    pool = _pool(path)
    assert len(pool) == 3 and pool.data_formats == {"xlam": 3}
    assert pool[2].messages == [{"role": "user", "content": "Oslo 2?"}]
    assert pool[2]["ground_truth"] == [{"get_weather": {"city": ["Oslo"], "unit": ["", "c"]}}]
