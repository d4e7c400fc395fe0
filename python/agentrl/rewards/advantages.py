"""Group-normalised advantages, as the second seed's ``calculate_rewards_and_advantages``.

Each completion's advantage is its reward minus its group's mean, divided by the group's
(population) standard deviation plus a small epsilon, so a group whose rewards are all equal
gets zero advantages instead of a division by zero. Vectorised: one pass of ``bincount``
per statistic, however many groups there are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentrl.rewards.functions import RewardFunction, combine

# Added to each group's standard deviation (the second seed's value).
GROUP_STD_EPSILON = 1e-4
_FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class GroupAdvantages:
    """Advantages per completion and the reward statistics the trainer logs."""

    advantages: np.ndarray
    metrics: dict[str, float]


def group_ids_from_size(n: int, group_size: int) -> np.ndarray:
    """Group ids for ``n`` completions laid out as consecutive groups of ``group_size``."""
    if group_size < 1 or n % group_size:
        raise ValueError(f"{n} completions do not split into groups of {group_size}")
    return np.repeat(np.arange(n // group_size), group_size)


def group_advantages(
    rewards: Sequence[float] | np.ndarray,
    groups: Sequence[Any] | np.ndarray | int,
    epsilon: float = GROUP_STD_EPSILON,
) -> GroupAdvantages:
    """``(r - group mean) / (group std + epsilon)`` for every completion.

    ``groups`` is one group id (any hashable, e.g. the prompt index) per completion, or an
    int group size for consecutive groups. Metrics: ``total_rewards_mean``/``_std`` over all
    completions, ``grouped_rewards_mean``/``_std`` averaged over groups.
    """
    values = np.asarray(rewards, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError("rewards must be a non-empty 1-D sequence")
    if not np.isfinite(values).all():
        raise ValueError("rewards must be finite")
    if isinstance(groups, int | np.integer):
        ids = group_ids_from_size(values.size, int(groups))
    else:
        ids = np.asarray(groups)
        if ids.shape != values.shape:
            raise ValueError(f"got {ids.size} group ids for {values.size} rewards")
    _, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    # Overflow shows up as non-finite statistics, which _check_metrics reports.
    with np.errstate(over="ignore", invalid="ignore"):
        means = np.bincount(inverse, weights=values) / counts
        centred = values - means[inverse]
        stds = np.sqrt(np.bincount(inverse, weights=centred * centred) / counts)
        advantages = centred / (stds[inverse] + epsilon)
        metrics = {
            "total_rewards_mean": float(values.mean()),
            "total_rewards_std": float(values.std()),
            "grouped_rewards_mean": float(means.mean()),
            "grouped_rewards_std": float(stds.mean()),
        }
    _check_metrics(metrics)
    return GroupAdvantages(advantages=advantages, metrics=metrics)


def calculate_rewards_and_advantages(
    functions: Sequence[RewardFunction],
    prompts: Sequence[Any],
    completions: Sequence[str],
    answers: Sequence[Any],
    groups: Sequence[Any] | np.ndarray | int,
    weights: Sequence[float] | None = None,
    **extra: Any,
) -> GroupAdvantages:
    """Evaluates each reward function once, weights them, and normalises within groups.

    The metrics hold the group statistics plus each function's mean, std and coverage.
    """
    combined = combine(functions, weights)(prompts, completions, answers, **extra)
    result = group_advantages(combined.totals, groups)
    metrics = {**combined.metrics, **result.metrics}
    _check_metrics(metrics)
    return GroupAdvantages(advantages=result.advantages, metrics=metrics)


def _check_metrics(metrics: dict[str, float]) -> None:
    for key, value in metrics.items():
        if not np.isfinite(value) or abs(value) > _FLOAT32_MAX:
            raise ValueError(f"reward statistic {key} = {value} is not representable in float32")
