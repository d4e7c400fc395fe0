"""Dynamic sampling (DAPO): fill each step with groups whose episodes scored differently.

A group whose rewards are all (nearly) equal has no group-relative advantage: under the
``zero`` fallback it contributes nothing but compute, and a batch of mostly such groups
is a small, noisy update. Dynamic sampling rolls out more prompts, up to a number of
extra rounds, until the step holds ``batch_size`` informative groups (reward std at least
``adv_min_std``, the threshold the ``mixed`` advantage mode uses). Informative groups come
first; when the rounds run out, flat groups fill the rest, so a step never trains on
fewer groups than asked. Informative groups beyond the batch are dropped, as in DAPO,
and counted. :func:`draw_batch` draws a step's groups, with dynamic sampling or without.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from agentrl.rewards import CombinedReward, RewardConfig
from agentrl.rl.advantages import group_moments
from agentrl.training.scoring import score_trajectories
from agentrl.training.sources import GroupSource
from agentrl.trajectory import RolloutGroup


@dataclass
class FilledBatch:
    groups: list[RolloutGroup]
    metrics: dict[str, float]


def informative_groups(
    groups: Sequence[RolloutGroup],
    reward: RewardConfig,
    step: int,
    min_std: float,
    rewards: CombinedReward | None = None,
) -> list[bool]:
    """For each group: do its rewards (at ``step``'s schedules) spread by ``min_std``?"""
    sizes = [len(g.trajectories) for g in groups]
    if not groups or min(sizes) == 0:
        return [False] * len(groups)
    trajectories = [t for g in groups for t in g.trajectories]
    scores = score_trajectories(trajectories, reward, step, rewards)
    ids = torch.repeat_interleave(torch.arange(len(groups)), torch.tensor(sizes))
    _, std = group_moments(scores.rewards, ids)
    return [bool(s >= min_std) and bool(s > 0) for s in std.tolist()]


def fill_batch(
    fetch: Callable[[int], list[RolloutGroup]],
    batch_size: int,
    max_rounds: int,
    is_informative: Callable[[Sequence[RolloutGroup]], list[bool]],
) -> FilledBatch:
    """Call ``fetch(attempt)`` for attempt 0, 1, ... until ``batch_size`` informative groups
    are in hand or ``max_rounds`` extra attempts are spent (or a fetch comes back empty)."""
    kept: list[RolloutGroup] = []
    flat: list[RolloutGroup] = []
    rolled = attempt = 0
    while True:
        groups = fetch(attempt)
        rolled += len(groups)
        for group, useful in zip(groups, is_informative(groups), strict=True):
            (kept if useful else flat).append(group)
        if len(kept) >= batch_size or attempt >= max_rounds or not groups:
            break
        attempt += 1
    chosen = (kept + flat)[:batch_size]
    useful_in_batch = min(len(kept), batch_size)
    metrics = {
        "dynamic/extra_rounds": float(attempt),
        "dynamic/groups_rolled": float(rolled),
        "dynamic/informative_rate": len(kept) / max(rolled, 1),
        "dynamic/informative_in_batch": useful_in_batch / max(len(chosen), 1),
        "dynamic/dropped_informative": float(len(kept) - useful_in_batch),
    }
    return FilledBatch(chosen, metrics)


@dataclass(frozen=True)
class DrawnBatch:
    """A step's rollout groups, the seconds drawing them took, dynamic sampling's metrics."""

    groups: list[RolloutGroup]
    seconds: float
    sampling_metrics: dict[str, float]


def draw_batch(
    source: GroupSource,
    step: int,
    batch_size: int,
    rounds: int,
    is_informative: Callable[[Sequence[RolloutGroup]], list[bool]],
) -> DrawnBatch:
    """Step ``step``'s groups from ``source``, timed: one batch, or with ``rounds`` > 0
    up to that many extra rounds of dynamic sampling (informative groups first)."""
    began = time.perf_counter()
    if rounds <= 0:
        groups, metrics = source.next_batch(step), {}
    else:
        filled = fill_batch(
            lambda attempt: source.next_batch(step, attempt), batch_size, rounds, is_informative
        )
        groups, metrics = filled.groups, filled.metrics
    return DrawnBatch(groups, time.perf_counter() - began, metrics)


__all__ = ["DrawnBatch", "FilledBatch", "draw_batch", "fill_batch", "informative_groups"]
