"""`parse_message`: the lenient multi-format parser that decides which calls are executed.

Realistic model outputs in every supported format, the rules of issue 5 (value boundaries,
no repair of truncated JSON, one bad block does not sink the others, reasoning and prose are
not calls), hypothesis round-trips per format, and megabyte inputs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentrl.parsing import MESSAGE_FORMATS, ParsedMessage, parse_message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.checks import fastest_seconds, typed

WEATHER = "get_weather"
TOOLS = ["get_weather", "get_time", "search", "python", "calculate_math", "翻译"]


def calls(msg: ParsedMessage) -> list[tuple[str, dict[str, Any]]]:
    return [(c["name"], c["arguments"]) for c in msg.calls]


def reasons(msg: ParsedMessage) -> list[str]:
    return [e["reason"] for e in msg.errors]


# --- Hermes / Qwen -------------------------------------------------------------------------


def test_qwen_single_call_with_newlines_inside_tags() -> None:
    text = (
        "<tool_call>\n"
        '{"name": "get_weather", "arguments": {"location": "San Francisco, CA, USA"}}\n'
        "</tool_call>"
    )
    msg = parse_message(text)
    assert calls(msg) == [(WEATHER, {"location": "San Francisco, CA, USA"})]
    assert msg.content == "" and msg.errors == [] and msg.reasoning is None


def test_text_before_between_and_after_calls_is_content() -> None:
    text = (
        "I'll check both cities.\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        "and then\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>\n'
        "Waiting for results."
    )
    msg = parse_message(text)
    assert calls(msg) == [(WEATHER, {"city": "Paris"}), (WEATHER, {"city": "Rome"})]
    assert msg.content == "I'll check both cities.\n\nand then\n\nWaiting for results."


def test_qwen3_reasoning_is_split_off() -> None:
    text = (
        "<think>\nThe user asks for the time in Tokyo. I should call get_time.\n</think>\n\n"
        '<tool_call>\n{"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}\n</tool_call>'
    )
    msg = parse_message(text)
    assert msg.reasoning == "The user asks for the time in Tokyo. I should call get_time."
    assert calls(msg) == [("get_time", {"timezone": "Asia/Tokyo"})]
    assert msg.content == ""


def test_reasoning_opened_by_the_chat_template_ends_at_the_closing_tag() -> None:
    text = (
        'Need 17*23.\n</think>\n\n<tool_call>{"name": "calculate_math", "argume'
        'nts": {"expression": "17*23"}}</tool_call>'
    )
    msg = parse_message(text)
    assert msg.reasoning == "Need 17*23."
    assert calls(msg) == [("calculate_math", {"expression": "17*23"})]


def test_calls_inside_reasoning_are_not_calls() -> None:
    text = (
        '<think>Maybe <tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>? '
        "No, I know this.</think>The capital of France is Paris."
    )
    msg = parse_message(text)
    assert msg.calls == [] and msg.errors == []
    assert msg.content == "The capital of France is Paris."
    assert "<tool_call>" in (msg.reasoning or "")


def test_unfinished_reasoning_holds_no_calls() -> None:
    msg = parse_message('<think>I will call <tool_call>{"name": "search"}</tool_call> and')
    assert msg.calls == [] and msg.content == ""


def test_closing_tag_inside_a_string_argument_stays_intact() -> None:
    code = 'print("</tool_call>")\nprint("done")'
    text = (
        "<tool_call>" + json.dumps({"name": "python", "arguments": {"code": code}}) + "</tool_call>"
    )
    assert calls(parse_message(text)) == [("python", {"code": code})]


def test_braces_inside_a_string_argument_stay_intact() -> None:
    text = (
        '<tool_call>{"name": "python", "arguments": {"code": "d = {\\"a\\": \\"'
        "}\\\"}; print(d['a'])\"}}</tool_call>"
    )
    assert calls(parse_message(text)) == [("python", {"code": 'd = {"a": "}"}; print(d[\'a\'])'})]


def test_non_ascii_keys_and_values_are_kept_and_escapes_decoded() -> None:
    text = (
        '<tool_call>{"name": "翻译", "arguments": {"文本": "你好\\n世界", "目标语言": "英语", '
        '"note": "caf\\u00e9 \\ud83d\\ude00"}}</tool_call>'
    )
    assert calls(parse_message(text)) == [
        ("翻译", {"文本": "你好\n世界", "目标语言": "英语", "note": "café 😀"})
    ]


def test_argument_keys_are_not_renamed() -> None:
    text = (
        '<tool_call>{"name": "search", "arguments": {"Query String": "x", "maxR'
        'esults": 5, "k-1": null}}</tool_call>'
    )
    assert calls(parse_message(text)) == [
        ("search", {"Query String": "x", "maxResults": 5, "k-1": None})
    ]


def test_a_json_list_of_calls_in_one_block() -> None:
    text = (
        '<tool_call>[{"name": "get_time", "arguments": {}}, {"name": "get_weath'
        'er", "arguments": {"city": "Oslo"}}]</tool_call>'
    )
    assert calls(parse_message(text)) == [("get_time", {}), (WEATHER, {"city": "Oslo"})]


def test_several_objects_in_one_block() -> None:
    text = (
        "<tool_call>\n"
        '{"name": "get_time", "arguments": {"tz": "UTC"}}\n'
        '{"name": "get_time", "arguments": {"tz": "CET"}}\n'
        "</tool_call>"
    )
    assert calls(parse_message(text)) == [("get_time", {"tz": "UTC"}), ("get_time", {"tz": "CET"})]


def test_code_fence_inside_the_block() -> None:
    text = '<tool_call>\n```json\n{"name": "search", "arguments": {"q": "rust"}}\n```\n</tool_call>'
    msg = parse_message(text)
    assert calls(msg) == [("search", {"q": "rust"})] and msg.content == ""


def test_missing_closing_tag_is_accepted_when_the_json_is_complete() -> None:
    msg = parse_message('<tool_call>\n{"name": "search", "arguments": {"q": "llm"}}\n')
    assert calls(msg) == [("search", {"q": "llm"})] and msg.errors == []


def test_missing_closing_tag_between_two_blocks() -> None:
    text = (
        '<tool_call>{"name": "get_time", "arguments": {}}\n'
        '<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>'
    )
    assert calls(parse_message(text)) == [("get_time", {}), ("search", {"q": "x"})]


def test_truncated_json_is_rejected_not_repaired() -> None:
    msg = parse_message('<tool_call>\n{"name": "search", "arguments": {"query": "latest news ab')
    assert msg.calls == []
    assert len(msg.errors) == 1 and "truncated" in msg.errors[0]["reason"]
    assert msg.errors[0]["format"] == "hermes" and msg.errors[0]["offset"] == 0


def test_truncated_json_before_the_closing_tag_is_rejected() -> None:
    msg = parse_message('<tool_call>{"name": "search", "arguments": {"query": "ab</tool_call>')
    assert msg.calls == [] and "truncated" in reasons(msg)[0]


def test_one_bad_block_does_not_discard_the_good_ones() -> None:
    text = (
        'Step 1\n<tool_call>{"name": "get_time", "arguments": {}}</tool_call>\n'
        '<tool_call>{"name": "search", "arguments": {"q": }}</tool_call>\n'
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Lima"}}</tool_call>'
    )
    msg = parse_message(text)
    assert calls(msg) == [("get_time", {}), (WEATHER, {"city": "Lima"})]
    assert len(msg.errors) == 1 and msg.errors[0]["offset"] == text.index(
        '<tool_call>{"name": "search"'
    )
    assert msg.content == "Step 1"


def test_single_quotes_python_literals_and_trailing_commas_are_tolerated() -> None:
    text = (
        "<tool_call>{'name': 'search', 'arguments': {'q': 'it\\'s', 'safe': Tru"
        "e, 'lang': None, 'tags': ['a', 'b',],},}</tool_call>"
    )
    assert calls(parse_message(text)) == [
        ("search", {"q": "it's", "safe": True, "lang": None, "tags": ["a", "b"]})
    ]


def test_arguments_given_as_a_json_string_are_decoded_once() -> None:
    text = (
        '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris'
        '\\", \\"days\\": 3}"}</tool_call>'
    )
    assert calls(parse_message(text)) == [(WEATHER, {"city": "Paris", "days": 3})]


def test_arguments_encoded_twice_are_not_decoded_twice() -> None:
    inner = json.dumps(json.dumps({"city": "Paris"}))
    text = '<tool_call>{"name": "get_weather", "arguments": ' + json.dumps(inner) + "}</tool_call>"
    msg = parse_message(text)
    assert msg.calls == [] and "not an object" in reasons(msg)[0]


def test_missing_arguments_key_means_no_arguments() -> None:
    assert calls(parse_message('<tool_call>{"name": "get_time"}</tool_call>')) == [("get_time", {})]


@pytest.mark.parametrize("arguments", ["null", "[1, 2]", '"Paris"', "42"])
def test_arguments_that_are_not_an_object_are_an_error(arguments: str) -> None:
    msg = parse_message(
        '<tool_call>{"name": "get_weather", "arguments": ' + arguments + "}</tool_call>"
    )
    assert msg.calls == [] and len(msg.errors) == 1


def test_a_call_without_a_name_is_an_error() -> None:
    msg = parse_message('<tool_call>{"arguments": {"q": "x"}}</tool_call>')
    assert msg.calls == [] and "name" in reasons(msg)[0]


def test_text_between_the_json_and_the_closing_tag_is_refused() -> None:
    msg = parse_message('<tool_call>{"name": "get_time", "arguments": {}}}</tool_call>')
    assert msg.calls == [] and "unexpected text" in reasons(msg)[0]


def test_openai_style_function_wrapper() -> None:
    text = (
        '<tool_call>{"type": "function", "function": {"name": "search", "argume'
        'nts": "{\\"q\\": \\"x\\"}"}}</tool_call>'
    )
    assert calls(parse_message(text)) == [("search", {"q": "x"})]


@pytest.mark.parametrize(
    "text",
    [
        "Wrap each call in <tool_call></tool_call> tags.",
        "Use `<tool_call>` followed by a JSON object.",
        "The <tool_call> tag is how I call tools, e.g. search.",
        "Close it with </tool_call>.",
    ],
)
def test_tags_mentioned_in_prose_are_not_calls(text: str) -> None:
    msg = parse_message(text)
    assert msg.calls == [] and msg.errors == [] and msg.content == text


def test_unknown_tools_are_flagged_when_tools_are_declared() -> None:
    text = (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
        '<tool_call>{"name": "rm_rf", "arguments": {"path": "/"}}</tool_call>'
    )
    msg = parse_message(text, tools=TOOLS)
    assert msg.calls[0] == {"name": WEATHER, "arguments": {"city": "Paris"}}
    assert msg.calls[1] == {"name": "rm_rf", "arguments": {"path": "/"}, "unknown_tool": True}
    assert "unknown_tool" not in parse_message(text).calls[1]


def test_tools_may_be_given_as_schemas() -> None:
    schemas = [
        {"type": "function", "function": {"name": "get_weather", "parameters": {}}},
        {"name": "get_time"},
    ]
    msg = parse_message('<tool_call>{"name": "get_time"}</tool_call>', tools=schemas)
    assert msg.calls == [{"name": "get_time", "arguments": {}}]


def test_big_integers_and_floats_keep_their_values() -> None:
    text = (
        '<tool_call>{"name": "calculate_math", "arguments": {"n": 1234567890123'
        '45678901234567890, "x": 1.5e-7}}</tool_call>'
    )
    assert calls(parse_message(text)) == [
        ("calculate_math", {"n": 123456789012345678901234567890, "x": 1.5e-7})
    ]


# --- Llama 3 -------------------------------------------------------------------------------


def test_llama3_python_tag_with_parameters() -> None:
    text = (
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "San Francisco"}}<|eom_id|>'
    )
    msg = parse_message(text)
    assert calls(msg) == [(WEATHER, {"city": "San Francisco"})] and msg.content == ""


def test_llama3_semicolon_separated_calls() -> None:
    text = (
        '<|python_tag|>{"name": "get_time", "parameters": {"tz": "UTC"}}; {"nam'
        'e": "search", "arguments": {"q": "news"}}'
    )
    assert calls(parse_message(text)) == [("get_time", {"tz": "UTC"}), ("search", {"q": "news"})]


def test_llama3_plain_json_message() -> None:
    text = '{"name": "get_weather", "parameters": {"city": "Berlin", "unit": "celsius"}}'
    assert calls(parse_message(text)) == [(WEATHER, {"city": "Berlin", "unit": "celsius"})]


def test_json_quoted_in_prose_is_not_a_call() -> None:
    text = 'A call looks like {"name": "get_weather", "parameters": {}} in this format.'
    msg = parse_message(text)
    assert msg.calls == [] and msg.content == text


def test_llama3_python_tag_with_code_is_an_error_not_a_call() -> None:
    msg = parse_message("<|python_tag|>import os\nprint(os.listdir())<|eom_id|>")
    assert msg.calls == [] and "not followed by a JSON" in reasons(msg)[0]


# --- Mistral -------------------------------------------------------------------------------


def test_mistral_tool_calls_list() -> None:
    text = (
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}},'
        ' {"name": "get_time", "arguments": {"tz": "CET"}}]</s>'
    )
    msg = parse_message(text)
    assert calls(msg) == [(WEATHER, {"city": "Paris"}), ("get_time", {"tz": "CET"})]
    assert msg.content == ""


def test_mistral_name_args_format() -> None:
    text = (
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[CAL'
        "L_ID]a1B2c3D4e[ARGS]{}"
    )
    assert calls(parse_message(text)) == [(WEATHER, {"city": "Paris"}), ("get_time", {})]


def test_mistral_truncated_list_is_rejected() -> None:
    msg = parse_message('[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Par')
    assert msg.calls == [] and "truncated" in reasons(msg)[0]


# --- DeepSeek ------------------------------------------------------------------------------


def test_deepseek_v3_calls() -> None:
    text = (
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
        '```json\n{"city": "Hangzhou"}\n```<｜tool▁call▁end｜>\n'
        "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n"
        '```json\n{"tz": "Asia/Shanghai"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
    )
    msg = parse_message(text)
    assert calls(msg) == [(WEATHER, {"city": "Hangzhou"}), ("get_time", {"tz": "Asia/Shanghai"})]
    assert msg.content == ""


def test_deepseek_v31_calls() -> None:
    text = (
        "好的。<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>"
        '{"q": "天气"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
    )
    msg = parse_message(text)
    assert calls(msg) == [("search", {"q": "天气"})] and msg.content == "好的。"


def test_deepseek_bad_call_is_reported_and_the_next_one_kept() -> None:
    text = (
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{"q": <｜tool▁call▁end｜>'
        "<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    )
    msg = parse_message(text)
    assert calls(msg) == [("get_time", {})] and len(msg.errors) == 1
    assert msg.errors[0]["format"] == "deepseek"


# --- Pythonic ------------------------------------------------------------------------------


def test_pythonic_list_with_literal_keyword_arguments() -> None:
    text = (
        "[get_weather(city='Paris', days=-3, detailed=True, unit=None, ratio=0."
        "5, tags=['a', \"b\"], opts={'x': 1}), get_time(tz=\"UTC\")]"
    )
    assert calls(parse_message(text)) == [
        (
            WEATHER,
            {
                "city": "Paris",
                "days": -3,
                "detailed": True,
                "unit": None,
                "ratio": 0.5,
                "tags": ["a", "b"],
                "opts": {"x": 1},
            },
        ),
        ("get_time", {"tz": "UTC"}),
    ]


def test_pythonic_after_some_text_on_its_own_line() -> None:
    msg = parse_message("Let me look that up.\n[search(q='rust borrow checker')]")
    assert calls(msg) == [("search", {"q": "rust borrow checker"})]
    assert msg.content == "Let me look that up."


def test_pythonic_positional_arguments_are_rejected() -> None:
    msg = parse_message("[get_weather('Paris')]")
    assert msg.calls == [] and "positional" in reasons(msg)[0]


@pytest.mark.parametrize(
    "text",
    [
        "[delete(path=__import__('os').getcwd())]",
        "[search(q=query)]",
        "[calculate_math(expression=1+1)]",
        "[search(q='a' 'b')]",
        "[search(q=true)]",
        "[search(q=float('nan'))]",
    ],
)
def test_pythonic_non_literals_are_rejected_never_evaluated(text: str) -> None:
    msg = parse_message(text)
    assert msg.calls == [] and "not a literal" in reasons(msg)[0]


def test_pythonic_list_naming_an_undeclared_tool_is_prose() -> None:
    text = "[see(note=1)]"
    assert parse_message(text, tools=TOOLS).content == text
    assert parse_message(text, tools=TOOLS).calls == []


def test_pythonic_list_followed_by_words_is_prose() -> None:
    text = "[search(q='x')] is how you would call it."
    msg = parse_message(text)
    assert msg.calls == [] and msg.content == text


# --- Bare fenced JSON ----------------------------------------------------------------------


def test_fenced_json_naming_a_declared_tool_is_a_call() -> None:
    text = 'Calling it now:\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'
    msg = parse_message(text, tools=TOOLS)
    assert calls(msg) == [(WEATHER, {"city": "Paris"})] and msg.content == "Calling it now:"


def test_fenced_json_without_a_declared_tool_is_content() -> None:
    text = 'Example:\n```json\n{"name": "Ada", "arguments": {"age": 36}}\n```'
    assert parse_message(text, tools=TOOLS).calls == []
    assert parse_message(text).calls == []


# --- Options and edge cases ----------------------------------------------------------------


def test_formats_restrict_what_is_looked_for() -> None:
    text = '[TOOL_CALLS][{"name": "get_time"}] <tool_call>{"name": "search"}</tool_call>'
    assert [c["name"] for c in parse_message(text, formats=["hermes"]).calls] == ["search"]
    assert [c["name"] for c in parse_message(text, formats="mistral").calls] == ["get_time"]
    assert {"hermes", "json", "llama3", "mistral", "deepseek", "pythonic"} <= set(MESSAGE_FORMATS)


def test_unknown_format_names_raise() -> None:
    with pytest.raises(ValueError, match="unknown call format"):
        parse_message("x", formats=["xml"])


def test_empty_and_plain_messages() -> None:
    assert parse_message("") == ParsedMessage(content="")
    assert parse_message("  The answer is 42.  ") == ParsedMessage(content="The answer is 42.")


# --- Round-trips ---------------------------------------------------------------------------

MARKERS = ("<tool_call>", "</tool_call>", "<think>", "</think>", "```", "[TOOL_CALLS]", "<|", "<｜")
clean_text = st.text(max_size=15).filter(lambda s: not any(m in s for m in MARKERS))
identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**25), max_value=10**25)
    | st.floats(allow_nan=False, allow_infinity=False)
    | clean_text
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(clean_text, inner, max_size=3),
    max_leaves=8,
)
call_lists = st.lists(
    st.tuples(identifiers, st.dictionaries(clean_text, json_values, max_size=4)),
    min_size=1,
    max_size=3,
)


def py_literal(value: Any) -> str:
    """A Python literal for a JSON-like value (what a model writes in pythonic calls)."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    return "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"


def render(fmt: str, items: list[tuple[str, dict[str, Any]]]) -> str:
    dumps = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731
    if fmt == "hermes":
        return "\n".join(
            f"<tool_call>\n{dumps({'name': n, 'arguments': a})}\n</tool_call>" for n, a in items
        )
    if fmt == "llama3":
        body = "; ".join(dumps({"name": n, "parameters": a}) for n, a in items)
        return f"<|python_tag|>{body}<|eom_id|>"
    if fmt == "mistral":
        return "[TOOL_CALLS]" + dumps([{"name": n, "arguments": a} for n, a in items])
    if fmt == "deepseek":
        parts = [
            f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{dumps(a)}\n```<｜tool▁call▁end｜>"
            for n, a in items
        ]
        return "<｜tool▁calls▁begin｜>" + "\n".join(parts) + "<｜tool▁calls▁end｜>"
    if fmt == "json":
        return "\n".join(f"```json\n{dumps({'name': n, 'arguments': a})}\n```" for n, a in items)
    assert fmt == "pythonic"
    rendered = (
        f"{n}(" + ", ".join(f"{k}={py_literal(v)}" for k, v in a.items()) + ")" for n, a in items
    )
    return "[" + ", ".join(rendered) + "]"


ROUND_TRIP = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
# The families issue 32 added round-trip in tests/core/test_tool_formats.py (rendered by
# agentrl.tool_formats); these are the hand-written renderings of the first six.
@pytest.mark.parametrize("fmt", ["hermes", "json", "llama3", "mistral", "deepseek", "pythonic"])
@ROUND_TRIP
@given(items=call_lists, data=st.data())
def test_rendered_calls_parse_back(fmt: str, items: list, data: st.DataObject) -> None:
    if fmt == "pythonic":
        keywords = st.dictionaries(identifiers, json_values, max_size=4)
        items = [(n, data.draw(keywords)) for n, _ in items]
    before = data.draw(clean_text).replace("[", "")
    text = f"{before}\n{render(fmt, items)}\n"
    names = [n for n, _ in items]
    msg = parse_message(text, tools=names, formats=[fmt])
    assert msg.errors == []
    assert typed(calls(msg)) == typed(items)
    assert msg.content == before.strip()


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300))
def test_random_text_never_raises(text: str) -> None:
    msg = parse_message(text)
    assert isinstance(msg.content, str)
    for call in msg.calls:
        assert isinstance(call["name"], str) and isinstance(call["arguments"], dict)


# --- Megabyte inputs -----------------------------------------------------------------------

MEGABYTE = 1 << 20


def _repeat(piece: str) -> str:
    return piece * (MEGABYTE // len(piece))


ADVERSARIAL = {
    "unclosed_open_tags": _repeat("<tool_call>"),
    "unclosed_blocks_with_brace": _repeat("<tool_call>{"),
    "unterminated_strings": _repeat('<tool_call>{"name": "'),
    "deep_brackets": "<tool_call>" + "[" * MEGABYTE,
    "long_string_argument": '<tool_call>{"name": "python", "arguments": {"code": "'
    + "x" * MEGABYTE
    + '"}}</tool_call>',
    "many_valid_calls": _repeat('<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>\n'),
    "mistral_markers": _repeat("[TOOL_CALLS]"),
    "python_tags": _repeat("<|python_tag|>{"),
    "pythonic_lines": _repeat("[f(a=[\n"),
    "think_tags": _repeat("<think>"),
    "fences": _repeat('```json\n{"name": "get_weather", "arguments": {"a": "'),
    "deepseek_calls": _repeat("<｜tool▁call▁begin｜>x<｜tool▁sep｜>{"),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_megabyte_input_is_fast(name: str) -> None:
    text = ADVERSARIAL[name]
    best = fastest_seconds(lambda: parse_message(text, tools=TOOLS))
    # Linear parsing takes a few ms here; a quadratic scan of 1 MB takes seconds. The bound
    # leaves room for a loaded CI machine without letting a quadratic path through.
    assert best < 0.25, f"{name}: {best * 1000:.1f} ms"
