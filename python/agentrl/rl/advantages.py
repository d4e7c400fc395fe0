"""Advantage estimators: one scalar per trajectory, broadcast over its tokens by the loss.

Groups are given as ``group_ids`` (row -> group index) rather than a fixed group size,
so the same code serves strict packing (every group has G rows, where this reduces to
the seeds' ``view(-1, G)``) and non-strict packing (partial groups).

Estimators are registered by name (``advantage_mode``):

- ``group``: (r - group mean) / max(group std, adv_min_std, 1e-4) — the first seed;
- ``baseline``: (r - reward EMA) / reward_scale, for groups where everybody scored the
  same and a group-relative signal is zero;
- ``mixed``: ``group`` where the group's std reaches ``adv_min_std``, otherwise the
  zero-std mode (``zero``, ``baseline`` or ``positive_baseline``: only rewards above the
  baseline push, nothing pulls a whole group down);
- ``grpo``: (r - group mean) / (group std + 1e-4) — the second seed's normalisation.

After clipping, ``negative_adv_scale`` (ours, default 1) can weigh failures less than
successes: pushing down a failed episode lowers every token of it, most of which were
right, while pushing up a success reinforces exactly what worked.

Standard deviations are population ones (``unbiased=False``) as in both seeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "ZERO_STD_MODES",
    "AdvantageConfig",
    "baseline_advantages",
    "compute_advantages",
    "equal_group_ids",
    "group_advantages",
    "group_moments",
    "normalized_group_advantages",
    "register_advantage",
    "update_reward_baseline",
]

ZERO_STD_MODES = ("zero", "baseline", "positive_baseline")


@dataclass
class AdvantageConfig:
    """Advantage options under the first seed's flag names and defaults."""

    advantage_mode: str = "mixed"
    adv_min_std: float = 0.10
    zero_std_advantage_mode: str = "baseline"
    adv_clip: float = 3.0
    reward_scale: float = 3.0
    reward_ema_decay: float = 0.98
    # (ours) Negative advantages are multiplied by this (1: the seeds' symmetric estimate).
    negative_adv_scale: float = 1.0


Estimator = Callable[[torch.Tensor, torch.Tensor, AdvantageConfig, float], torch.Tensor]
ADVANTAGE_ESTIMATORS: dict[str, Estimator] = {}


def register_advantage(name: str) -> Callable[[Estimator], Estimator]:
    """Register an estimator ``fn(rewards, group_ids, config, baseline) -> advantages``."""

    def add(fn: Estimator) -> Estimator:
        ADVANTAGE_ESTIMATORS[name] = fn
        return fn

    return add


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
    rewards: torch.Tensor, group_ids: torch.Tensor, min_std: float
) -> torch.Tensor:
    """The first seed's group-relative advantage; the std floor stops tiny spreads exploding."""
    mean, std = group_moments(rewards, group_ids)
    floor = max(float(min_std), 1e-4)
    return (rewards - mean[group_ids]) / std[group_ids].clamp(min=floor)


def normalized_group_advantages(
    rewards: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-4
) -> torch.Tensor:
    """The second seed's normalisation, (r - mean) / (std + eps), from :mod:`agentrl.rewards`.

    One implementation of it serves the reward API and the trainer; it rejects
    non-finite rewards rather than spreading NaN through a group.
    """
    from agentrl.rewards.advantages import group_advantages as seed2_group_advantages

    result = seed2_group_advantages(
        rewards.detach().double().cpu().numpy(), group_ids.cpu().numpy(), eps
    )
    return torch.as_tensor(result.advantages, dtype=rewards.dtype, device=rewards.device)


def baseline_advantages(rewards: torch.Tensor, baseline: float, scale: float) -> torch.Tensor:
    """(r - baseline) / scale, with the scale floored at 1e-3 as in the seed."""
    return (rewards - float(baseline)) / max(float(scale), 1e-3)


@register_advantage("group")
def _group(rewards: torch.Tensor, ids: torch.Tensor, cfg: AdvantageConfig, baseline: float):
    return group_advantages(rewards, ids, cfg.adv_min_std)


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
    return torch.where(flat, fallback, group_advantages(rewards, ids, cfg.adv_min_std))


@register_advantage("grpo")
def _grpo(rewards: torch.Tensor, ids: torch.Tensor, cfg: AdvantageConfig, baseline: float):
    return normalized_group_advantages(rewards, ids)


def compute_advantages(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    config: AdvantageConfig,
    baseline: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Advantages under ``config.advantage_mode``, clipped to ±adv_clip, and the seed's metrics."""
    try:
        estimator = ADVANTAGE_ESTIMATORS[config.advantage_mode]
    except KeyError:
        known = ", ".join(sorted(ADVANTAGE_ESTIMATORS))
        raise ValueError(f"unknown advantage_mode {config.advantage_mode!r} ({known})") from None
    rewards = rewards.float()
    advantages = estimator(rewards, group_ids, config, float(baseline))
    if config.adv_clip > 0:
        advantages = advantages.clamp(-config.adv_clip, config.adv_clip)
    if config.negative_adv_scale != 1.0:
        advantages = torch.where(advantages < 0, advantages * config.negative_adv_scale, advantages)
    _, std = group_moments(rewards, group_ids)
    metrics = {
        "reward/group_std": float(std.mean().item()),
        "reward/zero_std_group_ratio": float((std < config.adv_min_std).float().mean().item()),
        "reward/nonzero_adv_ratio": float((advantages.abs() > 1e-6).float().mean().item()),
        "adv/negative_ratio": float((advantages < -1e-6).float().mean().item()),
        "adv/positive_ratio": float((advantages > 1e-6).float().mean().item()),
        "adv/mean": float(advantages.mean().item()),
        "adv/std": float(advantages.std(unbiased=False).item()),
    }
    return advantages, metrics


def update_reward_baseline(
    baseline: float, reward_mean: float, decay: float, opt_step: int
) -> float:
    """The reward EMA after optimizer step ``opt_step`` (1-based), as the seed updates it.

    The first update starts the EMA at the observed mean when no baseline is set yet, so
    the baseline does not spend its first hundred steps climbing from zero.
    """
    reward_mean = float(reward_mean)
    if not math.isfinite(reward_mean):
        return float(baseline)
    if opt_step == 1 and abs(float(baseline)) < 1e-12:
        return reward_mean
    return float(decay) * float(baseline) + (1.0 - float(decay)) * reward_mean
