"""Rewards normalised within groups (``calculate_rewards_and_advantages``), by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from agentrl.rl.advantages import GROUP_STD_EPSILON, group_advantages, group_ids_from_labels
from agentrl.training.group_rewards import calculate_rewards_and_advantages


def normalise(rewards, groups):
    """The reward-function API on fixed rewards: one function returning ``rewards``."""

    def fixed(prompts, completions, answers, **extra):
        return list(rewards)

    n = len(rewards)
    return calculate_rewards_and_advantages([fixed], [""] * n, [""] * n, [""] * n, groups)


def test_two_groups_by_size() -> None:
    result = normalise([1.0, 3.0, 2.0, 2.0], 2)
    # Group 0: mean 2, std 1; group 1: mean 2, std 0.
    expected = [-1 / (1 + GROUP_STD_EPSILON), 1 / (1 + GROUP_STD_EPSILON), 0.0, 0.0]
    np.testing.assert_allclose(result.advantages, expected)
    assert result.advantages.dtype == np.float64
    assert {k: result.metrics[k] for k in result.metrics if "rewards" in k} == {
        "total_rewards_mean": 2.0,
        "total_rewards_std": pytest.approx(math.sqrt(0.5)),
        "grouped_rewards_mean": 2.0,
        "grouped_rewards_std": 0.5,
    }


def test_group_ids_in_any_order() -> None:
    # Interleaved groups: "a" = [0, 4], "b" = [3].
    assert group_ids_from_labels(["a", "b", "a"], 3).tolist() == [0, 1, 0]
    result = normalise([0.0, 3.0, 4.0], ["a", "b", "a"])
    np.testing.assert_allclose(result.advantages, [-2 / (2 + 1e-4), 0.0, 2 / (2 + 1e-4)])
    assert result.metrics["grouped_rewards_mean"] == pytest.approx((2.0 + 3.0) / 2)
    assert result.metrics["grouped_rewards_std"] == pytest.approx((2.0 + 0.0) / 2)


def test_matches_a_per_group_loop() -> None:
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=64)
    ids = rng.integers(0, 9, size=64)
    result = normalise(rewards.tolist(), ids)
    for gid in np.unique(ids):
        idx = np.flatnonzero(ids == gid)
        group = rewards[idx]
        want = (group - group.mean()) / (group.std() + GROUP_STD_EPSILON)
        np.testing.assert_allclose(result.advantages[idx], want, atol=1e-12)


def test_floor_and_epsilon_forms_of_the_group_advantage() -> None:
    rewards, ids = torch.tensor([0.0, 0.2, 5.0, 5.0]), torch.tensor([0, 0, 1, 1])
    # group 0: mean 0.1, std 0.1 ; group 1: flat
    floored = group_advantages(rewards, ids, min_std=0.5)  # 0.1 / max(0.1, 0.5) = 0.2
    assert floored.tolist() == pytest.approx([-0.2, 0.2, 0.0, 0.0])
    additive = group_advantages(rewards, ids, epsilon=0.1)  # 0.1 / (0.1 + 0.1) = 0.5
    assert additive.tolist() == pytest.approx([-0.5, 0.5, 0.0, 0.0])


@pytest.mark.parametrize(
    ("rewards", "groups", "message"),
    [
        ([], 1, "at least one completion"),
        ([1.0, math.inf], 2, "finite"),
        ([1.0, 2.0, 3.0], 2, "groups of 2"),
        ([1.0, 2.0], [0], "group ids"),
    ],
)
def test_bad_input_raises(rewards: list[float], groups: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        normalise(rewards, groups)


def test_rewards_too_large_for_float32_statistics() -> None:
    with pytest.raises(ValueError, match="float32"):
        normalise([1e300, -1e300], 2)


def test_rewards_and_advantages_together() -> None:
    def right(prompts, completions, answers, **extra):
        return [1.0 if c == a else 0.0 for c, a in zip(completions, answers, strict=True)]

    def short(prompts, completions, answers, **extra):
        return [None if len(c) > 1 else 0.5 for c in completions]

    result = calculate_rewards_and_advantages(
        [right, short],
        prompts=["p", "p", "q", "q"],
        completions=["1", "22", "3", "4"],
        answers=["1", "2", "3", "3"],
        groups=[0, 0, 1, 1],
        weights=[1.0, 2.0],
    )
    # Totals: [1 + 1, 0, 1 + 1, 0 + 1] -> groups [2, 0] and [2, 1].
    np.testing.assert_allclose(
        result.advantages, [1 / (1 + 1e-4), -1 / (1 + 1e-4), 0.5 / 0.5001, -0.5 / 0.5001]
    )
    assert result.metrics["right_mean"] == 0.5
    assert result.metrics["short_coverage"] == 0.75
    assert result.metrics["total_rewards_mean"] == 1.25
