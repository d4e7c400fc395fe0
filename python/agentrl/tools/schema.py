"""Tool-schema normalisation and merging.

Datasets describe tools in several dialects (OpenAI ``{"type": "function", "function":
{...}}``, bare ``{"name", "description", "parameters"}``, a JSON string of either, a single
object instead of a list). Everything downstream (chat rendering, the rollout's list of
allowed tool names, the reward) works on one shape: a list of OpenAI-style specs. These
helpers keep the compatible normalisation and merge rules exactly, because which
tools a prompt advertises changes what the policy is rewarded for.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Collection, Iterable, Iterator
from typing import Any

from agentrl.tools.signature import ToolSchemaError, check_parameters
from agentrl.utils.fields import object_list

ToolSpec = dict[str, Any]

# Name of the preferred arithmetic tool and of its backward-compatible alias.
MATH_TOOL = "calculate_math"
ALIAS_TOOL = "calculator"

_EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


def _function_part(item: dict[str, Any]) -> dict[str, Any] | None:
    """The ``function`` body of one tool entry, or None when the entry is not a tool."""
    if isinstance(item.get("function"), dict):
        return dict(item["function"])
    if "name" in item:
        return {
            "name": item.get("name"),
            "description": item.get("description", ""),
            "parameters": item.get("parameters", copy.deepcopy(_EMPTY_PARAMETERS)),
        }
    return None


def parse_tool_schema(raw_tools: Any) -> list[ToolSpec] | None:
    """Like :func:`normalize_tool_schema`, but a field that is present and unusable raises.

    ``None``, ``""`` and an empty list mean "no tools" and return None. A JSON string that
    does not parse, a tool whose ``parameters`` is not an object schema (`check_parameters`),
    or a value that is neither a list, an object nor a string, raises
    :class:`ToolSchemaError` so that the prompt pool can report the line instead of
    silently training that prompt with the default tools.
    """
    if raw_tools is None or raw_tools == "" or raw_tools == []:
        return None
    if isinstance(raw_tools, str):
        try:
            raw_tools = json.loads(raw_tools)
        except ValueError as exc:
            raise ToolSchemaError(f"tools is not valid JSON: {exc}") from None
        if raw_tools is None or raw_tools == []:
            return None
    tools = object_list(raw_tools)
    if tools is None:
        raise ToolSchemaError(f"tools must be a list or an object, got {type(raw_tools).__name__}")
    for item in tools:
        fn = _function_part(item) if isinstance(item, dict) else None
        if fn is not None:
            check_parameters(fn.get("name"), fn.get("parameters"))
    specs = normalize_tool_schema(tools)
    if specs is None:
        raise ToolSchemaError("tools has no entry with a function name")
    return specs


def normalize_tool_schema(raw_tools: Any) -> list[ToolSpec] | None:
    """Any accepted tools field to a list of OpenAI-style specs; None when there are none.

    Never raises: unusable input gives None, and entries that are not tools are skipped.
    A ``parameters`` value given as a JSON string is decoded (an undecodable one becomes
    an empty object schema). Entries without a string name are dropped.
    """
    if raw_tools is None or raw_tools == "":
        return None
    if isinstance(raw_tools, str):
        try:
            raw_tools = json.loads(raw_tools)
        except ValueError:
            return None
    tools = object_list(raw_tools)
    if tools is None:
        return None
    specs: list[ToolSpec] = []
    for item in tools:
        if not isinstance(item, dict):
            continue
        fn = _function_part(item)
        if fn is None:
            continue
        if isinstance(fn.get("parameters"), str):
            try:
                fn["parameters"] = json.loads(fn["parameters"])
            except ValueError:
                fn["parameters"] = copy.deepcopy(_EMPTY_PARAMETERS)
        if isinstance(fn.get("name"), str) and fn["name"]:
            specs.append({"type": "function", "function": fn})
    return specs or None


# Type names of function docs written for other languages (BFCL's ``dict``, ``float``,
# ``tuple``, ``any``; xLAM's ``str``, ``List[int]``; Java/JavaScript names) as JSON-schema
# types, the way BFCL converts its docs for OpenAI-style models. Unknown names: string.
JSON_SCHEMA_TYPES = {
    **dict.fromkeys(("string", "str", "char", "any", "text"), "string"),
    **dict.fromkeys(("integer", "int", "byte", "short", "long", "bigint"), "integer"),
    **dict.fromkeys(("number", "float", "double", "decimal"), "number"),
    **dict.fromkeys(("boolean", "bool"), "boolean"),
    **dict.fromkeys(("array", "list", "tuple", "set", "arraylist", "queue", "stack"), "array"),
    **dict.fromkeys(("object", "dict", "hashmap", "hashtable", "map", "mapping"), "object"),
    "null": "null",
}
# Beyond this depth a schema is kept as it is (bounds the recursion on hostile input).
MAX_SCHEMA_DEPTH = 32


def _json_type(text: str) -> tuple[str, str | None, bool]:
    """``(JSON type, item type or None, optional)`` of a type name such as ``float``,
    ``List[int]``, ``Optional[str]`` or xLAM's ``str, optional``."""
    name = text.strip()
    optional = False
    if name.lower().endswith(", optional"):
        name, optional = name[: -len(", optional")].strip(), True
    head, _, rest = name.partition("[")
    inner = rest[:-1].strip() if rest.endswith("]") else ""
    if head.strip().lower() == "optional" and inner:
        kind, item, _ = _json_type(inner)
        return kind, item, True
    kind = JSON_SCHEMA_TYPES.get(head.strip().lower(), "string")
    item = None
    if kind == "array" and inner and "," not in inner:
        item = _json_type(inner)[0]
    return kind, item, optional


def json_schema(schema: Any, depth: int = 0) -> Any:
    """One parameter schema with JSON-schema types, nested properties and items included.

    A missing type becomes ``string``; ``float`` becomes ``number`` with ``format: float``
    and a sentence saying so in the description (what BFCL's OpenAI conversion does, so
    the model still learns the value is a float).
    """
    if not isinstance(schema, dict) or depth > MAX_SCHEMA_DEPTH:
        return schema
    out = dict(schema)
    given = out.get("type")
    if isinstance(given, list):
        out["type"] = [_json_type(t)[0] if isinstance(t, str) else t for t in given]
    else:
        kind, item, _ = _json_type(given) if isinstance(given, str) else ("string", None, False)
        out["type"] = kind
        if isinstance(given, str) and given.strip().lower() == "float":
            out["format"] = "float"
            text = out.get("description")
            out["description"] = (
                f"{text if isinstance(text, str) else ''} This is a float type value."
            )
        if item is not None and not isinstance(out.get("items"), dict):
            out["items"] = {"type": item}
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: json_schema(v, depth + 1) for k, v in out["properties"].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = json_schema(out["items"], depth + 1)
    return out


def _argument_table(parameters: dict[str, Any]) -> bool:
    """Whether ``parameters`` is xLAM's ``{argument: {type, description, default}}`` table
    rather than a JSON schema."""
    if "properties" in parameters or isinstance(parameters.get("type"), str):
        return False
    return bool(parameters) and all(isinstance(v, dict) for v in parameters.values())


def json_schema_parameters(parameters: Any) -> dict[str, Any]:
    """A function's parameters as a JSON ``object`` schema: BFCL's ``"type": "dict"``
    schemas and xLAM's argument tables (whose ``required`` are the arguments whose type is
    not marked optional: ``str, optional``, ``Optional[int]``; their ``default`` is often
    an example) converted, types as :func:`json_schema` does."""
    if not isinstance(parameters, dict):
        return copy.deepcopy(_EMPTY_PARAMETERS)
    if _argument_table(parameters):
        required = [
            name
            for name, arg in parameters.items()
            if not (isinstance(arg.get("type"), str) and _json_type(arg["type"])[2])
        ]
        parameters = {"type": "object", "properties": parameters, "required": required}
    out = json_schema({**parameters, "type": "object"})
    out.setdefault("properties", {})
    return out


def json_schema_tool(doc: Any) -> ToolSpec | None:
    """A function doc (BFCL's, xLAM's, a bare or OpenAI-wrapped one) as an OpenAI spec
    whose parameters are a JSON schema; None for an entry with no function name. Parameters
    that are no object (`check_parameters`) raise :class:`ToolSchemaError`."""
    if not isinstance(doc, dict):
        return None
    fn = _function_part(doc)
    if fn is None or not isinstance(fn.get("name"), str) or not fn["name"]:
        return None
    parameters = fn.get("parameters")
    check_parameters(fn["name"], parameters)
    if isinstance(parameters, str):
        parameters = json.loads(parameters)
    fn["parameters"] = json_schema_parameters(parameters)
    return {"type": "function", "function": fn}


def tool_spec_name(spec: Any) -> str | None:
    """The function name of one spec, or None for anything that is not a named spec."""
    if not isinstance(spec, dict):
        return None
    fn = spec.get("function")
    if not isinstance(fn, dict):
        return None
    name = fn.get("name")
    return name if isinstance(name, str) and name else None


def supported_tool_names(tool_specs: Iterable[Any] | None) -> list[str]:
    """Names of the specs, in order (duplicates kept)."""
    if not tool_specs:
        return []
    return [name for name in (tool_spec_name(spec) for spec in tool_specs) if name]


def tool_name_set(tool_specs: Iterable[Any] | None) -> set[str]:
    return set(supported_tool_names(tool_specs))


def clone_tool_spec(spec: ToolSpec) -> ToolSpec:
    """A deep copy, so that a prompt's tools can be edited without touching the defaults.

    Specs are JSON data, and a JSON round trip copies them several times faster than
    ``copy.deepcopy``; anything that is not JSON falls back to ``deepcopy``.
    """
    try:
        return json.loads(json.dumps(spec, ensure_ascii=False))
    except (TypeError, ValueError):
        return copy.deepcopy(spec)


def _merge_kept(
    primary: Iterable[Any] | None,
    extra: Iterable[Any] | None,
    keep_alias: bool,
    allowed_names: Collection[str] | None,
) -> Iterator[tuple[str, Any]]:
    """``(name, spec)`` of each spec a merge keeps: first of its name, allowed, in order."""
    seen: set[str] = set()
    for source in (primary or [], extra or []):
        for spec in source:
            name = tool_spec_name(spec)
            if not name or name in seen:
                continue
            if name == ALIAS_TOOL and not keep_alias:
                continue
            if allowed_names is not None and name not in allowed_names:
                continue
            seen.add(name)
            yield name, spec


def merged_tool_names(
    primary: Iterable[Any] | None,
    extra: Iterable[Any] | None,
    keep_alias: bool = False,
    allowed_names: Collection[str] | None = None,
) -> list[str]:
    """The names :func:`merge_tool_specs` would keep, in order, without copying specs."""
    return [name for name, _ in _merge_kept(primary, extra, keep_alias, allowed_names)]


def merge_tool_specs(
    primary: Iterable[Any] | None,
    extra: Iterable[Any] | None,
    keep_alias: bool = False,
    allowed_names: Collection[str] | None = None,
) -> list[ToolSpec] | None:
    """Union of two spec lists: first occurrence of a name wins, order preserved.

    The ``calculator`` alias is dropped unless ``keep_alias``; with ``allowed_names``, only
    those names survive. Returns None when nothing is left.
    """
    kept = _merge_kept(primary, extra, keep_alias, allowed_names)
    merged = [clone_tool_spec(spec) for _, spec in kept]
    return merged or None


def resolve_tool_specs(
    sample_tools: Iterable[Any] | None,
    default_tools: Iterable[Any] | None,
    force_all_tools: bool = False,
    keep_alias: bool = False,
    allowed_names: Collection[str] | None = None,
) -> list[ToolSpec] | None:
    """The tools one prompt advertises: its own, else the defaults, or both when forced."""
    own = merge_tool_specs(sample_tools, None, keep_alias=keep_alias, allowed_names=allowed_names)
    defaults = merge_tool_specs(
        default_tools, None, keep_alias=keep_alias, allowed_names=allowed_names
    )
    if force_all_tools:
        return merge_tool_specs(own, defaults, keep_alias=keep_alias, allowed_names=allowed_names)
    return own or defaults


def append_calculator_alias(tools: list[ToolSpec] | None) -> list[ToolSpec] | None:
    """Add the ``calculator`` alias spec when ``calculate_math`` is offered without it."""
    if not tools:
        return tools
    names = tool_name_set(tools)
    if MATH_TOOL in names and ALIAS_TOOL not in names:
        from agentrl.tools.builtin import CALCULATOR_ALIAS_SPEC

        return [*tools, clone_tool_spec(CALCULATOR_ALIAS_SPEC)]
    return tools


__all__ = [
    "ALIAS_TOOL",
    "JSON_SCHEMA_TYPES",
    "MATH_TOOL",
    "ToolSchemaError",
    "ToolSpec",
    "append_calculator_alias",
    "clone_tool_spec",
    "json_schema",
    "json_schema_parameters",
    "json_schema_tool",
    "merge_tool_specs",
    "merged_tool_names",
    "normalize_tool_schema",
    "parse_tool_schema",
    "resolve_tool_specs",
    "supported_tool_names",
    "tool_name_set",
    "tool_spec_name",
]
