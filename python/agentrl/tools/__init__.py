"""Tools the policy can call: registry, ``@tool`` decorator, built-ins, schema helpers, and
the sandboxed ``python`` tool (:mod:`agentrl.tools.python_sandbox`; its per-episode
environment is `agentrl.envs.python_env`)."""

from agentrl.tools.builtin import (
    CALCULATE_MATH_SPEC,
    CALCULATOR_ALIAS_SPEC,
    UNIT_CONVERTER_SPEC,
    builtin_registry,
)
from agentrl.tools.python_sandbox import (
    PythonSandbox,
    PythonToolError,
    SandboxLimits,
    SandboxUnavailable,
    python_tool,
)
from agentrl.tools.registry import (
    Tool,
    ToolEvent,
    ToolRegistry,
    ToolResultTooLargeError,
    ToolTimeoutError,
    call_arguments,
    execute_tool_call,
    tool,
    tool_message,
)
from agentrl.tools.schema import (
    ToolSchemaError,
    append_calculator_alias,
    clone_tool_spec,
    merge_tool_specs,
    normalize_tool_schema,
    parse_tool_schema,
    resolve_tool_specs,
    supported_tool_names,
    tool_name_set,
)
from agentrl.tools.signature import ArgumentError, function_schema

__all__ = [
    "CALCULATE_MATH_SPEC",
    "CALCULATOR_ALIAS_SPEC",
    "UNIT_CONVERTER_SPEC",
    "ArgumentError",
    "PythonSandbox",
    "PythonToolError",
    "SandboxLimits",
    "SandboxUnavailable",
    "Tool",
    "ToolEvent",
    "ToolRegistry",
    "ToolResultTooLargeError",
    "ToolSchemaError",
    "ToolTimeoutError",
    "append_calculator_alias",
    "builtin_registry",
    "call_arguments",
    "clone_tool_spec",
    "execute_tool_call",
    "function_schema",
    "merge_tool_specs",
    "normalize_tool_schema",
    "parse_tool_schema",
    "python_tool",
    "resolve_tool_specs",
    "supported_tool_names",
    "tool",
    "tool_message",
    "tool_name_set",
]
