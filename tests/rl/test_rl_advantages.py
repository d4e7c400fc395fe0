"""Advantage modes against values worked out by hand (arithmetic in the comments)."""

from __future__ import annotations

import math

import pytest
import torch
from agentrl.rl.advantages import (
    AdvantageConfig,
    compute_advantages,
    equal_group_ids,
    group_moments,
    update_reward_baseline,
)

IDS_2x2 = torch.tensor([0, 0, 1, 1])


def adv(rewards: list[float], ids: torch.Tensor = IDS_2x2, baseline: float = 0.0, **cfg):
    values, metrics = compute_advantages(
        torch.tensor(rewards), ids, AdvantageConfig(**cfg), baseline=baseline
    )
    assert all(torch.is_tensor(v) and v.dim() == 0 for v in metrics.values())
    return values.tolist(), {k: float(v) for k, v in metrics.items()}


def test_group_mode_divides_by_the_population_std() -> None:
    # group 0: mean 2, population std sqrt(((1-2)^2 + (3-2)^2)/2) = 1 -> [-1, 1]
    # group 1: rewards 0 and 0.1: mean 0.05, std 0.05 < adv_min_std 0.1, so /0.1 -> [-0.5, 0.5]
    values, _ = adv([1.0, 3.0, 0.0, 0.1], advantage_mode="group", adv_min_std=0.1)
    assert values == pytest.approx([-1.0, 1.0, -0.5, 0.5], abs=1e-6)


def test_group_mode_std_floor_is_at_least_1e_4() -> None:
    # adv_min_std 0 -> floor 1e-4: rewards 0, 2e-5: mean 1e-5, std 1e-5 -> +-1e-5 / 1e-4 = +-0.1
    values, _ = adv([0.0, 2e-5], torch.tensor([0, 0]), advantage_mode="group", adv_min_std=0.0)
    assert values == pytest.approx([-0.1, 0.1], rel=1e-3)


def test_baseline_mode_is_reward_minus_ema_over_scale() -> None:
    # (1 - 1)/3 = 0, (4 - 1)/3 = 1
    values, _ = adv([1.0, 4.0], torch.tensor([0, 0]), baseline=1.0, advantage_mode="baseline")
    assert values == pytest.approx([0.0, 1.0])
    # scale 0 is floored at 1e-3: (0.002 - 0)/0.001 = 2
    values, _ = adv([0.002, 0.0], torch.tensor([0, 0]), advantage_mode="baseline", reward_scale=0)
    assert values == pytest.approx([2.0, 0.0], rel=1e-4)


@pytest.mark.parametrize(
    ("mode", "baseline", "flat_group"),
    [
        ("zero", 2.5, [0.0, 0.0]),
        ("baseline", 2.5, [-1.0, -1.0]),  # (2 - 2.5) / 0.5
        ("positive_baseline", 2.5, [0.0, 0.0]),  # max(-1, 0)
        ("positive_baseline", 1.0, [2.0, 2.0]),  # (2 - 1) / 0.5, kept
    ],
)
def test_mixed_mode_uses_the_zero_std_mode_only_for_flat_groups(
    mode: str, baseline: float, flat_group: list[float]
) -> None:
    # group 0 (1, 3) has std 1 >= 0.1: group advantages [-1, 1]; group 1 (2, 2) is flat.
    values, metrics = adv(
        [1.0, 3.0, 2.0, 2.0],
        baseline=baseline,
        advantage_mode="mixed",
        zero_std_advantage_mode=mode,
        reward_scale=0.5,
    )
    assert values == pytest.approx([-1.0, 1.0, *flat_group])
    assert metrics["reward/zero_std_group_ratio"] == 0.5
    assert metrics["reward/group_std"] == pytest.approx(0.5)  # (1 + 0) / 2


def test_adv_clip_bounds_both_sides() -> None:
    # (10 - 0)/1 = 10 -> 3 ; (-5 - 0)/1 = -5 -> -3
    values, _ = adv(
        [10.0, -5.0], torch.tensor([0, 0]), advantage_mode="baseline", reward_scale=1, adv_clip=3
    )
    assert values == [3.0, -3.0]
    values, _ = adv(
        [10.0, -5.0], torch.tensor([0, 0]), advantage_mode="baseline", reward_scale=1, adv_clip=0
    )
    assert values == [10.0, -5.0]


def test_negative_adv_scale_weighs_only_failures_after_the_clip() -> None:
    # group mode, one group: rewards 0 and 4 -> (r - 2) / 2 = -1, +1; then clip at 0.5
    values, metrics = adv([0.0, 4.0], torch.tensor([0, 0]), advantage_mode="group")
    assert values == [-1.0, 1.0]
    values, metrics = adv(
        [0.0, 4.0], torch.tensor([0, 0]), advantage_mode="group", negative_adv_scale=0.25
    )
    assert values == [-0.25, 1.0] and metrics["adv/negative_ratio"] == 0.5
    values, _ = adv(
        [0.0, 4.0],
        torch.tensor([0, 0]),
        advantage_mode="group",
        adv_clip=0.5,
        negative_adv_scale=0.0,
    )
    assert values == [0.0, 0.5]


def test_grpo_mode_adds_epsilon_to_the_std() -> None:
    # (1 - 2) / (1 + 1e-4) and (3 - 2) / (1 + 1e-4); flat group (2, 2): 0 / (0 + 1e-4) = 0
    values, _ = adv([1.0, 3.0, 2.0, 2.0], advantage_mode="grpo", adv_clip=0)
    expected = [-1 / 1.0001, 1 / 1.0001, 0.0, 0.0]
    assert values == pytest.approx(expected, abs=1e-6)


def test_metrics_are_tensors_with_hand_computed_values() -> None:
    # advantages [-1, 1, 0, 0] (mixed, zero mode)
    _, m = adv([1.0, 3.0, 2.0, 2.0], advantage_mode="mixed", zero_std_advantage_mode="zero")
    assert m["reward/nonzero_adv_ratio"] == 0.5
    assert m["adv/negative_ratio"] == 0.25
    assert m["adv/positive_ratio"] == 0.25
    assert m["adv/mean"] == 0.0
    assert m["adv/std"] == pytest.approx(math.sqrt(0.5))  # sqrt((1 + 1 + 0 + 0) / 4)


def test_partial_groups_use_their_own_size() -> None:
    # group 0 = (1, 2, 3): mean 2, std sqrt(2/3); group 1 = (5,): std 0
    mean, std = group_moments(torch.tensor([1.0, 2.0, 3.0, 5.0]), torch.tensor([0, 0, 0, 1]))
    assert mean.tolist() == pytest.approx([2.0, 5.0])
    assert std.tolist() == pytest.approx([math.sqrt(2 / 3), 0.0])
    values, _ = adv([1.0, 2.0, 3.0, 5.0], torch.tensor([0, 0, 0, 1]), advantage_mode="group")
    s = math.sqrt(2 / 3)
    assert values == pytest.approx([-1 / s, 0.0, 1 / s, 0.0], abs=1e-6)


def test_equal_group_ids_and_bad_layouts() -> None:
    assert equal_group_ids(6, 3).tolist() == [0, 0, 0, 1, 1, 1]
    with pytest.raises(ValueError):
        equal_group_ids(5, 2)
    with pytest.raises(ValueError, match="without gaps"):
        group_moments(torch.tensor([1.0, 2.0]), torch.tensor([0, 2]))
    with pytest.raises(ValueError, match="unknown advantage_mode"):
        adv([1.0, 2.0], torch.tensor([0, 0]), advantage_mode="nope")


def test_reward_baseline_starts_at_the_first_mean_then_follows_the_ema() -> None:
    assert update_reward_baseline(0.0, 4.0, 0.98, opt_step=1) == 4.0
    # 0.98 * 2 + 0.02 * 4 = 2.04
    assert update_reward_baseline(2.0, 4.0, 0.98, opt_step=5) == pytest.approx(2.04)
    # a baseline restored from a checkpoint is not overwritten at opt_step 1
    assert update_reward_baseline(2.0, 4.0, 0.98, opt_step=1) == pytest.approx(2.04)
    assert update_reward_baseline(2.0, float("nan"), 0.98, opt_step=3) == 2.0
