"""Tool calls in each model family's own format, both ways (issue 32).

Reading: every family's broken block is an error of that family, text around calls stays
content, non-finite numbers are refused in every format, ``tool_format`` pins a family.
Writing: for every family, `render_calls` then `parse_message` gives back the same calls
(hypothesis), the family is detected from template, special tokens or name, and a template
that renders no tools gets the calls, results and protocol in the detected family's form.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
from agentrl.chat import apply_chat_template, tools_block
from agentrl.parsing import MESSAGE_FORMATS, TOOL_FORMATS, parse_message
from agentrl.tool_formats import (
    RENDER_FAMILIES,
    detect_tool_format,
    protocol_text,
    render_calls,
    render_results,
    tool_format_of,
    use_tool_format,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.checks import fastest_seconds, read_jsonl, typed
from tests.fakes.models import tiny_tokenizer

DATA = Path(__file__).parents[1] / "data"
CASES = read_jsonl(DATA / "tool_parser_cases.jsonl")
TOOLS = json.loads((DATA / "tool_parser_tools.json").read_text(encoding="utf-8"))


def calls(msg: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(c["name"], c["arguments"]) for c in msg.calls]


def schema(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A tool schema whose parameter types are those of ``args``' values."""

    def kind(value: Any) -> str:
        if value is None:
            return "null"
        if isinstance(value, bool):
            return "boolean"
        if isinstance(value, int):
            return "integer"
        if isinstance(value, float):
            return "number"
        if isinstance(value, str):
            return "string"
        return "array" if isinstance(value, list) else "object"

    props = {k: {"type": kind(v)} for k, v in args.items()}
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": props}},
    }


# --- Reading -------------------------------------------------------------------------------


@pytest.mark.parametrize("row", [r for r in CASES if r["error"]], ids=lambda r: r["id"])
def test_a_broken_block_is_an_error_of_its_family(row: dict[str, Any]) -> None:
    msg = parse_message(row["text"], tools=TOOLS)
    assert msg.calls == []
    family = {"llama4": ("llama4",)}.get(row["family"], (row["family"],))
    assert [e["format"] for e in msg.errors] == [family[0]], msg.errors


@pytest.mark.parametrize(
    "row", [r for r in CASES if r["id"].endswith("-text_before")], ids=lambda r: r["id"]
)
def test_text_before_calls_is_content(row: dict[str, Any]) -> None:
    msg = parse_message(row["text"], tools=TOOLS)
    assert msg.content == "Let me check that for you."
    assert msg.errors == []


def test_every_family_has_cases_of_each_kind() -> None:
    kinds = ("single", "parallel", "nested", "text_before", "broken", "plain_text")
    for family in MESSAGE_FORMATS:
        ids = {r["id"].removeprefix(family + "-") for r in CASES if r["family"] == family}
        assert set(kinds) <= ids, (family, set(kinds) - ids)


BIG = 123456.5  # written, then replaced by 1e999 in the text


@pytest.mark.parametrize("family", RENDER_FAMILIES)
def test_non_finite_numbers_are_refused_in_every_format(family: str) -> None:
    tools = [schema("calc", {"x": 1.5})]
    text = render_calls(family, [("calc", {"x": BIG})]).replace(repr(BIG), "1e999")
    assert "1e999" in text
    msg = parse_message(text, tools=tools, tool_format=family)
    assert msg.calls == []
    assert len(msg.errors) == 1, msg.errors
    assert "not a finite number" in msg.errors[0]["reason"] or "literal" in msg.errors[0]["reason"]


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_json_non_finite_literals_are_refused(literal: str) -> None:
    text = '<tool_call>{"name": "calc", "arguments": {"x": [1, {"y": ' + literal + "}]}}"
    msg = parse_message(text + "</tool_call>")
    assert msg.calls == [] and "x[1].y" in msg.errors[0]["reason"]


def test_mistral_token_before_prose_takes_no_tool_name() -> None:
    msg = parse_message("[TOOL_CALLS] not json")
    assert msg.calls == [] and len(msg.errors) == 1
    assert "not" not in msg.errors[0]["reason"].split("[TOOL_CALLS]")[-1].split()[:1]


def test_tool_format_pins_one_family() -> None:
    text = '<tool_call>{"name": "search", "arguments": {}}</tool_call>\n[TOOL_CALLS][{"name": "x"}]'
    assert [c["name"] for c in parse_message(text).calls] == ["search", "x"]
    assert [c["name"] for c in parse_message(text, tool_format="mistral").calls] == ["x"]
    assert [c["name"] for c in parse_message(text, tool_format="hermes").calls] == ["search"]
    with pytest.raises(ValueError, match="unknown tool format 'nope'; choose one of: auto"):
        parse_message(text, tool_format="nope")
    assert set(TOOL_FORMATS) == {"auto", *MESSAGE_FORMATS}


def test_text_values_take_their_schema_types() -> None:
    text = (
        "<tool_call>\n<function=get_weather>\n<parameter=location>\n12\n</parameter>\n"
        "<parameter=days>\n12\n</parameter>\n</function>\n</tool_call>"
    )
    assert calls(parse_message(text, tools=TOOLS)) == [
        ("get_weather", {"location": "12", "days": 12})
    ]
    # Names only: no schema, so a JSON literal is decoded.
    assert calls(parse_message(text, tools=["get_weather"])) == [
        ("get_weather", {"location": 12, "days": 12})
    ]


def test_harmony_channels_split_reasoning_content_and_calls() -> None:
    text = (
        "<|channel|>analysis<|message|>Two steps.<|end|>"
        "<|start|>assistant<|channel|>commentary<|message|>Looking it up.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.search <|constrain|>json"
        '<|message|>{"query": "x"}<|call|>'
    )
    msg = parse_message(text)
    assert msg.reasoning == "Two steps."
    assert msg.content == "Looking it up."
    assert calls(msg) == [("search", {"query": "x"})]


MEGABYTE = 1 << 20
ADVERSARIAL = {
    "qwen3_coder_open_parameters": "<tool_call>\n<function=f>\n<parameter=a>\n",
    "bare_functions": "<function=f>\n",
    "glm_open_values": "<tool_call>f<arg_key>a</arg_key><arg_value>",
    "kimi_open_calls": "<|tool_call_begin|>x<|tool_call_argument_begin|>{",
    "dsml_open_parameters": '<｜DSML｜function_calls><｜DSML｜invoke name="f"><｜DSML｜parameter>',
    "harmony_open_messages": "<|channel|>commentary to=functions.f<|message|>{",
    "harmony_headers": "<|start|>",
    "granite_open_lists": "<|tool_call|>[{",
    "inline_nested_names": 'x {"name": {"name": ',
    "xlam_open_lists": '[{"name": "f", "arguments": {\n',
    "phi4_markers": "functools[",
    "llama4_open_lists": "<|python_start|>[f(a=",
    "json_lines": '{"name": "f", "parameters": {}}\n',
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_megabyte_input_of_new_markers_is_fast(name: str) -> None:
    piece = ADVERSARIAL[name]
    text = piece * (MEGABYTE // len(piece))
    best = fastest_seconds(lambda: parse_message(text, tools=["f", "x"]))
    assert best < 0.4, f"{name}: {best * 1000:.1f} ms"


# --- Writing -------------------------------------------------------------------------------

MARKERS = ("<", ">", "[", "]", "{", "```", "|", "｜", "functools", "\r")
clean_text = st.text(max_size=12).filter(lambda s: not any(m in s for m in MARKERS))
identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | clean_text
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(clean_text, inner, max_size=3),
    max_leaves=6,
)
call_lists = st.lists(
    st.tuples(identifiers, st.dictionaries(identifiers, values, max_size=3)),
    min_size=1,
    max_size=3,
    unique_by=lambda c: c[0],
)


@pytest.mark.slow
@pytest.mark.parametrize("family", RENDER_FAMILIES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=call_lists, content=clean_text)
def test_rendered_calls_parse_back(family: str, items: list, content: str) -> None:
    content = content.strip()
    text = render_calls(family, items, content)
    tools = [schema(name, args) for name, args in items]
    msg = parse_message(text, tools=tools, tool_format=family)
    assert msg.errors == [], text
    assert typed(calls(msg)) == typed(items), text
    assert msg.content == content, text
    # Auto-detection reads the same.
    auto = parse_message(text, tools=tools)
    assert typed(calls(auto)) == typed(items), text


def test_each_family_renders_in_its_own_syntax() -> None:
    call = [("get_weather", {"city": "Paris"})]
    expected = {
        "hermes": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
        "</tool_call>",
        "mistral": '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]',
        "llama3": '{"name": "get_weather", "parameters": {"city": "Paris"}}',
        "llama4": '<|python_start|>[get_weather(city="Paris")]<|python_end|>',
        "pythonic": '[get_weather(city="Paris")]',
        "qwen3_coder": "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
        "</parameter>\n</function>\n</tool_call>",
        "glm45": "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
        "</tool_call>",
        "phi4_mini": 'functools[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    }
    for family, text in expected.items():
        assert render_calls(family, call) == text, family
    for family in RENDER_FAMILIES:
        assert "<function-name>" in protocol_text(family) or "func_name" in protocol_text(family)


def test_pythonic_cannot_write_a_keyword_that_is_not_an_identifier() -> None:
    with pytest.raises(ValueError, match="cannot be written as a pythonic keyword"):
        render_calls("pythonic", [("f", {"not-ok": 1})])


def test_results_are_written_in_the_family_form() -> None:
    results = [("search", "42")]
    assert render_results("hermes", results) == "<tool_response>\n42\n</tool_response>"
    assert render_results("mistral", results) == "[TOOL_RESULTS]42[/TOOL_RESULTS]"
    assert render_results("kimi_k2", results) == "## Return of functions.search:0\n42"
    assert render_results("deepseek", results) == "<｜tool▁output▁begin｜>42<｜tool▁output▁end｜>"


class FakeTokenizer:
    def __init__(self, template: str = "", special: tuple[str, ...] = (), name: str = "") -> None:
        self.chat_template = template
        self.all_special_tokens = list(special)
        self.name_or_path = name


@pytest.mark.parametrize(
    ("tokenizer", "family"),
    [
        (FakeTokenizer("{{ '[TOOL_CALLS]' }}"), "mistral"),
        (FakeTokenizer("<tool_call>\\n<function={{ name }}>"), "qwen3_coder"),
        (FakeTokenizer("<tool_call>{{ n }}<arg_key>"), "glm45"),
        (FakeTokenizer("", ("<|python_tag|>",)), "llama3"),
        (FakeTokenizer("", ("<|python_start|>",)), "llama4"),
        (FakeTokenizer("", ("<|channel|>",)), "harmony"),
        (FakeTokenizer("", (), "google/gemma-3-1b-it"), "pythonic"),
        (FakeTokenizer("", (), "Salesforce/xLAM-2-1b-fc-r"), "xlam"),
        (FakeTokenizer("", (), "meta-llama/Llama-3.2-1B-Instruct"), "llama3"),
        (FakeTokenizer("", (), "some/unknown-model"), "hermes"),
    ],
)
def test_family_is_detected_from_template_tokens_or_name(tokenizer: Any, family: str) -> None:
    assert detect_tool_format(tokenizer).family == family


def test_tool_format_choice_wins_and_is_validated() -> None:
    tok = FakeTokenizer("{{ '[TOOL_CALLS]' }}")
    use_tool_format(tok, "glm45")
    found = tool_format_of(tok)
    assert (found.family, found.reason) == ("glm45", "chosen with --tool_format")
    assert "<arg_key>city</arg_key>" in found.describe()
    with pytest.raises(ValueError, match="unknown tool format"):
        use_tool_format(tok, "nope")


CHATML_NO_TOOLS = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CONVERSATION = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "get_weather", "arguments": {"location": "Paris"}}}],
    },
    {"role": "tool", "content": "18C"},
]


@pytest.mark.parametrize("family", ["mistral", "llama3", "qwen3_coder", "kimi_k2"])
def test_template_without_tools_writes_the_family_format(family: str) -> None:
    tok = copy.deepcopy(tiny_tokenizer())
    tok.chat_template = CHATML_NO_TOOLS
    use_tool_format(tok, family)
    text = apply_chat_template(tok, CONVERSATION, TOOLS[:1])
    assert tools_block(TOOLS[:1], family) in text
    assert render_calls(family, [("get_weather", {"location": "Paris"})]) in text
    assert render_results(family, [("get_weather", "18C")]) in text
    # What the model is shown is what the parser reads back.
    turn = text.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0]
    parsed = parse_message(turn, tools=TOOLS, tool_format=family)
    assert calls(parsed) == [("get_weather", {"location": "Paris"})]


def test_default_family_keeps_the_built_in_wording() -> None:
    tok = copy.deepcopy(tiny_tokenizer())
    tok.chat_template = CHATML_NO_TOOLS
    assert tool_format_of(tok).family == "hermes"
    text = apply_chat_template(tok, CONVERSATION, TOOLS[:1])
    assert "<tool_call>\n" in text and "<tool_response>\n18C\n</tool_response>" in text
    assert tools_block(TOOLS[:1]) == tools_block(TOOLS[:1], "hermes")
    assert not math.isnan(0.0)


@pytest.mark.slow
def test_eval_show_prompt_names_the_family(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentrl.cli import main

    template = tmp_path / "chatml.jinja"
    template.write_text(CHATML_NO_TOOLS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    argv = ["eval", "--model", "tiny", "--eval_samples", "1", "--max_turns", "1"]
    argv += ["--max_gen_len", "4", "--show_prompt", "--chat_template", str(template)]
    assert main([*argv, "--tool_format", "kimi_k2"]) == 0
    out = capsys.readouterr().out
    assert "tool calls: kimi_k2 (chosen with --tool_format); a call is written as: " in out
    assert "<|tool_calls_section_begin|><|tool_call_begin|>functions.<function-name>:0" in out
    assert main([*argv, "--tool_format", "auto"]) == 0
    assert "tool calls: hermes (the tokenizer has the special token <tool_call>)" in (
        capsys.readouterr().out
    )


FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "<function=f>",
    "</function>",
    "<parameter=a>",
    "</parameter>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
    "functions.f:0",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<｜DSML｜function_calls>",
    '<｜DSML｜invoke name="f">',
    '<｜DSML｜parameter name="a" string="false">',
    "</｜DSML｜parameter>",
    "</｜DSML｜invoke>",
    "<|start|>",
    "<|channel|>",
    "analysis",
    "commentary to=functions.f",
    "final",
    "<|message|>",
    "<|call|>",
    "<|end|>",
    "<|constrain|>json",
    "<|tool_call|>",
    "<|action_start|>",
    "<|plugin|>",
    "<|action_end|>",
    "<tool_calls>",
    "</tool_calls>",
    "functools[",
    "<|python_start|>",
    "<|python_end|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[f(a=1)]",
    "[",
    "]",
    "{",
    "}",
    '{"name": "f"',
    '"arguments"',
    '"parameters"',
    ": ",
    ", ",
    "1e999",
    "NaN",
    '"x"',
    "\n",
    " ",
    "text",
    "é",
    "<think>",
    "</think>",
    "```json\n",
    "```",
]


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(st.sampled_from(FRAGMENTS), max_size=40), declared=st.booleans())
def test_marker_soup_never_raises(parts: list[str], declared: bool) -> None:
    text = "".join(parts)
    msg = parse_message(text, tools=["f"] if declared else None)
    assert isinstance(msg.content, str)
    for call in msg.calls:
        assert isinstance(call["name"], str) and isinstance(call["arguments"], dict)
        json.dumps(call["arguments"], allow_nan=False)  # no NaN or infinity got through
    for error in msg.errors:
        assert error["format"] in MESSAGE_FORMATS and 0 <= error["offset"] <= len(text)
