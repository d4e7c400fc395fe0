"""Text parsing and safe arithmetic, backed by the Rust core (`agentrl._core`).

Most functions here are the reward's contract: their results match the golden outputs
exactly (see tests/test_golden_*.py) while running in linear time on any input.
`parse_message` is the exception: the lenient multi-format parser the rollout loop uses to
decide which calls to execute.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentrl import _core


def canonicalize_expression(text: str) -> str:
    """Full-width characters to ASCII, ``^`` to ``**``, whitespace removed.

    This is the key expressions are de-duplicated by. Lone surrogates are kept as they
    are.
    """
    return _core.canonicalize_expression(text)


def safe_eval(expr: str) -> float:
    """Evaluate an arithmetic expression with Python float semantics, never with ``eval``.

    Accepts exactly the reward's arithmetic grammar (numbers in Python literal syntax,
    ``True``/``False``, ``pi``, ``e``, ``sqrt sin cos tan log exp abs round``, ``+ - * / //
    % **``, unary signs, parentheses; at most 256 characters once canonical; no bare dates)
    and computes what CPython computes. Raises ``ValueError`` (``SafeEvalError``) saying
    what was wrong, and at which character of the canonical form, for any invalid input.
    """
    return _core.safe_eval(expr)


def format_number(value: float) -> str:
    """Integral values as exact integer digits, others with at most 10 decimals.

    Raises ``OverflowError`` for infinities and ``ValueError`` for NaN, as Python's
    ``int()`` does.
    """
    return _core.format_number(value)


def extract_expressions(text: str, max_exprs: int = 8) -> list[str]:
    """Arithmetic expressions found in mixed Chinese/English text, each validated.

    In text order, without duplicates by canonical form, at most ``max_exprs`` of them (at
    least one, even when ``max_exprs <= 0``). Linear time on any input.
    """
    return _core.extract_expressions(text, max_exprs)


def parse_tool_calls(text: str) -> list[dict[str, Any]]:
    """The reward's tool-call parser: tagged JSON blocks, else function-style calls.

    Each entry is a dict: ``name``, ``arguments``, ``canonical`` (and
    ``parse_error`` for a tagged block that is not a usable JSON object).
    """
    return _core.parse_tool_calls(text)


MESSAGE_FORMATS: tuple[str, ...] = (
    "hermes",
    "json",
    "llama3",
    "llama4",
    "mistral",
    "deepseek",
    "deepseek_v32",
    "pythonic",
    "qwen3_coder",
    "glm45",
    "kimi_k2",
    "harmony",
    "granite",
    "internlm",
    "jamba",
    "xlam",
    "phi4_mini",
)
"""Call formats `parse_message` knows; pass a subset as ``formats`` to look for fewer."""

TOOL_FORMATS: dict[str, tuple[str, ...]] = {
    "auto": MESSAGE_FORMATS,
    **{name: (name,) for name in MESSAGE_FORMATS},
    # Llama 4 writes its pythonic list with or without the <|python_start|> wrapper.
    "llama4": ("llama4", "pythonic"),
    # xLAM's list of calls also comes in a ```json fence.
    "xlam": ("xlam", "json"),
    # Granite 3.1 writes <tool_call>[...] where 3.0 writes <|tool_call|>[...].
    "granite": ("granite", "hermes"),
}
"""``--tool_format`` names: ``auto`` looks for every format, a family name for its own
forms only (see docs/tool-formats.md)."""


def tool_format_formats(name: str) -> tuple[str, ...]:
    """The formats ``--tool_format name`` looks for; ``ValueError`` naming the choices."""
    try:
        return TOOL_FORMATS[name]
    except KeyError:
        raise ValueError(
            f"unknown tool format {name!r}; choose one of: {', '.join(TOOL_FORMATS)}"
        ) from None


@dataclass(slots=True)
class ParsedMessage:
    """A model message taken apart: what to show, what the model thought, what to run.

    ``calls`` are ``{"name": str, "arguments": dict}`` plus ``"unknown_tool": True`` when
    tools were declared and the name is not one of them; ``errors`` hold one
    ``{"format", "reason", "offset", "text"}`` per refused block, so the model can be told.
    """

    content: str
    reasoning: str | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)


def _tool_name(tool: Any) -> str:
    """The name of a declared tool given as a name, a schema dict or a tool object."""
    if isinstance(tool, str):
        return tool
    if isinstance(tool, Mapping):
        function = tool.get("function")
        name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
        if isinstance(name, str):
            return name
        raise ValueError(f"tool schema without a string name: {tool!r}")
    name = getattr(tool, "name", None)
    if isinstance(name, str):
        return name
    raise TypeError(f"cannot read a tool name from {type(tool).__name__}")


def _schema_type(spec: Any) -> str | None:
    """A property's JSON-schema type (the first non-null one of a list), if it has one."""
    if not isinstance(spec, Mapping):
        return None
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if isinstance(kind, str):
        return kind
    if "enum" in spec:
        return "string"
    return None


def _param_types(tools: list[Any]) -> dict[str, dict[str, str]]:
    """Tool name -> parameter -> declared type, from the tools given as schemas."""
    out: dict[str, dict[str, str]] = {}
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        function = tool.get("function") if isinstance(tool.get("function"), Mapping) else tool
        params = function.get("parameters")
        props = params.get("properties") if isinstance(params, Mapping) else None
        if not isinstance(props, Mapping) or not isinstance(function.get("name"), str):
            continue
        types = {str(k): t for k, v in props.items() if (t := _schema_type(v)) is not None}
        if types:
            out[function["name"]] = types
    return out


def parse_message(
    text: str,
    tools: Iterable[Any] | None = None,
    formats: Iterable[str] | str | None = None,
    tool_format: str = "auto",
) -> ParsedMessage:
    """Content, reasoning, tool calls and refused blocks of one model message.

    ``tools`` are the episode's declared tools (names, OpenAI-style schemas, or objects with
    a ``name``); with them, unknown names are flagged, fenced JSON or pythonic lists count
    only when they name a declared tool, and text-valued arguments (Qwen3-Coder, GLM) take
    the types their schema declares. ``formats`` restricts the formats looked for (see
    `MESSAGE_FORMATS`); ``tool_format`` pins one family (see `TOOL_FORMATS`) and is
    ignored when ``formats`` is given. Linear time on any input; nothing is evaluated.
    """
    tool_list = None if tools is None else list(tools)
    names = None
    types: dict[str, dict[str, str]] | None = None
    if tool_list is not None:
        names = [t if isinstance(t, str) else _tool_name(t) for t in tool_list]
        types = _param_types(tool_list) or None
    if isinstance(formats, str):
        formats = [formats]
    if formats is None and tool_format != "auto":
        formats = tool_format_formats(tool_format)
    wanted = None if formats is None else [str(f) for f in formats]
    content, reasoning, calls, errors = _core.parse_message(str(text), names, wanted, types)
    return ParsedMessage(content=content, reasoning=reasoning, calls=calls, errors=errors)


__all__ = [
    "MESSAGE_FORMATS",
    "TOOL_FORMATS",
    "ParsedMessage",
    "canonicalize_expression",
    "extract_expressions",
    "format_number",
    "parse_message",
    "parse_tool_calls",
    "safe_eval",
    "tool_format_formats",
]
