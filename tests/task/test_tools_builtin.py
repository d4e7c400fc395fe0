"""Built-in tools: behaviour, event shapes and tool lists, checked against the golden
events (tests/data/tool_events_golden.jsonl, a deduplicated sample of the tool events in
shared/golden/reward_parity.jsonl)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from agentrl.parsing import format_number, safe_eval
from agentrl.tools import builtin_registry

GOLDEN = Path(__file__).parents[1] / "data" / "tool_events_golden.jsonl"


def _names(specs: list[dict]) -> list[str]:
    return [s["function"]["name"] for s in specs]


def test_default_tool_list_and_supported_names() -> None:
    registry = builtin_registry()
    assert _names(registry.specs()) == ["calculate_math", "unit_converter", "get_current_time"]
    assert registry.supported_names() == {
        "calculate_math",
        "unit_converter",
        "get_current_time",
        "python_math",
    }


def test_calculator_alias_is_listed_only_when_allowed() -> None:
    with_alias = builtin_registry(allow_calculator_alias=True)
    assert _names(with_alias.specs())[-1] == "calculator"
    assert "calculator" in with_alias.supported_names()
    # Allowed but calculate_math inactive: accepted, not advertised.
    no_math = builtin_registry(active_tools=["unit_converter"], allow_calculator_alias=True)
    assert _names(no_math.specs()) == ["unit_converter"]
    assert no_math.supported_names() == {"unit_converter", "calculator", "python_math"}


def test_active_tools_subset_keeps_order_and_ignores_unknown_names() -> None:
    registry = builtin_registry(active_tools=["get_current_time", "bogus", "calculate_math"])
    assert _names(registry.specs()) == ["get_current_time", "calculate_math"]
    # Inactive built-ins still run when a prompt's own tools name them.
    event = registry.execute(
        {"name": "unit_converter", "arguments": {"value": 1, "from_unit": "km", "to_unit": "miles"}}
    )
    assert event["ok"]
    with pytest.raises(ValueError, match="time_mode"):
        builtin_registry(time_mode="sometimes")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["calculate_math", "calculator", "python_math"])
def test_math_tools_evaluate_with_the_rust_core(name: str) -> None:
    event = builtin_registry().execute({"name": name, "arguments": {"expression": "（1+2）×3^2"}})
    assert event["ok"]
    assert event["result"] == {"value": 27.0, "result": "27"}


def test_math_tool_reads_query_and_rejects_missing_or_bad_expressions() -> None:
    registry = builtin_registry()
    assert registry.execute({"name": "calculate_math", "arguments": {"query": "7//2"}})[
        "result"
    ] == {
        "value": 3.0,
        "result": "3",
    }
    missing = registry.execute({"name": "calculate_math", "arguments": {"expression": "  "}})
    assert missing["result"] == {"error": "missing expression"}
    for expr in ("1/0", "2**1024", "import os", "1e308*10", "sqrt(-1)"):
        event = registry.execute({"name": "calculate_math", "arguments": {"expression": expr}})
        assert event["ok"] is False and event["result"]["error"], expr
    # A plain-string argument becomes the expression.
    assert (
        registry.execute({"name": "calculate_math", "arguments": "2+2"})["result"]["result"] == "4"
    )


@pytest.mark.parametrize(
    ("value", "src", "dst", "expected"),
    [
        (3, "km", "miles", "1.864113"),
        (10, "Miles", " KM ", "16.0934"),
        (2.5, "kg", "pounds", "5.51155"),
        (1, "pounds", "kg", "0.453592"),
        (100, "meters", "feet", "328.084"),
        (7, "feet", "meters", "2.1336"),
        (100, "celsius", "fahrenheit", "212"),
        (98.6, "fahrenheit", "celsius", "37"),
        ("12", "km", "miles", "7.456452"),
    ],
)
def test_unit_converter_table_and_temperature_rules(value, src, dst, expected) -> None:
    event = builtin_registry().execute(
        {"name": "unit_converter", "arguments": {"value": value, "from_unit": src, "to_unit": dst}}
    )
    assert event["ok"], event
    assert event["result"] == {
        "value": float(value),
        "from_unit": src.lower().strip(),
        "to_unit": dst.lower().strip(),
        "result": expected,
    }


def test_unit_converter_error_messages() -> None:
    registry = builtin_registry()

    def error(args: dict) -> str:
        event = registry.execute({"name": "unit_converter", "arguments": args})
        assert event["ok"] is False
        return event["result"]["error"]

    assert error({"value": 1, "from_unit": "km", "to_unit": "parsecs"}) == (
        "unsupported conversion: km_parsecs"
    )
    assert error({"from_unit": "km", "to_unit": "miles"}) == "'value'"
    assert error({"value": "abc", "from_unit": "km", "to_unit": "miles"}).startswith(
        "could not convert string to float"
    )
    assert error({"value": 1.7e308, "from_unit": "miles", "to_unit": "km"})  # inf: no format


def test_current_time_fixed_table_default_and_live_clock() -> None:
    fixed = builtin_registry()
    event = fixed.execute({"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}})
    assert event["result"] == {
        "timezone": "Asia/Tokyo",
        "datetime": "2025-03-07 15:30:00",
        "mode": "fixed",
    }
    unknown = fixed.execute({"name": "get_current_time", "arguments": {"timezone": "Mars/Base"}})
    assert unknown["result"]["datetime"] == "2025-03-07 14:30:00"
    default = fixed.execute({"name": "get_current_time", "arguments": {"timezone": ""}})
    assert default["result"]["timezone"] == "Asia/Shanghai"
    live = builtin_registry(time_mode="live").execute({"name": "get_current_time", "arguments": {}})
    assert live["result"]["mode"] == "live_utc"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", live["result"]["datetime"])


def test_events_match_the_golden_events() -> None:
    registry = builtin_registry()
    valid = registry.supported_names()
    lines = GOLDEN.read_text(encoding="utf-8").splitlines()
    assert len(lines) > 200
    for line in lines:
        golden = json.loads(line)
        call = {
            "name": golden["name"],
            "arguments": golden["args"],
            "canonical": golden["canonical"],
        }
        event = registry.execute(call, valid)
        assert list(event) == ["ok", "name", "args", "result", "canonical"]
        assert (event["ok"], event["name"], event["args"], event["canonical"]) == (
            golden["ok"],
            golden["name"],
            golden["args"],
            golden["canonical"],
        ), line
        if golden["ok"] or golden["result"]["error"] in (
            "bad tool call",
            f"tool not allowed: {golden['name']}",
        ):
            assert event["result"] == golden["result"], line
        else:
            assert set(event["result"]) == {"error"} and event["result"]["error"], line


def test_math_result_is_format_number_of_safe_eval() -> None:
    registry = builtin_registry()
    for expr in ("1/3", "2**0.5", "10**15+0.5", "-7%3", "round(2.5)", "log(8,2)"):
        result = registry.run("calculate_math", {"expression": expr})
        assert result == {"value": safe_eval(expr), "result": format_number(safe_eval(expr))}
