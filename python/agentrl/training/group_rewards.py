"""Reward functions on text, then advantages within groups: the reward layer and the RL
math composed, for callers holding completions rather than reward tensors."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from agentrl.rewards.functions import RewardFunction, combine
from agentrl.rl.advantages import (
    GROUP_STD_EPSILON,
    group_advantages,
    group_ids_from_labels,
    group_moments,
)

_FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class GroupAdvantages:
    """Advantages per completion and the reward statistics a trainer logs."""

    advantages: np.ndarray
    metrics: dict[str, float]


def calculate_rewards_and_advantages(
    functions: Sequence[RewardFunction],
    prompts: Sequence[Any],
    completions: Sequence[str],
    answers: Sequence[Any],
    groups: Sequence[Any] | np.ndarray | int,
    weights: Sequence[float] | None = None,
    **extra: Any,
) -> GroupAdvantages:
    """Score completions with weighted reward functions, then normalise within groups.

    The advantage is ``(r - group mean) / (group std + 1e-4)`` (:func:`group_advantages`,
    in float64). Metrics: each function's mean, std and coverage, plus
    ``total_rewards_mean``/``_std`` over all completions and ``grouped_rewards_mean``/
    ``_std`` averaged over groups. Non-finite rewards and statistics that float32 cannot
    hold are errors.
    """
    combined = combine(functions, weights)(prompts, completions, answers, **extra)
    values = torch.as_tensor(np.asarray(combined.totals, dtype=np.float64))
    if not bool(torch.isfinite(values).all()):
        raise ValueError("rewards must be finite")
    ids = group_ids_from_labels(groups, values.numel())
    mean, std = group_moments(values, ids)
    advantages = group_advantages(values, ids, epsilon=GROUP_STD_EPSILON)
    stats = torch.stack([values.mean(), values.std(unbiased=False), mean.mean(), std.mean()])
    names = (
        "total_rewards_mean",
        "total_rewards_std",
        "grouped_rewards_mean",
        "grouped_rewards_std",
    )
    metrics = {**combined.metrics, **dict(zip(names, stats.tolist(), strict=True))}
    for key, value in metrics.items():
        if not math.isfinite(value) or abs(value) > _FLOAT32_MAX:
            raise ValueError(f"reward statistic {key} = {value} is not representable in float32")
    return GroupAdvantages(advantages=advantages.numpy(), metrics=metrics)


__all__ = ["GroupAdvantages", "calculate_rewards_and_advantages"]
