"""Dynamic sampling: which groups count as informative, and how a step's batch is filled."""

from __future__ import annotations

import pytest
from agentrl.rewards import RewardConfig
from agentrl.training.dynamic_sampling import fill_batch, informative_groups
from agentrl.training.sources import step_prompt_indices
from agentrl.trajectory import RolloutGroup, Trajectory


def _group(name: str, answers: list[str], gt: str = "42") -> RolloutGroup:
    messages = [{"role": "user", "content": "What is 40 + 2?"}]
    fields = {"prompt": name, "messages": messages, "tools": None, "gt": [gt], "context": ""}
    trajectories = [
        Trajectory(**fields, completion=f"<answer>{a}</answer>", prompt_ids=[1]) for a in answers
    ]
    return RolloutGroup(
        prompt=name, data_index=0, policy_version=0, trajectories=trajectories, created_at=0.0
    )


def test_only_groups_whose_rewards_differ_are_informative():
    groups = [
        _group("all right", ["42", "42", "42"]),
        _group("mixed", ["42", "7", "42"]),
        _group("all wrong alike", ["7", "7", "7"]),
    ]
    assert informative_groups(groups, RewardConfig(), step=1, min_std=0.1) == [False, True, False]
    # A threshold above the mixed group's spread (12 vs a few points) makes it flat too.
    assert informative_groups(groups, RewardConfig(), step=1, min_std=100.0) == [False] * 3
    assert informative_groups([], RewardConfig(), step=1, min_std=0.1) == []


def _fake_source(plan: list[list[bool]]):
    """fetch(attempt) returns named groups; is_informative reads the plan."""
    calls: list[int] = []

    def fetch(attempt: int) -> list[str]:
        calls.append(attempt)
        if attempt >= len(plan):
            return []
        return [f"{attempt}:{i}:{'I' if useful else 'F'}" for i, useful in enumerate(plan[attempt])]

    def is_informative(groups) -> list[bool]:
        return [g.endswith("I") for g in groups]

    return fetch, is_informative, calls


def test_fill_puts_informative_groups_first_and_stops_once_full():
    fetch, useful, calls = _fake_source([[False, True, False], [True, True, True]])
    filled = fill_batch(fetch, batch_size=3, max_rounds=5, is_informative=useful)
    assert calls == [0, 1]  # full after the first extra round: no third rollout
    assert filled.groups == ["0:1:I", "1:0:I", "1:1:I"]
    m = filled.metrics
    assert m["dynamic/extra_rounds"] == 1.0 and m["dynamic/groups_rolled"] == 6.0
    assert m["dynamic/informative_rate"] == pytest.approx(4 / 6)
    assert m["dynamic/informative_in_batch"] == 1.0
    assert m["dynamic/dropped_informative"] == 1.0


def test_fill_tops_up_with_flat_groups_when_the_rounds_run_out():
    fetch, useful, calls = _fake_source([[False, False, True], [False, False, False]] * 3)
    filled = fill_batch(fetch, batch_size=3, max_rounds=1, is_informative=useful)
    assert calls == [0, 1]
    assert filled.groups == ["0:2:I", "0:0:F", "0:1:F"]  # never fewer groups than asked
    assert filled.metrics["dynamic/informative_in_batch"] == pytest.approx(1 / 3)


def test_fill_stops_when_the_source_runs_dry():
    fetch, useful, calls = _fake_source([[False, True]])
    filled = fill_batch(fetch, batch_size=2, max_rounds=4, is_informative=useful)
    assert calls == [0, 1]
    assert filled.groups == ["0:1:I", "0:0:F"]


def test_extra_rounds_read_their_own_prompt_streams():
    base = [step_prompt_indices(50, 4, step, seed=3) for step in (1, 2)]
    extra = [step_prompt_indices(50, 4, step, seed=3, stream=1) for step in (1, 2)]
    assert base != extra
    assert extra == [step_prompt_indices(50, 4, step, seed=3, stream=1) for step in (1, 2)]
    assert base == [step_prompt_indices(50, 4, step, seed=3, stream=0) for step in (1, 2)]
