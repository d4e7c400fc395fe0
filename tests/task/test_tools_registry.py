"""ToolRegistry, the @tool decorator's JSON schema, and execution that never raises."""

from __future__ import annotations

import asyncio
import enum
import time
from typing import Annotated, Literal

import pytest
from agentrl.tools import (
    Tool,
    ToolRegistry,
    call_arguments,
    execute_tool_call,
    function_schema,
    tool,
    tool_message,
)
from agentrl.tools.signature import parse_docstring


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def test_schema_from_signature_hints_and_google_docstring() -> None:
    def lookup(
        city: str,
        days: int = 3,
        scale: float | None = None,
        metric: bool = True,
        tags: list[str] | None = None,
        unit: Literal["c", "f"] = "c",
        color: Color = Color.RED,
        extra: dict[str, int] | None = None,
    ) -> dict:
        """Weather forecast for a city.

        Uses the offline table.

        Args:
            city: Name of the city,
                in English.
            days (int): How many days.
            scale: Optional scale factor.
        """
        return {}

    spec = function_schema(lookup)
    fn = spec["function"]
    assert spec["type"] == "function"
    assert fn["name"] == "lookup"
    assert fn["description"] == "Weather forecast for a city.\n\nUses the offline table."
    props = fn["parameters"]["properties"]
    assert fn["parameters"]["required"] == ["city"]
    assert props["city"] == {"type": "string", "description": "Name of the city, in English."}
    assert props["days"] == {"type": "integer", "description": "How many days.", "default": 3}
    assert props["scale"]["type"] == "number"
    assert props["metric"] == {"type": "boolean", "default": True}
    assert props["tags"]["type"] == "array" and props["tags"]["items"] == {"type": "string"}
    assert props["unit"] == {"type": "string", "enum": ["c", "f"], "default": "c"}
    assert props["color"]["enum"] == ["red", "blue"] and "default" not in props["color"]
    assert props["extra"] == {"type": "object", "additionalProperties": {"type": "integer"}}


def test_schema_reads_rest_and_numpy_docstrings_and_annotated() -> None:
    def rest(a: int, b: Annotated[str, "the label"]) -> None:
        """Sum things.

        :param a: first value
        :param int b: ignored because Annotated wins
        """

    def numpy_style(x: float) -> None:
        """Scale.

        Parameters
        ----------
        x : float
            The factor.
        """

    props = function_schema(rest)["function"]["parameters"]["properties"]
    assert props["a"]["description"] == "first value"
    assert props["b"] == {"type": "string", "description": "the label"}
    numpy_props = function_schema(numpy_style)["function"]["parameters"]["properties"]
    assert numpy_props["x"] == {"type": "number", "description": "The factor."}
    assert parse_docstring(None) == ("", {})


def test_schema_refuses_star_args_and_positional_only() -> None:
    def star(*values: int) -> int:
        return 0

    def kw(**options: int) -> int:
        return 0

    def positional(a: int, /) -> int:
        return a

    for fn in (star, kw, positional):
        with pytest.raises(TypeError, match="ordinary named parameter"):
            function_schema(fn)


def test_tool_decorator_bare_and_with_options_keeps_function_callable() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @tool(name="mul", description="Multiply.", timeout=1.5, max_result_chars=10)
    def multiply(a: int, b: int) -> int:
        return a * b

    assert isinstance(add, Tool) and add(2, 3) == 5
    assert add.spec["function"]["description"] == "Add two integers."
    assert multiply.name == "mul" and multiply.spec["function"]["name"] == "mul"
    assert multiply.spec["function"]["description"] == "Multiply."
    assert (multiply.timeout, multiply.max_result_chars) == (1.5, 10)


def test_registry_register_lists_specs_and_refuses_duplicates() -> None:
    registry = ToolRegistry()

    @registry.tool
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    registry.register(lambda x: x, name="hidden_one", visibility="hidden")
    registry.register(lambda x: x, name="off", visibility="inactive")
    assert [s["function"]["name"] for s in registry.specs()] == ["echo"]
    assert registry.supported_names() == {"echo", "hidden_one"}
    assert "off" in registry and len(registry) == 3
    with pytest.raises(ValueError, match="already registered"):
        registry.register(echo)
    registry.register(echo, replace=True)
    specs = registry.specs()
    specs[0]["function"]["name"] = "mutated"
    assert registry.specs()[0]["function"]["name"] == "echo"  # copies, not the originals
    registry.unregister("off")
    assert "off" not in registry


def _registry_with_user_tools() -> ToolRegistry:
    registry = ToolRegistry(timeout=0.3, max_result_chars=50)

    @registry.tool
    def add(a: int, b: int = 1) -> int:
        return a + b

    @registry.tool
    def boom(reason: str) -> None:
        raise RuntimeError("kaput: " + reason * 100)

    @registry.tool
    def sleepy(seconds: float) -> str:
        time.sleep(seconds)
        return "awake"

    @registry.tool
    async def async_sleepy(seconds: float) -> dict:
        await asyncio.sleep(seconds)
        return {"slept": seconds}

    @registry.tool
    async def async_raises_timeout() -> None:
        raise TimeoutError("upstream service timed out")

    @registry.tool
    def big(n: int) -> str:
        return "x" * n

    @registry.tool
    def odd_result() -> object:
        return {"when": time.struct_time((2025, 1, 2, 3, 4, 5, 0, 1, 0)), "set": {1}}

    return registry


def test_user_tool_success_event_has_the_golden_event_shape() -> None:
    registry = _registry_with_user_tools()
    event = registry.execute({"name": "add", "arguments": {"a": 2, "b": 5}, "canonical": True})
    assert event == {
        "ok": True,
        "name": "add",
        "args": {"a": 2, "b": 5},
        "result": 7,
        "canonical": True,
    }
    assert list(event) == ["ok", "name", "args", "result", "canonical"]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        ({"name": "", "arguments": {}}, "bad tool call"),
        ({"arguments": {"a": 1}}, "bad tool call"),
        ({"name": "nope", "arguments": {}}, "unknown tool: nope"),
        ({"name": "add", "arguments": {}}, "missing required argument 'a'"),
        ({"name": "add", "arguments": {"a": 1, "zzz": 2}}, "unexpected argument 'zzz'"),
        ({"name": "add", "arguments": {"a": "seven"}}, "argument 'a' must be integer, got str"),
        ({"name": "add", "arguments": {"a": True}}, "argument 'a' must be integer, got bool"),
    ],
)
def test_bad_calls_give_failed_events(call: dict, error: str) -> None:
    event = _registry_with_user_tools().execute(call)
    assert event["ok"] is False
    assert event["result"] == {"error": error}
    assert event["canonical"] is False


def test_arguments_are_decoded_leniently_and_coerced() -> None:
    registry = _registry_with_user_tools()
    event = registry.execute({"name": "add", "arguments": '{"a": "4", "b": 2.0}'})
    assert event["ok"] and event["result"] == 6
    assert event["args"] == {"a": "4", "b": 2.0}  # the event keeps the raw arguments
    assert call_arguments({"arguments": "not json"}) == {"expression": "not json"}
    assert call_arguments({"args": {"x": 1}}) == {"x": 1}
    assert call_arguments({"arguments": "[1, 2]"}) == {}
    assert call_arguments({"arguments": 5}) == {}


def test_tool_not_in_valid_names_is_refused_without_running() -> None:
    ran = []
    registry = ToolRegistry()
    registry.register(lambda: ran.append(1), name="side_effect")
    event = execute_tool_call(registry, {"other"}, {"name": "side_effect", "arguments": {}})
    assert event["result"] == {"error": "tool not allowed: side_effect"}
    assert ran == []
    # An empty allow-list allows everything.
    assert execute_tool_call(registry, set(), {"name": "side_effect", "arguments": {}})["ok"]


def test_exception_message_is_kept_and_cut_to_200_characters() -> None:
    event = _registry_with_user_tools().execute({"name": "boom", "arguments": {"reason": "ab"}})
    assert event["ok"] is False
    message = event["result"]["error"]
    assert message.startswith("kaput: abab") and len(message) == 200


def test_sync_tool_past_its_timeout_fails_without_stalling() -> None:
    registry = _registry_with_user_tools()
    began = time.perf_counter()
    event = registry.execute({"name": "sleepy", "arguments": {"seconds": 5}})
    assert time.perf_counter() - began < 2.0
    assert event == {
        "ok": False,
        "name": "sleepy",
        "args": {"seconds": 5},
        "result": {"error": "timed out after 0.3s"},
        "canonical": False,
    }
    assert registry.stats["timeouts"] == 1


def test_async_tools_run_and_time_out() -> None:
    registry = _registry_with_user_tools()
    ok = registry.execute({"name": "async_sleepy", "arguments": {"seconds": 0.01}})
    assert ok["ok"] and ok["result"] == {"slept": 0.01}
    late = registry.execute({"name": "async_sleepy", "arguments": {"seconds": 5}})
    assert late["result"] == {"error": "timed out after 0.3s"}
    # A TimeoutError raised by the tool itself is its own failure, not our time limit.
    own = registry.execute({"name": "async_raises_timeout", "arguments": {}})
    assert own["result"] == {"error": "upstream service timed out"}


def test_per_tool_timeout_overrides_the_registry_default() -> None:
    registry = ToolRegistry(timeout=0.05)
    registry.register(lambda: time.sleep(0.2) or "done", name="patient", timeout=2.0)
    assert registry.execute({"name": "patient", "arguments": {}})["result"] == "done"


def test_result_over_the_size_cap_is_refused() -> None:
    registry = _registry_with_user_tools()
    assert registry.execute({"name": "big", "arguments": {"n": 10}})["result"] == "x" * 10
    event = registry.execute({"name": "big", "arguments": {"n": 1000}})
    assert event["ok"] is False
    assert event["result"] == {"error": "result too large: more than 50 characters"}
    assert registry.stats["oversize"] == 1


def test_non_json_results_are_made_plain_json() -> None:
    registry = _registry_with_user_tools()
    registry.max_result_chars = 10_000
    event = registry.execute({"name": "odd_result", "arguments": {}})
    assert event["ok"]
    assert isinstance(event["result"]["when"], list) and event["result"]["set"] == [1]


def test_execute_many_runs_slow_tools_concurrently_and_keeps_order() -> None:
    registry = _registry_with_user_tools()
    calls = [
        {"name": "sleepy", "arguments": {"seconds": 0.2}},
        {"name": "async_sleepy", "arguments": {"seconds": 0.2}},
        {"name": "add", "arguments": {"a": 1}},
        {"name": "", "arguments": {}},
        {"name": "sleepy", "arguments": {"seconds": 0.2}},
    ]
    began = time.perf_counter()
    events = registry.execute_many(calls)
    assert time.perf_counter() - began < 0.5  # three 0.2 s tools overlap
    assert [e["ok"] for e in events] == [True, True, True, False, True]
    assert events[2]["result"] == 2
    assert registry.stats["calls"] == 5 and registry.stats["failed"] == 1


def test_async_entry_point() -> None:
    registry = _registry_with_user_tools()
    events = asyncio.run(registry.aexecute_many([{"name": "add", "arguments": {"a": 3}}]))
    assert events[0]["result"] == 4


def test_run_raises_for_direct_use() -> None:
    registry = _registry_with_user_tools()
    assert registry.run("add", {"a": 1, "b": 2}) == 3
    with pytest.raises(RuntimeError, match="kaput"):
        registry.run("boom", {"reason": "x"})


def test_tool_message_is_compact_json_cut_to_limit() -> None:
    assert tool_message({"value": 7.0, "result": "7"}) == '{"value":7.0,"result":"7"}'
    assert tool_message({"text": "中文"}) == '{"text":"中文"}'
    assert len(tool_message({"t": "y" * 5000})) == 1024
    assert len(tool_message({"t": "y" * 5000}, max_chars=0)) > 5000
