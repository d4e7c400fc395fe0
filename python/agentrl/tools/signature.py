"""JSON schema from a Python function, and argument checking against that schema.

A user writes an ordinary typed function with a docstring; the model sees an OpenAI-style
spec built from it, and the arguments the model sends back are checked (and gently
coerced: ``"3"`` for an ``int``) before the function runs, so that a wrong argument becomes
a clear tool error the policy can be rewarded for avoiding instead of a stack trace.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

# Docstring section headers (Google and NumPy styles) that end the free-text description.
_SECTION_RE = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Keyword Args|Returns?|Yields?|Raises|Examples?|"
    r"Notes?|See Also)\s*:?\s*$",
    re.IGNORECASE,
)
_ARG_SECTION = {"args", "arguments", "parameters", "params", "keyword args"}
_GOOGLE_ARG_RE = re.compile(r"^\s*\**(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
_NUMPY_ARG_RE = re.compile(r"^(\w+)\s*(?::\s*(.*))?$")
_REST_PARAM_RE = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")

_OBJECT_TYPES = (dict, cabc.Mapping, cabc.MutableMapping)
_ARRAY_TYPES = (
    list,
    tuple,
    set,
    frozenset,
    cabc.Sequence,
    cabc.MutableSequence,
    cabc.Iterable,
    cabc.Collection,
    cabc.Set,
)


class ToolSchemaError(ValueError):
    """A tool schema that cannot be understood: raised by
    `agentrl.tools.schema.parse_tool_schema` and :func:`check_parameters`."""


def check_parameters(name: Any, parameters: Any) -> None:
    """Refuse a tool's ``parameters`` that is not a JSON object schema: a dict, or a JSON
    string of one, or nothing (None: no parameters). ``"oops"``, a list or a number would
    otherwise become an empty schema without a word; raises :class:`ToolSchemaError`."""
    value = parameters
    if isinstance(value, str):
        with contextlib.suppress(ValueError):  # undecodable: refused as the string it is
            value = json.loads(value)
    if value is not None and not isinstance(value, dict):
        raise ToolSchemaError(
            f"tool {name!r}: parameters must be a JSON object schema "
            f'({{"type": "object", "properties": ...}}), got {parameters!r:.60}'
        )


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into its description and per-parameter descriptions.

    Understands Google (``Args:`` then ``name (type): text``), NumPy (``Parameters`` then
    ``name : type`` and an indented text) and reST (``:param name: text``) styles.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    numpy_style = False
    arg_indent: int | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        rest = _REST_PARAM_RE.match(line)
        if rest:
            section, current = "rest", rest.group(1)
            params[current] = rest.group(2).strip()
            continue
        if line.strip().startswith(":"):
            section, current = "rest-other", None
            continue
        header = _SECTION_RE.match(line)
        if header:
            section, current, arg_indent = header.group(1).lower(), None, None
            # NumPy style underlines the header with dashes.
            numpy_style = index < len(lines) and set(lines[index].strip()) == {"-"}
            if numpy_style:
                index += 1
            continue
        if section is None:
            description.append(line)
            continue
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if section in _ARG_SECTION:
            if arg_indent is None:
                arg_indent = indent
            if indent <= arg_indent:
                match = (_NUMPY_ARG_RE if numpy_style else _GOOGLE_ARG_RE).match(line.strip())
                current = match.group(1) if match else None
                if current is not None:
                    params[current] = "" if numpy_style else match.group(3).strip()
            elif current is not None:
                params[current] = (params[current] + " " + line.strip()).strip()
        elif section == "rest" and current is not None and indent > 0:
            params[current] = (params[current] + " " + line.strip()).strip()
    text = "\n".join(description).strip()
    # One paragraph per blank-line group, each paragraph on one line.
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]
    return "\n\n".join(paragraphs), params


def _is_union(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    return origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType)


def json_schema_for(tp: Any) -> dict[str, Any]:
    """JSON schema of one Python type hint (unknown types give an unconstrained schema)."""
    if tp is inspect.Parameter.empty or tp is Any or tp is object:
        return {}
    if tp is type(None) or tp is None:
        return {"type": "null"}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        schema = json_schema_for(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema["description"] = " ".join(notes)
        return schema
    if _is_union(tp):
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:
            return json_schema_for(members[0])
        return {"anyOf": [json_schema_for(a) for a in members]}
    if origin is typing.Literal:
        values = list(args)
        schema = {"enum": values}
        kinds = {json_schema_for(type(v)).get("type") for v in values}
        if len(kinds) == 1 and None not in kinds:
            schema = {"type": kinds.pop(), "enum": values}
        return schema
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [member.value for member in tp]
        kinds = {json_schema_for(type(v)).get("type") for v in values}
        schema = {"enum": values}
        if len(kinds) == 1 and None not in kinds:
            schema = {"type": kinds.pop(), "enum": values}
        return schema
    base = origin or tp
    if base is bool:
        return {"type": "boolean"}
    if base is int:
        return {"type": "integer"}
    if base is float:
        return {"type": "number"}
    if base is str:
        return {"type": "string"}
    if base in _OBJECT_TYPES:
        schema = {"type": "object"}
        if len(args) == 2 and json_schema_for(args[1]):
            schema["additionalProperties"] = json_schema_for(args[1])
        return schema
    if base in _ARRAY_TYPES:
        schema = {"type": "array"}
        homogeneous = base is not tuple or (len(args) == 2 and args[1] is Ellipsis)
        if args and homogeneous and json_schema_for(args[0]):
            schema["items"] = json_schema_for(args[0])
        return schema
    return {}


def _resolved_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """Type hints with string annotations resolved; unresolvable ones are left out."""
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:  # a forward reference that does not resolve: use what is usable
        raw = getattr(fn, "__annotations__", {}) or {}
        return {k: v for k, v in raw.items() if not isinstance(v, str)}


def function_schema(
    fn: Callable[..., Any], name: str | None = None, description: str | None = None
) -> dict[str, Any]:
    """The OpenAI-style ``{"type": "function", "function": {...}}`` spec of ``fn``.

    Parameters without a default are required. ``*args``, ``**kwargs`` and positional-only
    parameters cannot be called with a JSON object of arguments, so they are refused.
    """
    name = name or getattr(fn, "__name__", type(fn).__name__)
    signature = inspect.signature(fn)
    hints = _resolved_hints(fn)
    doc_text, doc_params = parse_docstring(inspect.getdoc(fn))
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(
                f"tool {name!r}: parameter {param.name!r} must be an ordinary "
                "named parameter (no *args, **kwargs or positional-only parameters)"
            )
        schema = json_schema_for(hints.get(param.name, param.annotation))
        if param.name in doc_params and doc_params[param.name] and "description" not in schema:
            schema["description"] = doc_params[param.name]
        if param.default is param.empty:
            required.append(param.name)
        elif param.default is not None and _json_safe(param.default):
            schema["default"] = param.default
        properties[param.name] = schema
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description if description is not None else doc_text,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


class ArgumentError(ValueError):
    """Arguments sent by the model do not fit the tool's parameters."""


_TRUE = {"true", "1", "yes", "y", "on"}
_FALSE = {"false", "0", "no", "n", "off"}


def _coerce(name: str, value: Any, schema: dict[str, Any]) -> Any:
    """Value converted to the schema's type where the intent is unambiguous, else raise."""
    kind = schema.get("type")
    if "enum" in schema:
        if value in schema["enum"]:
            return value
        for option in schema["enum"]:
            if str(option) == str(value):
                return option
        raise ArgumentError(f"argument {name!r} must be one of {schema['enum']}, got {value!r}")
    if kind == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
    elif kind in ("integer", "number"):
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        if numeric and (kind == "number" or isinstance(value, int)):
            return value
        if numeric and value.is_integer():  # an integral float where an integer is wanted
            return int(value)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                return (int if kind == "integer" else float)(value.strip())
    elif kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
    elif kind in ("array", "object"):
        wanted = list if kind == "array" else dict
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = json.loads(value)
        if isinstance(value, wanted):
            return value
        if kind == "array" and isinstance(value, tuple):
            return list(value)
    elif kind == "null":
        if value is None:
            return None
    else:
        return value
    raise ArgumentError(f"argument {name!r} must be {kind}, got {type(value).__name__}")


def bind_arguments(
    fn: Callable[..., Any], spec: dict[str, Any], args: Mapping[str, Any]
) -> dict[str, Any]:
    """Keyword arguments for ``fn`` from the model's argument object, checked and coerced."""
    params = spec.get("function", {}).get("parameters", {}) or {}
    properties: dict[str, Any] = params.get("properties", {}) or {}
    required = params.get("required", []) or []
    signature = inspect.signature(fn)
    accepts_any = any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values())
    unknown = [k for k in args if k not in properties and k not in signature.parameters]
    if unknown and not accepts_any:
        raise ArgumentError(f"unexpected argument {unknown[0]!r}")
    missing = [k for k in required if k not in args]
    if missing:
        raise ArgumentError(f"missing required argument {missing[0]!r}")
    bound: dict[str, Any] = {}
    for key, value in args.items():
        schema = properties.get(key, {})
        if value is None and key not in required:
            bound[key] = None
            continue
        if "anyOf" in schema:
            for option in schema["anyOf"]:
                try:
                    bound[key] = _coerce(key, value, option)
                    break
                except ArgumentError:
                    continue
            else:
                raise ArgumentError(f"argument {key!r} does not match any allowed type")
        else:
            bound[key] = _coerce(key, value, schema)
    return bound


__all__ = [
    "ArgumentError",
    "ToolSchemaError",
    "bind_arguments",
    "check_parameters",
    "function_schema",
    "json_schema_for",
    "parse_docstring",
]
