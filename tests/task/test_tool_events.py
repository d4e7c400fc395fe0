"""Tool events are typed, frozen records that still read like the dicts they used to be,
and become plain dicts where they leave agentrl (JSON, the Rust reward)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from agentrl.observability.rollout_dump import tool_calls
from agentrl.rewards import score_batch
from agentrl.rewards.functions import episode_record
from agentrl.tools import ToolEvent, builtin_registry
from agentrl.trajectory import Trajectory, event_dicts

CALL = {"name": "calculate_math", "arguments": {"expression": "2+3"}, "canonical": True}
AS_DICT = {
    "ok": True,
    "name": "calculate_math",
    "args": {"expression": "2+3"},
    "result": {"value": 5.0, "result": "5"},
    "canonical": True,
}


def _trajectory(events: list) -> Trajectory:
    return Trajectory(
        prompt="",
        messages=[{"role": "user", "content": "What is 2+3?"}],
        tools=None,
        gt=["5"],
        completion=f"<tool_call>{json.dumps(CALL)}</tool_call>\n<answer>5</answer>",
        context="",
        prompt_ids=[1],
        tool_events=events,
        tool_turns=[0] * len(events),
        tool_seconds=[0.0] * len(events),
    )


def test_an_executed_call_is_a_typed_event_that_reads_like_the_old_dict() -> None:
    event = builtin_registry().execute(CALL)
    assert isinstance(event, ToolEvent)
    assert (event.ok, event.name, event.args, event.canonical) == (
        True,
        "calculate_math",
        {"expression": "2+3"},
        True,
    )
    assert event.result == {"value": 5.0, "result": "5"} and event.error is None
    # Code written for dict events keeps working.
    assert event["ok"] and event.get("name") == "calculate_math" and event.get("x", 7) == 7
    assert "result" in event and "x" not in event
    assert list(event) == ["ok", "name", "args", "result", "canonical"]
    assert event == AS_DICT and dict(event) == AS_DICT == event.to_dict()
    with pytest.raises(KeyError):
        event["x"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.ok = False  # type: ignore[misc]


def test_a_failed_call_carries_its_error_text() -> None:
    event = builtin_registry().execute({"name": "nope", "arguments": {}}, {"calculate_math"})
    assert not event.ok and event.error == "tool not allowed: nope"
    assert event.result == {"error": "tool not allowed: nope"}


def test_events_leave_as_plain_dicts_and_score_like_dicts() -> None:
    event = builtin_registry().execute(CALL)
    plain = event_dicts([event, AS_DICT])
    assert all(type(e) is dict for e in plain) and plain[1] is AS_DICT
    assert json.loads(json.dumps(plain)) == [AS_DICT, AS_DICT]
    typed, by_hand = _trajectory([event]), _trajectory([dict(AS_DICT)])
    scores = score_batch([episode_record(typed), episode_record(by_hand)])
    assert scores.rewards[0] == scores.rewards[1]
    assert scores.details["tool_success_calls"].tolist() == [1.0, 1.0]
    assert typed.tool_events == [event]  # the trajectory keeps its typed events


def test_dicts_of_a_hand_built_trajectory_read_as_events() -> None:
    failed = {"ok": False, "name": "search", "args": {"q": "x"}, "result": {"error": "down"}}
    assert ToolEvent.of(failed) == ToolEvent(False, "search", {"q": "x"}, {"error": "down"})
    calls = tool_calls(_trajectory([dict(AS_DICT), failed]))
    assert [c["name"] for c in calls] == ["calculate_math", "search"]
    assert calls[0]["result"] == AS_DICT["result"] and calls[1]["error"] == "down"
