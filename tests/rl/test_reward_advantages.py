"""Rewards normalised within groups, by hand: the ``grpo`` advantage of the training step
(``compute_advantages``) over rewards that weighted reward functions (``combine``) gave."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from agentrl.rewards.functions import combine
from agentrl.rl.advantages import (
    GROUP_STD_EPSILON,
    AdvantageConfig,
    compute_advantages,
    group_advantages,
)

GRPO = AdvantageConfig(advantage_mode="grpo", adv_clip=0.0)


def grpo(rewards, group_ids) -> torch.Tensor:
    values = torch.as_tensor(rewards, dtype=torch.float64)
    advantages, _ = compute_advantages(values, torch.as_tensor(group_ids), GRPO)
    return advantages


def test_two_groups_by_size() -> None:
    # Group 0: mean 2, std 1; group 1: mean 2, std 0.
    result = grpo([1.0, 3.0, 2.0, 2.0], [0, 0, 1, 1])
    expected = [-1 / (1 + GROUP_STD_EPSILON), 1 / (1 + GROUP_STD_EPSILON), 0.0, 0.0]
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-6)


def test_interleaved_groups() -> None:
    # Group 0 = rows [0, 2], group 1 = row [1].
    result = grpo([0.0, 3.0, 4.0], [0, 1, 0])
    np.testing.assert_allclose(result.numpy(), [-2 / (2 + 1e-4), 0.0, 2 / (2 + 1e-4)], rtol=1e-6)


def test_matches_a_per_group_loop() -> None:
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=64)
    ids = np.unique(rng.integers(0, 9, size=64), return_inverse=True)[1]
    result = grpo(rewards, ids).numpy()
    for gid in np.unique(ids):
        idx = np.flatnonzero(ids == gid)
        group = rewards[idx]
        want = (group - group.mean()) / (group.std() + GROUP_STD_EPSILON)
        np.testing.assert_allclose(result[idx], want, rtol=1e-5, atol=1e-6)


def test_floor_and_epsilon_forms_of_the_group_advantage() -> None:
    rewards, ids = torch.tensor([0.0, 0.2, 5.0, 5.0]), torch.tensor([0, 0, 1, 1])
    # group 0: mean 0.1, std 0.1 ; group 1: flat
    floored = group_advantages(rewards, ids, min_std=0.5)  # 0.1 / max(0.1, 0.5) = 0.2
    assert floored.tolist() == pytest.approx([-0.2, 0.2, 0.0, 0.0])
    additive = group_advantages(rewards, ids, epsilon=0.1)  # 0.1 / (0.1 + 0.1) = 0.5
    assert additive.tolist() == pytest.approx([-0.5, 0.5, 0.0, 0.0])


def test_group_ids_with_a_gap_are_refused() -> None:
    with pytest.raises(ValueError, match="without gaps"):
        grpo([1.0, 2.0], [0, 2])


def test_rewards_and_advantages_together() -> None:
    def right(prompts, completions, answers, **extra):
        return [1.0 if c == a else 0.0 for c, a in zip(completions, answers, strict=True)]

    def short(prompts, completions, answers, **extra):
        return [None if len(c) > 1 else 0.5 for c in completions]

    combined = combine([right, short], [1.0, 2.0])(
        ["p", "p", "q", "q"], ["1", "22", "3", "4"], ["1", "2", "3", "3"]
    )
    # Totals: [1 + 1, 0, 1 + 1, 0 + 1] -> groups [2, 0] and [2, 1].
    np.testing.assert_allclose(
        grpo(combined.totals, [0, 0, 1, 1]).numpy(),
        [1 / (1 + 1e-4), -1 / (1 + 1e-4), 0.5 / 0.5001, -0.5 / 0.5001],
        rtol=1e-6,
    )
    assert combined.metrics["right_mean"] == 0.5
    assert combined.metrics["short_coverage"] == 0.75
