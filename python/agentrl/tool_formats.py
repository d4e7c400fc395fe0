"""Tool calls and results written in a model family's own format.

When a chat template renders tools itself, it writes calls and results the way the model
was taught. When it does not, agentrl writes them as text, and this module picks the text:
the family's own call syntax (Mistral's ``[TOOL_CALLS]``, Llama's JSON or pythonic list,
DeepSeek's call tokens, ...), chosen from the template and vocabulary (or pinned with
``--tool_format``). For every family, `render_calls` followed by
`agentrl.parsing.parse_message` gives back the same calls (a tested property), so what the
model is shown is what the parser reads. The families and their forms are listed in
docs/tool-formats.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentrl.parsing import TOOL_FORMATS, tool_format_formats

__all__ = [
    "RENDER_FAMILIES",
    "ToolFormat",
    "detect_tool_format",
    "protocol_text",
    "render_calls",
    "render_results",
    "tool_format_of",
    "use_tool_format",
]

Call = tuple[str, Mapping[str, Any]]

RENDER_FAMILIES: tuple[str, ...] = tuple(name for name in TOOL_FORMATS if name != "auto")
"""Families agentrl can write calls in (every ``--tool_format`` except ``auto``)."""


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _py_literal(value: Any) -> str:
    """A Python literal for a JSON value, as a pythonic call list writes it."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_py_literal(v) for v in value) + "]"
    if isinstance(value, Mapping):
        items = (f"{_dumps(str(k))}: {_py_literal(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    raise ValueError(f"a {type(value).__name__} cannot be written as a Python literal")


def _pythonic(calls: Sequence[Call]) -> str:
    parts = []
    for name, args in calls:
        for key in args:
            if not str(key).isidentifier():
                raise ValueError(
                    f"{name}: argument name {key!r} cannot be written as a pythonic keyword"
                )
        keywords = ", ".join(f"{k}={_py_literal(v)}" for k, v in args.items())
        parts.append(f"{name}({keywords})")
    return "[" + ", ".join(parts) + "]"


def _text_value(value: Any) -> str:
    """A value written as tagged text: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else _dumps(value)


def _tagged(calls: Sequence[Call], call: str, argument: str, sep: str = "\n") -> str:
    """Calls written as tagged text, one tag per argument, joined by ``sep``: ``call`` holds
    ``{name}`` and ``{arguments}``; ``argument`` holds ``{key}``, ``{value}`` (as
    `_text_value` writes it) and ``{string}`` (``true`` for a string value)."""
    return sep.join(
        call.format(
            name=name,
            arguments="".join(
                argument.format(key=k, value=_text_value(v), string=str(isinstance(v, str)).lower())
                for k, v in args.items()
            ),
        )
        for name, args in calls
    )


def _qwen3_coder(calls: Sequence[Call]) -> str:
    return _tagged(
        calls,
        "<tool_call>\n<function={name}>\n{arguments}</function>\n</tool_call>",
        "<parameter={key}>\n{value}\n</parameter>\n",
    )


def _glm45(calls: Sequence[Call]) -> str:
    return _tagged(
        calls,
        "<tool_call>{name}\n{arguments}</tool_call>",
        "<arg_key>{key}</arg_key>\n<arg_value>{value}</arg_value>\n",
    )


def _dsml(calls: Sequence[Call]) -> str:
    invokes = _tagged(
        calls,
        '<｜DSML｜invoke name="{name}">\n{arguments}</｜DSML｜invoke>\n',
        '<｜DSML｜parameter name="{key}" string="{string}">{value}</｜DSML｜parameter>\n',
        sep="",
    )
    return "<｜DSML｜function_calls>\n" + invokes + "</｜DSML｜function_calls>"


def _deepseek(calls: Sequence[Call]) -> str:
    parts = (
        f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{_dumps(dict(args))}\n```"
        "<｜tool▁call▁end｜>"
        for name, args in calls
    )
    return "<｜tool▁calls▁begin｜>" + "\n".join(parts) + "<｜tool▁calls▁end｜>"


def _kimi(calls: Sequence[Call]) -> str:
    parts = (
        f"<|tool_call_begin|>functions.{name}:{i}<|tool_call_argument_begin|>"
        f"{_dumps(dict(args))}<|tool_call_end|>"
        for i, (name, args) in enumerate(calls)
    )
    return "<|tool_calls_section_begin|>" + "".join(parts) + "<|tool_calls_section_end|>"


def _harmony(calls: Sequence[Call]) -> str:
    return "".join(
        f"<|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json"
        f"<|message|>{_dumps(dict(args))}<|call|>"
        for name, args in calls
    )


def _objects(calls: Sequence[Call], key: str = "arguments") -> list[dict[str, Any]]:
    return [{"name": name, key: dict(args)} for name, args in calls]


_RENDER = {
    "hermes": lambda calls: "\n".join(
        f"<tool_call>\n{_dumps(c)}\n</tool_call>" for c in _objects(calls)
    ),
    "json": lambda calls: "\n".join(f"```json\n{_dumps(c)}\n```" for c in _objects(calls)),
    "llama3": lambda calls: "\n".join(_dumps(c) for c in _objects(calls, "parameters")),
    "llama4": lambda calls: f"<|python_start|>{_pythonic(calls)}<|python_end|>",
    "mistral": lambda calls: "[TOOL_CALLS]" + _dumps(_objects(calls)),
    "deepseek": _deepseek,
    "deepseek_v32": _dsml,
    "pythonic": _pythonic,
    "qwen3_coder": _qwen3_coder,
    "glm45": _glm45,
    "kimi_k2": _kimi,
    "harmony": _harmony,
    "granite": lambda calls: "<|tool_call|>" + _dumps(_objects(calls)),
    "internlm": lambda calls: "\n".join(
        f"<|action_start|><|plugin|>\n{_dumps(c)}<|action_end|>"
        for c in _objects(calls, "parameters")
    ),
    "jamba": lambda calls: f"<tool_calls>{_dumps(_objects(calls))}</tool_calls>",
    "xlam": lambda calls: _dumps(_objects(calls)),
    "phi4_mini": lambda calls: "functools" + _dumps(_objects(calls)),
}


def _check_family(family: str) -> str:
    if family not in _RENDER:
        tool_format_formats(family)  # raises, naming the choices
        raise ValueError(f"tool format {family!r} cannot be written; pick a family")
    return family


def render_calls(family: str, calls: Sequence[Call], content: str = "") -> str:
    """An assistant turn's ``content`` followed by its ``calls`` written as ``family`` writes
    them. Raises ``ValueError`` for a call the family cannot express (a pythonic keyword
    that is not an identifier)."""
    _check_family(family)
    if not calls:
        return content
    text = _RENDER[family](calls)
    if family == "harmony" and content:
        content = f"<|channel|>commentary<|message|>{content}<|end|>"
        return content + text
    return f"{content}\n{text}" if content else text


# How each family reads a tool's result when the template has no tool role: the result is
# written into a user turn. Families without a textual form of their own use <tool_response>.
_RESULT_WRAP: dict[str, tuple[str, str]] = {
    "mistral": ("[TOOL_RESULTS]", "[/TOOL_RESULTS]"),
    "deepseek": ("<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>"),
    "deepseek_v32": ("<function_results>\n<result>", "</result>\n</function_results>"),
    "granite": ("<|tool_response|>", ""),
}


def render_results(family: str, results: Sequence[tuple[str, str]]) -> str:
    """Consecutive tool results (``(tool name, text)``) as one turn of text in ``family``'s
    form."""
    _check_family(family)
    blocks = []
    for index, (name, text) in enumerate(results):
        if family == "kimi_k2":
            blocks.append(f"## Return of functions.{name}:{index}\n{text}")
        elif family == "harmony":
            blocks.append(
                f"<|start|>functions.{name} to=assistant<|channel|>commentary<|message|>"
                f"{_dumps(text)}<|end|>"
            )
        else:
            open_, close = _RESULT_WRAP.get(family, ("<tool_response>\n", "\n</tool_response>"))
            blocks.append(open_ + text + close)
    return "\n".join(blocks)


# The call protocol as the tools block states it. Hermes keeps the built-in wording.
_PLACEHOLDER = [("<function-name>", {"<arg-name>": "<arg-value>"})]


def protocol_text(family: str) -> str:
    """How the tools block tells the model to call a function in ``family``'s format."""
    _check_family(family)
    if family == "hermes":
        return (
            "To call a function, write a JSON object with its name and arguments inside "
            "<tool_call></tool_call> tags:\n<tool_call>\n"
            '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
        )
    if family in ("pythonic", "llama4"):
        example = render_calls(family, [("func_name", {"param": "value"})])
        return (
            "To call functions, write them as a Python list of calls with keyword "
            f"arguments, for example:\n{example}"
        )
    example = render_calls(family, _PLACEHOLDER)
    return f"To call a function, write it exactly in this format:\n{example}"


@dataclass(frozen=True)
class ToolFormat:
    """The family tool calls are written in, and why it was chosen (for logs and
    ``--show_prompt``)."""

    family: str
    reason: str

    def describe(self) -> str:
        example = render_calls(self.family, [("get_weather", {"city": "Paris"})])
        return f"{self.family} ({self.reason}); a call is written as: {example}"


# Signatures of each family: strings its chat template or special tokens contain, most
# specific first (Qwen3-Coder and GLM templates also contain <tool_call>).
_SIGNATURES: tuple[tuple[str, str], ...] = (
    ("｜DSML｜", "deepseek_v32"),
    ("<｜tool▁calls▁begin｜>", "deepseek"),
    ("<|tool_calls_section_begin|>", "kimi_k2"),
    ("<arg_key>", "glm45"),
    ("<function=", "qwen3_coder"),
    ("<|channel|>", "harmony"),
    ("<|python_start|>", "llama4"),
    ("<|python_tag|>", "llama3"),
    ("[TOOL_CALLS]", "mistral"),
    ("<|tool_call|>", "granite"),
    ("<|action_start|>", "internlm"),
    ("<tool_calls>", "jamba"),
    ("functools", "phi4_mini"),
    ("<tool_call>", "hermes"),
)

# Model names when neither the template nor the vocabulary says (checked in order).
_NAMES: tuple[tuple[str, str], ...] = (
    ("xlam", "xlam"),
    ("phi-4-mini", "phi4_mini"),
    ("gpt-oss", "harmony"),
    ("qwen3-coder", "qwen3_coder"),
    ("glm-4", "glm45"),
    ("kimi", "kimi_k2"),
    ("deepseek-v3.2", "deepseek_v32"),
    ("deepseek", "deepseek"),
    ("llama-4", "llama4"),
    ("llama4", "llama4"),
    ("llama", "llama3"),
    ("mistral", "mistral"),
    ("mixtral", "mistral"),
    ("ministral", "mistral"),
    ("gemma", "pythonic"),
    ("granite", "granite"),
    ("internlm", "internlm"),
    ("jamba", "jamba"),
    ("qwen", "hermes"),
)


def _vocabulary(tokenizer: Any) -> set[str]:
    special = set(getattr(tokenizer, "all_special_tokens", None) or [])
    added = getattr(tokenizer, "added_tokens_encoder", None)
    if isinstance(added, Mapping):
        special.update(str(t) for t in added)
    return special


def detect_tool_format(tokenizer: Any, choice: str = "auto") -> ToolFormat:
    """The family for ``tokenizer``: ``choice`` when it names one, else the first family
    whose signature is in the chat template, then in the special tokens, then in the model
    name; ``hermes`` (the built-in ``<tool_call>`` format) when nothing matches."""
    if choice != "auto":
        return ToolFormat(_check_family(choice), "chosen with --tool_format")
    template = getattr(tokenizer, "chat_template", None)
    template = template if isinstance(template, str) else ""
    for signature, family in _SIGNATURES:
        if signature in template:
            return ToolFormat(family, f"the chat template writes {signature}")
    vocabulary = _vocabulary(tokenizer)
    for signature, family in _SIGNATURES:
        if signature in vocabulary:
            return ToolFormat(family, f"the tokenizer has the special token {signature}")
    name = str(getattr(tokenizer, "name_or_path", "") or "").lower()
    for part, family in _NAMES:
        if part in name:
            return ToolFormat(family, f"the model name {name!r} contains {part!r}")
    return ToolFormat("hermes", "no family recognised: the built-in <tool_call> format")


def use_tool_format(tokenizer: Any, choice: str) -> None:
    """Apply ``--tool_format`` to a tokenizer: remembered for rendering and logs."""
    tool_format_formats(choice)  # validates the name
    tokenizer.agentrl_tool_format = choice


def tool_format_of(tokenizer: Any) -> ToolFormat:
    """The family this tokenizer's conversations are written in (``--tool_format`` or
    detected)."""
    choice = getattr(tokenizer, "agentrl_tool_format", "auto")
    return detect_tool_format(tokenizer, choice if isinstance(choice, str) else "auto")
