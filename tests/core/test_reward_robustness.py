"""Inputs of any size or shape score in linear time without crashing, with the reference values."""

from __future__ import annotations

import json
import math
import time

import pytest
from agentrl.rewards import score_batch

NAN, INF = float("nan"), float("inf")
# Generous: the point is "seconds, not minutes", on a shared CI machine.
TIME_LIMIT_S = 30.0


def _one(record: dict, **config: object) -> dict[str, float]:
    return score_batch([record], config or None).to_records()[0]


def _timed(records: list[dict]) -> tuple[list[dict[str, float]], float]:
    start = time.perf_counter()
    rows = score_batch(records, threads=1).to_records()
    return rows, time.perf_counter() - start


def test_ten_megabyte_completion() -> None:
    completion = "abc " * 2_500_000 + "<answer>42</answer>"
    rows, elapsed = _timed([{"task": "hi", "gt": ["42"], "completion": completion}])
    row = rows[0]
    assert elapsed < TIME_LIMIT_S
    assert row["answer_len"] == 2 and row["exact_match"] == 1
    assert row["rep_penalty"] == 0.8  # one trigram repeated millions of times
    # -0.1 + 9 + 9 + tags 0.9 + 0.8 + 0.1 + 0.1 - repetition 0.8, clipped to 12
    assert row["raw_reward"] == pytest.approx(19.0, abs=1e-9)
    assert row["reward"] == 12.0


@pytest.mark.parametrize(
    "unit",
    [
        "<tool_call>{",  # openers that never close
        "<answer>1,234</answer",  # half-closed tags and numbers everywhere
        "<|im_start|>user <think>",  # chat markers without newlines or ends
        '<tool_call>{"name":"calculate_math","arguments":{"expression":"1+',
        "(((((1+" * 3,
        "1" * 50 + ",",
    ],
)
def test_ten_megabyte_adversarial_completions_scan_linearly(unit: str) -> None:
    completion = unit * (10_000_000 // len(unit))
    rows, elapsed = _timed([{"task": "1+1", "gt": ["2"], "completion": completion}])
    assert elapsed < TIME_LIMIT_S, unit
    assert math.isfinite(rows[0]["reward"])


def test_many_executed_calls_in_one_completion() -> None:
    call = '<tool_call>{"name":"calculate_math","arguments":{"expression":"2*3"}}</tool_call>'
    completion = call * 20_000 + "<answer>6</answer>"
    rows, elapsed = _timed([{"task": "2*3", "gt": ["6"], "completion": completion}])
    row = rows[0]
    assert elapsed < TIME_LIMIT_S
    assert row["tool_calls"] == 20_000 and row["tool_success_calls"] == 20_000
    assert row["repeat_tool_penalty"] == 0.8
    assert row["tool_over_calls"] == 19_999


def _nested(depth: int, leaf: object) -> object:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def test_deeply_nested_tool_events() -> None:
    def event() -> dict:
        return {
            "ok": True,
            "name": "calculate_math",
            "args": {"expression": "3+4", "x": _nested(900, "7")},
            "result": {"value": _nested(900, "7")},
            "canonical": True,
        }

    row = _one(
        {
            "messages": [{"role": "user", "content": "3+4=?"}],
            "gt": ["7"],
            "completion": "<answer>7</answer>",
            "tool_events": [event(), event()],
        }
    )
    assert row["repeat_tool_penalty"] == 0.2  # equal arguments, however deep
    assert row["final_refs_tool"] == 1  # the "7" at the bottom of the result
    # The result's value is a list, so the call's number comes from its expression.
    assert row["tool_value_order_cov"] == 1


def test_nesting_beyond_the_json_limit_is_a_clear_error() -> None:
    event = {"ok": True, "name": "x", "args": {"a": _nested(5000, 1)}}
    with pytest.raises(ValueError, match=r"record 0.*nested deeper"):
        score_batch([{"completion": "", "tool_events": [event]}])


def test_nan_and_infinity_in_tool_results() -> None:
    row = _one(
        {
            "messages": [{"role": "user", "content": "Compute 2*3"}],
            "gt": ["6"],
            "completion": "<answer>6</answer>",
            "tool_events": [
                {
                    "ok": True,
                    "name": "calculate_math",
                    "args": {"expression": "2*3"},
                    "result": {"value": NAN, "result": "nan"},
                    "canonical": True,
                },
                {
                    "ok": True,
                    "name": "calculate_math",
                    "args": {"expression": "1e308*10"},
                    "result": {"value": INF, "result": "inf"},
                    "canonical": True,
                },
            ],
        }
    )
    # NaN is not a plain number, so the first call's value comes from "2*3"; the second
    # evaluates to inf, which is close to nothing.
    assert row["tool_value_order_cov"] == 1 and row["tool_value_exact"] == 0
    assert row["tool_over_calls"] == 1 and row["final_refs_tool"] == 0
    # 17.9 + tools (0.6+0.6+0.6+0.2+2.4+0.8+0.7+0.7+0.25-0.25) + tags 1.7 + 0.2
    assert row["raw_reward"] == pytest.approx(26.4, abs=1e-9)


def test_non_finite_tool_result_from_the_standalone_path() -> None:
    call = '<tool_call>{"name":"calculate_math","arguments":{"expression":"1e308*10"}}</tool_call>'
    row = _one({"task": "1e308*10", "gt": [], "completion": call})
    # inf cannot be formatted, so the environment reports the call as failed.
    assert row["tool_failed_calls"] == 1 and math.isfinite(row["reward"])


@pytest.mark.parametrize(
    ("gt", "answer", "matched", "exact"),
    [
        ([42, 3.5], "42, 3.5", 2, 1),  # numbers read as their str(): numeric ground truth
        ([None], "None", 1, 1),  # str(None) == "None", matched as text
        ([True, 1e20], "true 1e+20", 2, 1),  # "True" and "1e+20" are text, not plain numbers
        ([["a", 1]], "['a', 1]", 1, 1),  # a list prints as its repr
        ([["a", 1]], "a 1", 0, 0),
        (7, "7", 1, 1),  # a scalar ground truth is a one-item list
    ],
)
def test_ground_truth_items_that_are_not_strings(
    gt: object, answer: str, matched: int, exact: int
) -> None:
    row = _one({"task": "hi", "gt": gt, "completion": f"<answer>{answer}</answer>"})
    assert row["matched_count"] == matched
    assert row["exact_match"] == exact


def test_empty_strings_everywhere() -> None:
    row = _one({"messages": [], "gt": [""], "completion": "", "tool_events": []})
    # Only the tag-balance bonus and the missing-answer-length penalty apply.
    assert row["reward"] == pytest.approx(-0.3, abs=1e-12)
    assert row["answer_len"] == 0 and row["answer_tag_nonempty"] == 0
    assert row["unordered_answer_cov"] == 0  # "" never matches, but still counts in the total
    bare = _one({"completion": ""})
    assert bare["reward"] == pytest.approx(-0.3, abs=1e-12)


def test_json_round_trip_of_odd_values_keeps_scores() -> None:
    record = {
        "task": "2+2",
        "gt": ["4"],
        "completion": "<answer>4</answer>",
        "tool_events": [
            {"ok": 1, "name": 5, "args": "not a dict", "result": [1, {"x": None}], "canonical": 0},
            "not an event",
        ],
    }
    direct = _one(record)
    via_json = _one(json.loads(json.dumps(record)))
    assert direct == via_json
    assert direct["tool_calls"] == 2 and direct["tool_success_calls"] == 1
