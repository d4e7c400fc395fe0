"""Advantage estimators: one scalar per trajectory, broadcast over its tokens by the loss.

Groups are given as ``group_ids`` (row -> group index) rather than a fixed group size,
so the same code serves strict packing (every group has G rows) and non-strict packing
(partial groups).

Estimators are registered by name (``advantage_mode``):

- ``group``: (r - group mean) / max(group std, adv_min_std, 1e-4);
- ``baseline``: (r - reward EMA) / reward_scale, for groups where everybody scored the
  same and a group-relative signal is zero;
- ``mixed``: ``group`` where the group's std reaches ``adv_min_std``, otherwise the
  zero-std mode (``zero``, ``baseline`` or ``positive_baseline``: only rewards above the
  baseline push, nothing pulls a whole group down);
- ``grpo``: (r - group mean) / (group std + 1e-4), GRPO's normalisation.

All of them rest on :func:`group_advantages`. After clipping, ``negative_adv_scale``
(default 1) can weigh failures less than successes: pushing down a failed episode lowers
every token of it, most of which were right, while pushing up a success reinforces
exactly what worked.

Standard deviations are population ones (``unbiased=False``).

Scoring text with reward functions and then normalising within groups is
`agentrl.training.group_rewards`: it composes the reward layer with this math.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from agentrl.utils.registry import lookup, registrar

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "GROUP_STD_EPSILON",
    "ZERO_STD_MODES",
    "AdvantageConfig",
    "baseline_advantages",
    "compute_advantages",
    "equal_group_ids",
    "group_advantages",
    "group_ids_from_labels",
    "group_moments",
    "register_advantage",
    "update_reward_baseline",
]

ZERO_STD_MODES = ("zero", "baseline", "positive_baseline")
# Added to each group's standard deviation by the ``grpo`` mode.
GROUP_STD_EPSILON = 1e-4


@dataclass
class AdvantageConfig:
    """Advantage options under their command-line flag names, with the trainer's defaults."""

    advantage_mode: str = "mixed"
    adv_min_std: float = 0.10
    zero_std_advantage_mode: str = "baseline"
    adv_clip: float = 3.0
    reward_scale: float = 3.0
    reward_ema_decay: float = 0.98
    # Negative advantages are multiplied by this (1: symmetric).
    negative_adv_scale: float = 1.0


Estimator = Callable[[torch.Tensor, torch.Tensor, AdvantageConfig, float], torch.Tensor]
ADVANTAGE_ESTIMATORS: dict[str, Estimator] = {}


# ``@register_advantage(name)`` on ``fn(rewards, group_ids, config, baseline) -> advantages``.
register_advantage = registrar(ADVANTAGE_ESTIMATORS)


def equal_group_ids(num_rows: int, num_generations: int, device: torch.device | str = "cpu"):
    """Group ids for rows laid out as consecutive groups of ``num_generations``."""
    if num_generations < 1 or num_rows % num_generations:
        raise ValueError(f"{num_rows} rows do not split into groups of {num_generations}")
    groups = torch.arange(num_rows // num_generations, device=device)
    return groups.repeat_interleave(num_generations)


def group_moments(
    rewards: torch.Tensor, group_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-group mean and population std, each of shape [num_groups]."""
    n_groups = int(group_ids.max().item()) + 1 if group_ids.numel() else 0
    counts = torch.bincount(group_ids, minlength=n_groups).to(rewards.dtype)
    if bool((counts == 0).any()):
        raise ValueError("group_ids must number groups 0..K-1 without gaps")
    sums = torch.zeros(n_groups, dtype=rewards.dtype, device=rewards.device)
    mean = sums.index_add(0, group_ids, rewards) / counts
    centered = (rewards - mean[group_ids]) ** 2
    var = torch.zeros_like(mean).index_add(0, group_ids, centered) / counts
    return mean, var.sqrt()


def group_advantages(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    min_std: float = 0.0,
    epsilon: float = 0.0,
) -> torch.Tensor:
    """(r - group mean) / (max(group std, min_std) + epsilon), for every row.

    The floor (``min_std``) stops a tiny spread from blowing a group up; ``epsilon`` is
    the additive form that gives a flat group zero advantages instead of 0 / 0.
    """
    mean, std = group_moments(rewards, group_ids)
    scale = std[group_ids]
    if min_std > 0:
        scale = scale.clamp(min=float(min_std))
    if epsilon:
        scale = scale + float(epsilon)
    return (rewards - mean[group_ids]) / scale


def baseline_advantages(rewards: torch.Tensor, baseline: float, scale: float) -> torch.Tensor:
    """(r - baseline) / scale, with the scale floored at 1e-3."""
    return (rewards - float(baseline)) / max(float(scale), 1e-3)


def _floored_group(rewards: torch.Tensor, ids: torch.Tensor, cfg: AdvantageConfig):
    return group_advantages(rewards, ids, min_std=max(float(cfg.adv_min_std), 1e-4))


@register_advantage("group")
def _group(rewards: torch.Tensor, ids: torch.Tensor, cfg: AdvantageConfig, baseline: float):
    return _floored_group(rewards, ids, cfg)


@register_advantage("baseline")
def _baseline(rewards: torch.Tensor, ids: torch.Tensor, cfg: AdvantageConfig, baseline: float):
    return baseline_advantages(rewards, baseline, cfg.reward_scale)


@register_advantage("mixed")
def _mixed(rewards: torch.Tensor, ids: torch.Tensor, cfg: AdvantageConfig, baseline: float):
    if cfg.zero_std_advantage_mode not in ZERO_STD_MODES:
        raise ValueError(
            f"zero_std_advantage_mode {cfg.zero_std_advantage_mode!r} is not one of "
            f"{ZERO_STD_MODES}"
        )
    _, std = group_moments(rewards, ids)
    flat = (std < cfg.adv_min_std)[ids]
    fallback = baseline_advantages(rewards, baseline, cfg.reward_scale)
    if cfg.zero_std_advantage_mode == "zero":
        fallback = torch.zeros_like(fallback)
    elif cfg.zero_std_advantage_mode == "positive_baseline":
        fallback = fallback.clamp(min=0.0)
    return torch.where(flat, fallback, _floored_group(rewards, ids, cfg))


@register_advantage("grpo")
def _grpo(rewards: torch.Tensor, ids: torch.Tensor, cfg: AdvantageConfig, baseline: float):
    return group_advantages(rewards, ids, epsilon=GROUP_STD_EPSILON)


def compute_advantages(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    config: AdvantageConfig,
    baseline: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Advantages under ``config.advantage_mode``, clipped to ±adv_clip, and their metrics."""
    estimator = lookup(ADVANTAGE_ESTIMATORS, config.advantage_mode, "advantage_mode")
    rewards = rewards.float()
    advantages = estimator(rewards, group_ids, config, float(baseline))
    if config.adv_clip > 0:
        advantages = advantages.clamp(-config.adv_clip, config.adv_clip)
    if config.negative_adv_scale != 1.0:
        advantages = torch.where(advantages < 0, advantages * config.negative_adv_scale, advantages)
    return advantages, advantage_metrics(rewards, group_ids, advantages, config.adv_min_std)


def advantage_metrics(
    rewards: torch.Tensor, group_ids: torch.Tensor, advantages: torch.Tensor, min_std: float
) -> dict[str, torch.Tensor]:
    """How much signal a batch carries, as 0-dim tensors (read on the host with the rest).

    The spread of rewards within groups and the share of flat groups say whether the
    group-relative estimate had anything to work with; the shares of rows pushed up,
    pushed down or left alone say what the update will do.
    """
    _, std = group_moments(rewards, group_ids)
    tiny = 1e-6
    return {
        "reward/group_std": std.mean(),
        "reward/zero_std_group_ratio": (std < min_std).float().mean(),
        "reward/nonzero_adv_ratio": (advantages.abs() > tiny).float().mean(),
        "adv/negative_ratio": (advantages < -tiny).float().mean(),
        "adv/positive_ratio": (advantages > tiny).float().mean(),
        "adv/mean": advantages.mean(),
        "adv/std": advantages.std(unbiased=False),
    }


def update_reward_baseline(
    baseline: float, reward_mean: float, decay: float, opt_step: int
) -> float:
    """The reward EMA after optimizer step ``opt_step`` (1-based).

    The first update starts the EMA at the observed mean when no baseline is set yet, so
    the baseline does not spend its first hundred steps climbing from zero.
    """
    reward_mean = float(reward_mean)
    if not math.isfinite(reward_mean):
        return float(baseline)
    if opt_step == 1 and abs(float(baseline)) < 1e-12:
        return reward_mean
    return float(decay) * float(baseline) + (1.0 - float(decay)) * reward_mean


def group_ids_from_labels(groups: Sequence[Any] | np.ndarray | int, n: int) -> torch.Tensor:
    """Group ids 0..K-1 for ``n`` rows from one label per row (any hashable values, e.g.
    the prompt index) or from an int group size (consecutive groups)."""
    if isinstance(groups, int | np.integer):
        return equal_group_ids(n, int(groups))
    labels = np.asarray(groups)
    if labels.shape != (n,):
        raise ValueError(f"got {labels.size} group ids for {n} rewards")
    _, inverse = np.unique(labels, return_inverse=True)
    return torch.as_tensor(inverse.reshape(-1), dtype=torch.long)
