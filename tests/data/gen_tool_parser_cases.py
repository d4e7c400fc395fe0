"""Writes tests/data/tool_parser_cases.jsonl: model outputs per tool-call family with the
calls the serving engines' own parsers expect from them.

The cases are modelled on the kinds of case the tool-parser tests of vLLM
(tests/entrypoints/openai/tool_parsers/ and tests/tool_use/), SGLang
(test/srt/test_function_call_parser.py) and transformers (chat-template tool tests) check:
a single call, parallel calls, text before and after, nested and typed arguments, special
characters, empty arguments, plain text, and broken blocks. They are written here from
scratch in agentrl's own format; ``expected`` is what the peer parser returns (its calls;
no calls for text or a block it cannot read), so the agreement test measures agreement
with the peers, not with agentrl. ``error``: agentrl must also report a refused block.

Run ``python tests/data/gen_tool_parser_cases.py`` to regenerate; do not edit the JSONL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("tool_parser_cases.jsonl")


def tool(tool_name: str, **props: str) -> dict[str, Any]:
    properties = {k: {"type": v} for k, v in props.items()}
    return {
        "type": "function",
        "function": {
            "name": tool_name,
            "description": tool_name.replace("_", " "),
            "parameters": {"type": "object", "properties": properties},
        },
    }


TOOLS = [
    tool("get_weather", location="string", unit="string", days="integer"),
    tool("search", query="string", limit="integer"),
    tool("get_current_time", timezone="string"),
    tool("calculate", expression="string", precision="number"),
    tool("create_event", title="string", attendees="array", details="object", private="boolean"),
    tool("run_code", code="string", language="string"),
    tool("empty_func"),
    tool("register_user", name="string", age="integer", address="object", role="string"),
    tool("do_something_cool", steps="array", additional_data="object"),
]

CASES: list[dict[str, Any]] = []


def unique_id(base: str) -> str:
    taken = {c["id"] for c in CASES}
    n, name = 1, base
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    return name


def case(
    family: str,
    peer: str,
    kind: str,
    text: str,
    calls: list[tuple[str, dict[str, Any]]],
    error: bool = False,
) -> None:
    CASES.append(
        {
            "id": unique_id(f"{family}-{kind}"),
            "family": family,
            "peer": peer,
            "text": text,
            "expected": [{"name": n, "arguments": a} for n, a in calls],
            "error": error,
        }
    )


def j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


W = ("get_weather", {"location": "San Francisco, CA", "unit": "celsius"})
W2 = ("get_weather", {"location": "Tokyo"})
S = ("search", {"query": "rust borrow checker"})
T = ("get_current_time", {"timezone": "Asia/Tokyo"})
NESTED = (
    "create_event",
    {
        "title": "Review {Q3} [draft]",
        "attendees": ["ana@example.com", "bo@example.com"],
        "details": {"room": "4B", "slots": [{"start": "09:00", "end": "09:30"}], "remote": True},
    },
)
SPECIAL = ("run_code", {"code": 'print("a\\nb")\nx = {"k": [1, 2]}', "language": "python"})
UNICODE = ("search", {"query": "天气 in Zürich — «prévision» 🌦"})
EMPTY = ("empty_func", {})
PLAIN = "The weather in Paris is 18°C and sunny. Anything else?"


def obj(call: tuple[str, dict[str, Any]], key: str = "arguments") -> dict[str, Any]:
    return {"name": call[0], key: call[1]}


# --- JSON-bodied families: one helper per family writes a list of calls --------------------


def json_family(
    family: str,
    peer: str,
    render: Any,
    broken: str,
    mention: str,
    text_after: bool = True,
) -> None:
    case(family, peer, "single", render([W]), [W])
    case(family, peer, "parallel", render([W, W2]), [W, W2])
    case(family, peer, "text_before", "Let me check that for you.\n" + render([S]), [S])
    if text_after:
        case(family, peer, "text_after", render([T]) + "\nI will report back.", [T])
    case(family, peer, "nested", render([NESTED]), [NESTED])
    case(family, peer, "special_chars", render([SPECIAL]), [SPECIAL])
    case(family, peer, "unicode", render([UNICODE]), [UNICODE])
    case(family, peer, "empty_args", render([EMPTY]), [EMPTY])
    case(family, peer, "three_calls", render([W, S, T]), [W, S, T])
    case(family, peer, "plain_text", PLAIN, [])
    case(family, peer, "broken", broken, [], error=True)
    case(family, peer, "mention", mention, [])


def hermes(calls: list) -> str:
    return "\n".join(f"<tool_call>\n{j(obj(c))}\n</tool_call>" for c in calls)


json_family(
    "hermes",
    "vllm",
    hermes,
    '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Par',
    "Wrap each call in <tool_call> tags when you need a tool.",
)
case(
    "hermes",
    "sglang",
    "closing_tag_in_string",
    hermes([("search", {"query": "</tool_call>"})]),
    [("search", {"query": "</tool_call>"})],
)
case(
    "hermes",
    "vllm",
    "no_closing_tag",
    '<tool_call>\n{"name": "search", "arguments": {"query": "x"}}',
    [("search", {"query": "x"})],
)
case(
    "hermes",
    "vllm",
    "think_then_call",
    "<think>\nI need the time.\n</think>\n\n" + hermes([T]),
    [T],
)
case(
    "hermes",
    "vllm",
    "arguments_as_string",
    '<tool_call>\n{"name": "search", "arguments": "{\\"query\\": \\"x\\"}"}\n</tool_call>',
    [("search", {"query": "x"})],
)


def qwen3_coder(calls: list, wrap: bool = True) -> str:
    out = []
    for name, args in calls:
        params = "".join(
            f"<parameter={k}>\n{v if isinstance(v, str) else j(v)}\n</parameter>\n"
            for k, v in args.items()
        )
        block = f"<function={name}>\n{params}</function>"
        out.append(f"<tool_call>\n{block}\n</tool_call>" if wrap else block)
    return "\n".join(out)


json_family(
    "qwen3_coder",
    "vllm",
    qwen3_coder,
    "<tool_call>\n<function=get_weather>\n<parameter=location>\nPari",
    "I can call <function=...> blocks if needed.",
)
case(
    "qwen3_coder",
    "vllm",
    "typed_values",
    "<tool_call>\n<function=get_weather>\n<parameter=location>\nBoston\n</parameter>\n"
    "<parameter=days>\n5\n</parameter>\n</function>\n</tool_call>",
    [("get_weather", {"location": "Boston", "days": 5})],
)
case("qwen3_coder", "sglang", "no_wrapper", qwen3_coder([S], wrap=False), [S])
case(
    "qwen3_coder",
    "vllm",
    "string_that_looks_numeric",
    "<tool_call>\n<function=search>\n<parameter=query>\n42\n</parameter>\n</function>\n"
    "</tool_call>",
    [("search", {"query": "42"})],
)
case(
    "qwen3_coder",
    "vllm",
    "multiline_code",
    "<tool_call>\n<function=run_code>\n<parameter=code>\ndef f(x):\n    return x < 3\n"
    "</parameter>\n</function>\n</tool_call>",
    [("run_code", {"code": "def f(x):\n    return x < 3"})],
)


# Modelled on vLLM's Qwen3 XML tests: markup inside values, every declared type.
def coder_value(name: str, param: str, raw: str) -> str:
    return (
        f"<tool_call>\n<function={name}>\n<parameter={param}>\n{raw}\n</parameter>\n"
        "</function>\n</tool_call>"
    )


for kind, name, param, raw, value in [
    ("html_value", "run_code", "code", "<div><p>Hello <em>world</em></p></div>", None),
    ("lt_in_value", "calculate", "expression", "a < b && c<<d", None),
    ("partial_tags_literal", "run_code", "code", "</param> </func> <parameter> </tool>", None),
    ("float_value", "calculate", "precision", "3.25", 3.25),
    ("boolean_capitalised", "create_event", "private", "True", True),
    (
        "object_python_dict",
        "create_event",
        "details",
        "{'room': '4B', 'n': 1}",
        {"room": "4B", "n": 1},
    ),
    ("array_json", "create_event", "attendees", '["a", "b"]', ["a", "b"]),
    ("null_value", "search", "query", "null", "NULL"),
    ("backslash_path", "run_code", "code", "C:\\Users\\alice\\file.txt", None),
    ("multiline_text", "run_code", "code", "first line\nsecond line", None),
]:
    expected = raw if value is None else (None if value == "NULL" else value)
    case("qwen3_coder", "vllm", kind, coder_value(name, param, raw), [(name, {param: expected})])
case(
    "qwen3_coder",
    "vllm",
    "empty_string",
    "<tool_call>\n<function=search>\n<parameter=query></parameter>\n</function>\n</tool_call>",
    [("search", {"query": ""})],
)


# vLLM keeps a parameter the schema does not declare as text; agentrl decodes a JSON
# literal (a known disagreement, see docs/tool-formats.md).
case(
    "qwen3_coder",
    "vllm",
    "undeclared_parameter",
    "<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n<parameter=page>\n7\n"
    "</parameter>\n</function>\n</tool_call>",
    [("search", {"query": "x", "page": "7"})],
)
# vLLM reads a function whose </function> never comes; agentrl refuses a cut-off call.
case(
    "qwen3_coder",
    "vllm",
    "missing_function_end",
    "<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n",
    [("search", {"query": "x"})],
)


def glm45(calls: list) -> str:
    out = []
    for name, args in calls:
        pairs = "".join(
            f"<arg_key>{k}</arg_key>\n<arg_value>{v if isinstance(v, str) else j(v)}</arg_value>\n"
            for k, v in args.items()
        )
        out.append(f"<tool_call>{name}\n{pairs}</tool_call>")
    return "\n".join(out)


json_family(
    "glm45",
    "sglang",
    glm45,
    "<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Beij",
    "GLM writes calls between <tool_call> and </tool_call>.",
)
case(
    "glm45",
    "vllm",
    "typed_values",
    "<tool_call>create_event\n<arg_key>title</arg_key>\n<arg_value>Sync</arg_value>\n"
    "<arg_key>private</arg_key>\n<arg_value>true</arg_value>\n</tool_call>",
    [("create_event", {"title": "Sync", "private": True})],
)
case("glm45", "sglang", "think_then_call", "<think>Need weather.</think>\n" + glm45([W2]), [W2])
case(
    "glm45",
    "vllm",
    "no_newline_after_name",
    "<tool_call>search<arg_key>query</arg_key><arg_value>glm</arg_value></tool_call>",
    [("search", {"query": "glm"})],
)


def kimi(calls: list) -> str:
    parts = "".join(
        f"<|tool_call_begin|>functions.{n}:{i}<|tool_call_argument_begin|>{j(a)}<|tool_call_end|>"
        for i, (n, a) in enumerate(calls)
    )
    return f"<|tool_calls_section_begin|>{parts}<|tool_calls_section_end|>"


json_family(
    "kimi_k2",
    "sglang",
    kimi,
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"location": "Bei',
    "Kimi writes tool calls in a section.",
)
case(
    "kimi_k2",
    "vllm",
    "spaced_tokens",
    "<|tool_calls_section_begin|>\n<|tool_call_begin|> functions.search:3 "
    '<|tool_call_argument_begin|> {"query": "k2"} <|tool_call_end|>\n'
    "<|tool_calls_section_end|>",
    [("search", {"query": "k2"})],
)
case(
    "kimi_k2",
    "vllm",
    "index_beyond_nine",
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_current_time:12"
    '<|tool_call_argument_begin|>{"timezone": "UTC"}<|tool_call_end|>'
    "<|tool_calls_section_end|>",
    [("get_current_time", {"timezone": "UTC"})],
)


def deepseek_v3(calls: list) -> str:
    parts = "\n".join(
        f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{j(a)}\n```<｜tool▁call▁end｜>"
        for n, a in calls
    )
    return f"<｜tool▁calls▁begin｜>{parts}<｜tool▁calls▁end｜>"


def deepseek_v31(calls: list) -> str:
    parts = "".join(
        f"<｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{j(a)}<｜tool▁call▁end｜>" for n, a in calls
    )
    return f"<｜tool▁calls▁begin｜>{parts}<｜tool▁calls▁end｜>"


json_family(
    "deepseek",
    "vllm",
    deepseek_v3,
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
    '{"location": "Han',
    "DeepSeek uses special tokens for tool calls.",
)
case("deepseek", "vllm", "v31_single", deepseek_v31([W]), [W])
case("deepseek", "vllm", "v31_parallel", deepseek_v31([S, T]), [S, T])
case(
    "deepseek",
    "sglang",
    "r1_after_think",
    "<think>The user wants the weather.</think>\n\n" + deepseek_v3([W2]),
    [W2],
)


def dsml(calls: list) -> str:
    invokes = ""
    for n, a in calls:
        params = "".join(
            f'<｜DSML｜parameter name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
            f"{v if isinstance(v, str) else j(v)}</｜DSML｜parameter>\n"
            for k, v in a.items()
        )
        invokes += f'<｜DSML｜invoke name="{n}">\n{params}</｜DSML｜invoke>\n'
    return f"<｜DSML｜function_calls>\n{invokes}</｜DSML｜function_calls>"


json_family(
    "deepseek_v32",
    "vllm",
    dsml,
    '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="location" string="true">Hangzh',
    "V3.2 writes DSML function_calls blocks.",
)
case(
    "deepseek_v32",
    "sglang",
    "typed_values",
    '<｜DSML｜function_calls>\n<｜DSML｜invoke name="search">\n'
    '<｜DSML｜parameter name="query" string="true">42</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="limit" string="false">5</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n</｜DSML｜function_calls>",
    [("search", {"query": "42", "limit": 5})],
)


def harmony(calls: list) -> str:
    return "".join(
        f"<|start|>assistant<|channel|>commentary to=functions.{n} <|constrain|>json"
        f"<|message|>{j(a)}<|call|>"
        for n, a in calls
    )


def harmony_first(calls: list) -> str:
    # A completion starts after the prompt's "<|start|>assistant".
    return harmony(calls).removeprefix("<|start|>assistant")


json_family(
    "harmony",
    "vllm",
    harmony_first,
    '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location": "SF',
    "I will answer directly without tools.",
    text_after=False,
)
case(
    "harmony",
    "vllm",
    "analysis_then_call",
    "<|channel|>analysis<|message|>User asks for weather; call the tool.<|end|>" + harmony([W2]),
    [W2],
)
case(
    "harmony",
    "vllm",
    "recipient_before_channel",
    "<|start|>assistant to=functions.search<|channel|>commentary json<|message|>"
    '{"query": "harmony"}<|call|>',
    [("search", {"query": "harmony"})],
)
case(
    "harmony",
    "vllm",
    "final_answer_only",
    "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final"
    "<|message|>Paris is the capital of France.<|return|>",
    [],
)
case(
    "harmony",
    "vllm",
    "builtin_recipient",
    '<|channel|>commentary to=browser.search <|constrain|>json<|message|>{"query": "x"}<|call|>',
    [],
)
case(
    "harmony",
    "vllm",
    "preamble_then_call",
    "<|channel|>commentary<|message|>Checking the time now.<|end|>" + harmony([T]),
    [T],
)


def granite(calls: list) -> str:
    return "<|tool_call|>" + j([obj(c) for c in calls])


json_family(
    "granite",
    "vllm",
    granite,
    '<|tool_call|>[{"name": "get_weather", "arguments": {"location": "Bos',
    "Granite can use tools.",
)
case("granite", "vllm", "granite31_tag", "<tool_call>" + j([obj(W), obj(S)]), [W, S])


def internlm(calls: list) -> str:
    return "".join(
        f"<|action_start|><|plugin|>\n{j(obj(c, 'parameters'))}<|action_end|>" for c in calls
    )


json_family(
    "internlm",
    "vllm",
    internlm,
    '<|action_start|><|plugin|>\n{"name": "get_weather", "parameters": {"location": "Shan',
    "InternLM uses plugins.",
)


def jamba(calls: list) -> str:
    return "<tool_calls>" + j([obj(c) for c in calls]) + "</tool_calls>"


json_family(
    "jamba",
    "vllm",
    jamba,
    '<tool_calls>[{"name": "get_weather", "arguments": {"location": "Tel A',
    "Use the <tool_calls> tag for calls.",
)


def xlam(calls: list) -> str:
    return j([obj(c) for c in calls])


json_family(
    "xlam",
    "vllm",
    xlam,
    '[{"name": "get_weather", "arguments": {"location": "Par',
    'A list like [1, 2, 3] is not a call, nor is [{"x": 1}].',
)
case("xlam", "vllm", "json_fence", "```json\n" + xlam([W, S]) + "\n```", [W, S])
case("xlam", "vllm", "after_think", "<think>Two lookups.</think>\n" + xlam([W2, T]), [W2, T])


def phi4(calls: list) -> str:
    return "functools" + j([obj(c) for c in calls])


json_family(
    "phi4_mini",
    "vllm",
    phi4,
    'functools[{"name": "get_weather", "arguments": {"location": "Par',
    "I know functools.partial from Python.",
)


def mistral(calls: list) -> str:
    return "[TOOL_CALLS]" + j([obj(c) for c in calls])


json_family(
    "mistral",
    "sglang",
    mistral,
    '[TOOL_CALLS][{"name": "get_weather", "arguments": {"location": "Par',
    "Mistral models emit [TOOL_CALLS] before calls.",
)
case(
    "mistral",
    "vllm",
    "v11_args_token",
    '[TOOL_CALLS]get_weather[ARGS]{"location": "Lyon"}',
    [("get_weather", {"location": "Lyon"})],
)
case(
    "mistral",
    "vllm",
    "v11_two_calls",
    '[TOOL_CALLS]search[ARGS]{"query": "a"}[TOOL_CALLS]search[ARGS]{"query": "b"}',
    [("search", {"query": "a"}), ("search", {"query": "b"})],
)
case(
    "mistral",
    "vllm",
    "args_token_skipped",
    '[TOOL_CALLS]get_current_time{"timezone": "UTC"}',
    [("get_current_time", {"timezone": "UTC"})],
)
case("mistral", "sglang", "space_after_token", "[TOOL_CALLS] " + j([obj(S)]), [S])
case("mistral", "vllm", "not_json", "[TOOL_CALLS] not json", [], error=True)


def llama3(calls: list, sep: str = "; ") -> str:
    return sep.join(j(obj(c, "parameters")) for c in calls)


json_family(
    "llama3",
    "vllm",
    llama3,
    '{"name": "get_weather", "parameters": {"location": "Par',
    'Return JSON like {"answer": 42} when asked.',
)
case("llama3", "vllm", "python_tag", "<|python_tag|>" + llama3([W]), [W])
case("llama3", "vllm", "separate_lines", llama3([W, S], sep="\n"), [W, S])
case("llama3", "sglang", "arguments_key", j(obj(T)), [T])
case(
    "llama3",
    "vllm",
    "type_function_key",
    j({"type": "function", "name": "search", "parameters": {"query": "llama"}}),
    [("search", {"query": "llama"})],
)


# vLLM's Llama 3 JSON parser reads calls after text on the same line and before more text.
case(
    "llama3",
    "vllm",
    "text_around_inline",
    'Here is the result: {"name": "empty_func", "parameters": {}} Would you like to know more?',
    [EMPTY],
)
case(
    "llama3",
    "vllm",
    "inline_semicolons_and_text",
    "Here are the results: "
    + llama3([S, EMPTY, ("search", {"query": "test2"})])
    + " Would you like to know more?",
    [S, EMPTY, ("search", {"query": "test2"})],
)
case(
    "llama3",
    "vllm",
    "deep_nesting",
    j({"name": "create_event", "parameters": {"details": {"a": {"b": {"c": {"d": "deep"}}}}}}),
    [("create_event", {"details": {"a": {"b": {"c": {"d": "deep"}}}}})],
)
case(
    "llama3",
    "vllm",
    "brackets_in_strings",
    j({"name": "search", "parameters": {"query": "test {value} [complex]"}}),
    [("search", {"query": "test {value} [complex]"})],
)
case(
    "llama3",
    "vllm",
    "invalid_json",
    '{"name": "search", "parameters": {invalid json}',
    [],
    error=True,
)
case(
    "llama3",
    "vllm",
    "spaced_semicolons",
    llama3([S, T], sep=" ; "),
    [S, T],
)


def pythonic(calls: list) -> str:
    def lit(v: Any) -> str:
        if v is None or isinstance(v, bool | int | float):
            return repr(v)
        if isinstance(v, str):
            return repr(v)
        if isinstance(v, list):
            return "[" + ", ".join(lit(x) for x in v) + "]"
        return "{" + ", ".join(f"{lit(k)}: {lit(x)}" for k, x in v.items()) + "}"

    inner = ", ".join(
        n + "(" + ", ".join(f"{k}={lit(v)}" for k, v in a.items()) + ")" for n, a in calls
    )
    return f"[{inner}]"


json_family(
    "pythonic",
    "sglang",
    pythonic,
    "[get_weather(location='Par",
    "Python lists look like [1, 2, 3].",
)
case("pythonic", "sglang", "text_before_same_line", "Here's a tool call: " + pythonic([W]), [W])
case("pythonic", "sglang", "text_after_same_line", pythonic([W2]) + " Here's the forecast:", [W2])
case("pythonic", "sglang", "two_lists_in_prose", pythonic([W2]) + " and " + pythonic([S]), [W2, S])
case("pythonic", "vllm", "positional_argument", "[get_weather('Paris')]", [], error=True)
case(
    "pythonic",
    "vllm",
    "infinite_number",
    "[calculate(expression='x', precision=1e999)]",
    [],
    error=True,
)

json_family(
    "llama4",
    "sglang",
    lambda calls: f"<|python_start|>{pythonic(calls)}<|python_end|>",
    "<|python_start|>[get_weather(location='Par",
    "Llama 4 can write <|python_start|> blocks.",
)
case(
    "llama4",
    "sglang",
    "text_around",
    "User wants the weather on Mars. <|python_start|>[get_weather(location='Mars')]"
    "<|python_end|> That will tell us.",
    [("get_weather", {"location": "Mars"})],
)
case("llama4", "vllm", "bare_list", pythonic([S, T]), [S, T])


USER = (
    "register_user",
    {
        "name": "Doe",
        "age": 9,
        "address": {"city": "LA", "state": "CA"},
        "role": None,
        "passed_test": True,
        "aliases": ["John", "Johnny"],
    },
)
for family, wrap in (("llama4", "<|python_start|>{}<|python_end|>"), ("pythonic", "{}")):
    case(family, "vllm", "more_types", wrap.format(pythonic([USER])), [USER])
    case(family, "vllm", "parameterless", wrap.format("[get_weather()]"), [("get_weather", {})])
    case(
        family,
        "vllm",
        "empty_dict_and_list",
        wrap.format("[do_something_cool(additional_data={}, steps=[])]"),
        [("do_something_cool", {"additional_data": {}, "steps": []})],
    )
    case(
        family,
        "vllm",
        "escaped_strings",
        wrap.format(r"[get_weather(location='Martha\'s Vineyard', unit='\"cool units\"')]"),
        [("get_weather", {"location": "Martha's Vineyard", "unit": '"cool units"'})],
    )
    case(
        family,
        "vllm",
        "parallel_no_spaces",
        wrap.format("[get_weather(location='LA',unit='C'),register_user(name='Doe',age=9)]"),
        [
            ("get_weather", {"location": "LA", "unit": "C"}),
            ("register_user", {"name": "Doe", "age": 9}),
        ],
    )
case(
    "llama4",
    "vllm",
    "no_end_token",
    "<|python_start|>[get_weather(location='LA'), register_user(name='Doe', age=9)]",
    [("get_weather", {"location": "LA"}), ("register_user", {"name": "Doe", "age": 9})],
)


def fenced(calls: list) -> str:
    return "\n".join(f"```json\n{j(obj(c))}\n```" for c in calls)


json_family(
    "json",
    "transformers",
    fenced,
    '```json\n{"name": "get_weather", "arguments": {"location": "Par\n```',
    'Example output:\n```json\n{"name": "Ada", "arguments": {"age": 36}}\n```',
)


def main() -> None:
    with OUT.open("w", encoding="utf-8") as f:
        for row in CASES:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    (OUT.with_name("tool_parser_tools.json")).write_text(
        json.dumps(TOOLS, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print(f"{len(CASES)} cases -> {OUT}")


if __name__ == "__main__":
    main()
