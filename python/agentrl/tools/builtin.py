"""The built-in tools of the arithmetic tool-use task, with the compatible behaviour.

``calculate_math`` (and its aliases ``calculator`` and ``python_math``) evaluate with the
Rust evaluator, so the value a rollout sees is the value the reward recomputes;
``unit_converter`` and ``get_current_time`` use fixed tables, so that tasks have one right
answer. Results keep the exact dict shapes of the golden events: the reward reads them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from agentrl.parsing import format_number, safe_eval
from agentrl.tools.registry import Tool, ToolRegistry

TimeMode = Literal["fixed", "live"]

MATH_TOOL_NAMES = ("calculate_math", "calculator", "python_math")
DEFAULT_ACTIVE_TOOLS = ("calculate_math", "unit_converter", "get_current_time")

CALCULATE_MATH_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "calculate_math",
        "description": "Evaluate an arithmetic expression. 计算算术表达式。",
        "parameters": {
            "type": "object",
            "properties": {
                "expression": {
                    "type": "string",
                    "description": "For example (12+7)*3 or sqrt(16)+2**10.",
                }
            },
            "required": ["expression"],
        },
    },
}

UNIT_CONVERTER_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "unit_converter",
        "description": "Convert km/miles, kg/pounds, meters/feet, celsius/fahrenheit. 单位换算。",
        "parameters": {
            "type": "object",
            "properties": {
                "value": {"type": "number"},
                "from_unit": {"type": "string"},
                "to_unit": {"type": "string"},
            },
            "required": ["value", "from_unit", "to_unit"],
        },
    },
}

CURRENT_TIME_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_current_time",
        "description": "Current time in a timezone such as Asia/Tokyo. 查询时间。",
        "parameters": {
            "type": "object",
            "properties": {"timezone": {"type": "string"}},
            "required": [],
        },
    },
}


def _older_name_spec(name: str) -> dict[str, Any]:
    """The spec of an older name of calculate_math (same argument, pointed at the new name)."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": "Older name of calculate_math; prefer calculate_math.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }


CALCULATOR_ALIAS_SPEC: dict[str, Any] = _older_name_spec("calculator")
PYTHON_MATH_SPEC: dict[str, Any] = _older_name_spec("python_math")

# The clock a `fixed`-mode get_current_time reports (Shanghai is the
# answer for any other timezone).
FIXED_TIMES: dict[str, str] = {
    "Asia/Shanghai": "2025-03-07 14:30:00",
    "America/New_York": "2025-03-07 01:30:00",
    "Europe/London": "2025-03-07 06:30:00",
    "Asia/Tokyo": "2025-03-07 15:30:00",
    "Europe/Paris": "2025-03-07 07:30:00",
    "Australia/Sydney": "2025-03-07 17:30:00",
}
DEFAULT_TIMEZONE = "Asia/Shanghai"

# Multiplicative conversions, keyed "from_to".
UNIT_FACTORS: dict[str, float] = {
    "km_miles": 0.621371,
    "miles_km": 1.60934,
    "kg_pounds": 2.20462,
    "pounds_kg": 0.453592,
    "meters_feet": 3.28084,
    "feet_meters": 0.3048,
}


def calculate_math(args: Mapping[str, Any]) -> dict[str, Any]:
    """Evaluate ``expression`` (or ``query``); the float value and its canonical text."""
    expression = str(args.get("expression", args.get("query", ""))).strip()
    if not expression:
        raise ValueError("missing expression")
    value = safe_eval(expression)
    return {"value": value, "result": format_number(value)}


def convert_units(value: float, from_unit: str, to_unit: str) -> float:
    """The converted value before rounding; raises for an unknown pair."""
    key = f"{from_unit}_{to_unit}"
    if key == "celsius_fahrenheit":
        return value * 1.8 + 32.0
    if key == "fahrenheit_celsius":
        return (value - 32.0) / 1.8
    if key in UNIT_FACTORS:
        return value * UNIT_FACTORS[key]
    raise ValueError(f"unsupported conversion: {key}")


def unit_converter(args: Mapping[str, Any]) -> dict[str, Any]:
    """Convert ``value`` from ``from_unit`` to ``to_unit``; result rounded to 6 decimals."""
    value = float(args["value"])
    from_unit = str(args["from_unit"]).lower().strip()
    to_unit = str(args["to_unit"]).lower().strip()
    result = convert_units(value, from_unit, to_unit)
    return {
        "value": value,
        "from_unit": from_unit,
        "to_unit": to_unit,
        "result": format_number(round(result, 6)),
    }


def current_time(args: Mapping[str, Any], mode: TimeMode = "fixed") -> dict[str, Any]:
    """The fixed table's time for ``timezone`` (default Shanghai), or the live UTC clock."""
    timezone = str(args.get("timezone", DEFAULT_TIMEZONE) or DEFAULT_TIMEZONE)
    if mode == "live":
        now = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        return {"timezone": timezone, "datetime": now, "mode": "live_utc"}
    stamp = FIXED_TIMES.get(timezone, FIXED_TIMES[DEFAULT_TIMEZONE])
    return {"timezone": timezone, "datetime": stamp, "mode": "fixed"}


def _builtin(name: str, fn: Any, spec: dict[str, Any]) -> Tool:
    copy = {"type": "function", "function": dict(spec["function"])}
    return Tool(name=name, fn=fn, spec=copy, raw_args=True, inline=True)


def builtin_registry(
    time_mode: TimeMode = "fixed",
    active_tools: Iterable[str] | None = None,
    allow_calculator_alias: bool = False,
    *,
    timeout: float = 10.0,
    max_result_chars: int = 8192,
) -> ToolRegistry:
    """A registry holding the built-in tools, configured by the compatible data options.

    ``active_tools`` (default: the three main tools, in that order; unknown names are
    ignored) are advertised;
    ``python_math`` is always accepted but never advertised; ``calculator`` is advertised
    and accepted only with ``allow_calculator_alias``. Every built-in still executes when
    a prompt's own tool list names it. ``timeout`` and ``max_result_chars`` are the
    defaults for user tools registered later.
    """
    if time_mode not in ("fixed", "live"):
        raise ValueError(f"time_mode must be 'fixed' or 'live', got {time_mode!r}")
    requested = list(active_tools) if active_tools else list(DEFAULT_ACTIVE_TOOLS)
    active = [n for n in dict.fromkeys(requested) if n in DEFAULT_ACTIVE_TOOLS]

    def time_tool(args: Mapping[str, Any]) -> dict[str, Any]:
        return current_time(args, time_mode)

    registry = ToolRegistry(timeout=timeout, max_result_chars=max_result_chars)
    main_tools = {
        "calculate_math": (calculate_math, CALCULATE_MATH_SPEC),
        "unit_converter": (unit_converter, UNIT_CONVERTER_SPEC),
        "get_current_time": (time_tool, CURRENT_TIME_SPEC),
    }
    for name in active:
        registry.register(_builtin(name, *main_tools[name]))
    alias_listed = allow_calculator_alias and "calculate_math" in active
    registry.register(
        _builtin("calculator", calculate_math, CALCULATOR_ALIAS_SPEC),
        visibility="listed" if alias_listed else "inactive",
    )
    if allow_calculator_alias and not alias_listed:
        registry.set_visibility("calculator", "hidden")
    registry.register(
        _builtin("python_math", calculate_math, PYTHON_MATH_SPEC), visibility="hidden"
    )
    for name, (fn, spec) in main_tools.items():
        if name not in active:
            registry.register(_builtin(name, fn, spec), visibility="inactive")
    return registry


__all__ = [
    "CALCULATE_MATH_SPEC",
    "CALCULATOR_ALIAS_SPEC",
    "CURRENT_TIME_SPEC",
    "DEFAULT_ACTIVE_TOOLS",
    "FIXED_TIMES",
    "MATH_TOOL_NAMES",
    "PYTHON_MATH_SPEC",
    "UNIT_CONVERTER_SPEC",
    "UNIT_FACTORS",
    "builtin_registry",
    "calculate_math",
    "convert_units",
    "current_time",
    "unit_converter",
]
