"""What a tool returns reaches the model as valid JSON or as an error observation: the
documented conversions (datetime -> ISO text, set -> list, bytes -> text, numpy -> numbers),
and NaN, infinities or objects JSON cannot carry fail the call with the reason."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math

import numpy as np
import pytest
from agentrl.tools import ToolRegistry, tool_message


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Opaque:
    def __str__(self) -> str:
        return "looks fine"


RESULTS = {
    "when": datetime.datetime(2026, 1, 2, 3, 4, 5),
    "tags": {"b", "a"},
    "raw": b"caf\xc3\xa9",
    "array": np.arange(3),
    "scalar": np.float32(0.5),
    "point": Point(1, 2),
}


def convertible() -> dict:
    """Values JSON has no type for, each with a documented conversion."""
    return RESULTS


def not_a_number() -> dict:
    """A NaN."""
    return {"value": math.nan}


def infinite() -> list:
    """An infinity."""
    return [1.0, -math.inf]


def opaque() -> object:
    """An object JSON cannot carry."""
    return Opaque()


def not_text() -> bytes:
    """Bytes that are not UTF-8."""
    return b"\xff\xfe"


EXPECTED = {
    "when": "2026-01-02T03:04:05",
    "tags": ["a", "b"],
    "raw": "café",
    "array": [0, 1, 2],
    "scalar": 0.5,
    "point": {"x": 1, "y": 2},
}


def _registry(isolate: bool) -> ToolRegistry:
    registry = ToolRegistry(timeout=120, isolate=isolate)  # a worker may start slowly
    for fn in (convertible, not_a_number, infinite, opaque, not_text):
        registry.register(fn)
    return registry


@pytest.mark.parametrize("isolate", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_results_reach_the_model_as_json_or_as_an_error(isolate):
    registry = _registry(isolate)
    calls = [
        {"name": n, "arguments": {}}
        for n in ("convertible", "not_a_number", "infinite", "opaque", "not_text")
    ]
    events = registry.execute_many(calls)
    assert events[0]["ok"] and events[0]["result"] == EXPECTED
    assert json.loads(tool_message(events[0]["result"], 0)) == EXPECTED
    for event, why in zip(
        events[1:],
        ["NaN or an infinity", "NaN or an infinity", "type Opaque", "not UTF-8"],
        strict=True,
    ):
        assert not event["ok"], event
        assert "result is not JSON" in event["result"]["error"] and why in event["result"]["error"]
    for event in events:  # what the model is shown is strict JSON
        json.loads(tool_message(event["result"], 0), parse_constant=pytest.fail)
    assert registry.stats["failed"] == 4
