"""score_batch: the standalone path, the result's shape, explanations, threads and fork safety."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest
from agentrl.rewards import (
    DETAIL_KEYS,
    TERM_KEYS,
    parallelism_disabled,
    resolved_threads,
    score_batch,
)

GOLDEN = Path(__file__).parents[1] / "data" / "reward_parity.jsonl"
UNIT_WEIGHTS = {"reward_answer_cov_weight": 1.0, "reward_exact_match_weight": 1.0}


def _call(name: str, args: dict) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def _golden(n: int) -> list[dict]:
    with open(GOLDEN, encoding="utf-8") as handle:
        return [json.loads(line) for _, line in zip(range(n), handle, strict=False)]


def test_standalone_path_runs_the_calls_it_parses() -> None:
    # calculator is an alias the default tools do not offer: the call fails.
    record = {
        "task": "Compute 7*8",
        "gt": ["56"],
        "completion": _call("calculator", {"expression": "7*8"}) + "\n<answer>56</answer>",
    }
    d = score_batch([record], UNIT_WEIGHTS).details
    assert d["tool_calls"][0] == 1 and d["tool_failed_calls"][0] == 1
    assert d["alias_math_tool_calls"][0] == 1 and d["preferred_math_tool_calls"][0] == 0
    assert d["tool_expr_exact"][0] == 1  # failed calls still count for the expression terms
    assert d["tool_value_order_cov"][0] == 0  # ... but not for the values
    assert d["canonical_tool_rate"][0] == 1
    # -0.1 + 1 + 1, + expr order/set/exact 0.6 + 0.2 + 0.2, + count exact 0.3,
    # + canonical 0.25, - fail 0.55, - alias only 0.35, + tags 0.9 + 0.8, + 0.1 + 0.1
    assert d["raw_reward"][0] == pytest.approx(4.45, abs=1e-12)
    assert d["reward"][0] == pytest.approx(4.45, abs=1e-12)


def test_standalone_results_reach_the_value_terms() -> None:
    record = {
        "messages": [{"role": "user", "content": "计算 12*3"}],
        "gt": ["36"],
        "completion": _call("calculate_math", {"expression": "12*3"}) + "<answer>36</answer>",
    }
    d = score_batch([record], UNIT_WEIGHTS).details
    assert d["tool_success_calls"][0] == 1
    assert d["tool_value_exact"][0] == 1 and d["final_refs_tool"][0] == 1
    # -0.1 + 1 + 1 + tool terms 0.6+0.6+0.6+0.2+0.2+2.4+0.8+0.8+0.7+0.7+0.3+0.25
    # + refs 0.45 + tags 0.9 + 0.8 + 0.1 + 0.1, then clipped to 12
    assert d["raw_reward"][0] == pytest.approx(12.4, abs=1e-12)
    assert d["reward"][0] == 12.0 and d["clipped"][0] == 1.0


def test_standalone_unit_conversion_on_a_non_math_task() -> None:
    record = {
        "task": "How far is 10 km in miles?",
        "gt": ["6.21371"],
        "completion": _call("unit_converter", {"value": 10, "from_unit": "km", "to_unit": "miles"})
        + "<answer>6.21371</answer>",
    }
    d = score_batch([record], UNIT_WEIGHTS).details
    assert d["expected_math_calls"][0] == 0  # no arithmetic in the task
    assert d["tool_success_rate"][0] == 1 and d["final_refs_tool"][0] == 1
    assert d["correct_tool_choice"][0] == 1 and d["tool_count_exact"][0] == 1
    assert d["reward"][0] == pytest.approx(-0.1 + 1 + 1 + 0.9 + 0.8 + 0.1 + 0.1, abs=1e-12)


def test_tool_events_given_are_not_re_executed() -> None:
    record = {
        "task": "Compute 7*8",
        "gt": ["56"],
        "completion": _call("calculate_math", {"expression": "7*8"}) + "<answer>56</answer>",
        "tool_events": [],
    }
    d = score_batch([record]).details
    assert d["tool_calls"][0] == 0


def test_result_has_every_detail_as_float64_arrays() -> None:
    result = score_batch(_golden(5))
    assert result.rewards.dtype == np.float64 and result.rewards.shape == (5,)
    assert list(result.details) == list(DETAIL_KEYS)
    assert all(col.shape == (5,) and col.dtype == np.float64 for col in result.details.values())
    np.testing.assert_array_equal(result.rewards, result.details["reward"])
    assert result.contributions is None
    with pytest.raises(ValueError, match="explain"):
        result.explain(0)


def test_contributions_sum_to_the_reward() -> None:
    result = score_batch(_golden(300), explain=True)
    assert result.contributions is not None
    assert list(result.contributions) == list(TERM_KEYS)
    total = np.sum([result.contributions[k] for k in TERM_KEYS], axis=0)
    np.testing.assert_allclose(total, result.rewards, atol=1e-9)
    terms = dict(result.explain(0))
    assert terms["base"] == pytest.approx(-0.1)
    assert all(value != 0 for value in terms.values())


def test_empty_batch() -> None:
    result = score_batch([])
    assert len(result) == 0 and result.to_records() == []


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"gt": []}, "completion.*missing"),
        ({"completion": 3}, "completion.*string"),
        ({"completion": "", "tool_events": {"ok": True}}, "tool_events.*list"),
        ({"completion": "", "messages": "hi"}, "messages.*list"),
        ({"completion": "", "gt": [object()]}, "not JSON serializable"),
    ],
)
def test_malformed_records_name_the_record_and_field(record: dict, message: str) -> None:
    good = {"completion": "<answer>1</answer>", "gt": ["1"]}
    with pytest.raises((ValueError, TypeError), match=f"record 1: .*{message}"):
        score_batch([good, record])


def test_records_that_are_not_mappings_are_rejected() -> None:
    with pytest.raises((TypeError, ValueError)):
        score_batch([["completion", "x"]])  # type: ignore[list-item]


def test_threads_argument_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTRL_NUM_THREADS", raising=False)
    all_cores = resolved_threads()
    assert 1 <= all_cores <= (os.cpu_count() or 1)
    assert resolved_threads(3) == 3
    monkeypatch.setenv("AGENTRL_NUM_THREADS", "5")
    assert resolved_threads() == 5
    assert resolved_threads(2) == 2  # the argument wins
    monkeypatch.setenv("AGENTRL_NUM_THREADS", "zero")
    assert resolved_threads() == all_cores
    for bad in (0, -1, True):
        with pytest.raises(ValueError, match="threads"):
            score_batch([], threads=bad)


def test_the_first_bad_record_in_order_is_the_error_on_any_number_of_threads() -> None:
    # A bad setting (row 5, found when its chunk is scored) before a record that cannot be
    # read (row 200, found when it is converted): every thread count reports row 5.
    good = {"task": "Compute 2*3", "gt": ["6"], "completion": "<answer>6</answer>"}
    records = [dict(good) for _ in range(300)]
    records[5] = {**good, "config": {"reward_base": "high"}}
    records[200] = {"task": "Compute 2*3"}
    for threads in (1, 2, 4):
        with pytest.raises(ValueError, match="row 5: reward setting"):
            score_batch(records, threads=threads)


def _score_in_child(queue: multiprocessing.Queue, records: list[dict]) -> None:
    disabled = parallelism_disabled()
    rewards = score_batch(records, threads=4).rewards.tolist()
    queue.put((disabled, rewards))


def test_forked_child_scores_single_threaded_instead_of_deadlocking() -> None:
    records = _golden(400)
    parent = score_batch(records, threads=4).rewards.tolist()  # the pool is now running
    assert not parallelism_disabled()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_score_in_child, args=(queue, records))
    child.start()
    child.join(timeout=120)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child deadlocked while scoring")
    assert child.exitcode == 0
    disabled, rewards = queue.get(timeout=10)
    assert disabled is True
    assert rewards == parent
