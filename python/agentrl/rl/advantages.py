"""Advantage estimators: one scalar per trajectory (broadcast over its tokens by the loss),
or one per assistant turn (spread over each turn's tokens with :func:`token_advantages`).

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
- ``grpo``: (r - group mean) / (group std + 1e-4), GRPO's normalisation;
- ``turn_grpo`` (per turn): the discounted return from turn t, G_t = sum_k>=t gamma^(k-t)
  r_k, normalised across the group's episodes that reached turn t;
- ``turn_group`` (per turn): G_t against the group's episode baseline, (G_t - mean G_0) /
  (std G_0 + 1e-4).

Per-turn modes read :class:`TurnRewards` (each turn's reward; an episode-level reward counts
at the last turn), ``gamma`` is ``turn_discount``; docs/turn-credit.md says what each
assumes and where each is biased.

All of them rest on :func:`group_advantages`. After clipping, ``negative_adv_scale``
(default 1) can weigh failures less than successes: pushing down a failed episode lowers
every token of it, most of which were right, while pushing up a success reinforces
exactly what worked.

Standard deviations are population ones (``unbiased=False``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from agentrl.utils.options import option
from agentrl.utils.registry import lookup, registrar
from agentrl.utils.reward_baseline import REWARD_EMA_DECAY, REWARD_SCALE

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "GROUP_STD_EPSILON",
    "ZERO_STD_MODES",
    "AdvantageConfig",
    "TurnRewards",
    "baseline_advantages",
    "compute_advantages",
    "equal_group_ids",
    "group_advantages",
    "group_moments",
    "register_advantage",
    "register_turn_advantage",
    "token_advantages",
    "turn_returns",
    "update_reward_baseline",
]

ZERO_STD_MODES = ("zero", "baseline", "positive_baseline")
# Added to each group's standard deviation by the ``grpo`` mode.
GROUP_STD_EPSILON = 1e-4


Estimator = Callable[[torch.Tensor, torch.Tensor, "AdvantageConfig", float], torch.Tensor]
ADVANTAGE_ESTIMATORS: dict[str, Estimator] = {}


@dataclass(frozen=True)
class AdvantageConfig:
    """Advantage options (in the ``loss`` section of the run's config)."""

    SECTION: ClassVar[str] = "loss"

    advantage_mode: str = option(
        "mixed", "how rewards become advantages", ADVANTAGE_ESTIMATORS, common=True
    )
    adv_min_std: float = option(0.10, "group std below this counts as zero", check=">=0")
    zero_std_advantage_mode: str = option(
        "baseline", "advantage of a zero-std group in mixed mode", ZERO_STD_MODES
    )
    adv_clip: float = option(3.0, "clip advantages to +-adv_clip (0: off)", check=">=0")
    negative_adv_scale: float = option(
        1.0,
        "weight of negative advantages (1: symmetric, 0: learn from successes)",
        check="[0,1]",
    )
    turn_discount: float = option(
        1.0, "discount of later turns' rewards in per-turn advantage modes", check="[0,1]"
    )
    # The reward baseline's scale and EMA decay are reward settings (RewardConfig's
    # ``reward_scale`` and ``reward_ema_decay``, the scorer's list); the run's config
    # copies them here. Both take their defaults from agentrl.utils.reward_baseline.
    reward_scale: float = field(default=REWARD_SCALE, metadata={"from": "reward"})
    reward_ema_decay: float = field(default=REWARD_EMA_DECAY, metadata={"from": "reward"})


@dataclass
class TurnRewards:
    """Each episode's reward per assistant turn, padded: ``rewards`` [B, K] (0 past an
    episode's last turn), ``mask`` [B, K] (True on its turns)."""

    rewards: torch.Tensor
    mask: torch.Tensor

    @staticmethod
    def from_lists(rows: Sequence[Sequence[float]], device: Any = "cpu") -> TurnRewards:
        width = max((len(r) for r in rows), default=1) or 1
        rewards = torch.zeros((len(rows), width), dtype=torch.float32)
        mask = torch.zeros((len(rows), width), dtype=torch.bool)
        for i, row in enumerate(rows):
            rewards[i, : len(row)] = torch.tensor([float(v) for v in row], dtype=torch.float32)
            mask[i, : len(row)] = True
        return TurnRewards(rewards.to(device), mask.to(device))

    @staticmethod
    def at_last_turn(rewards: torch.Tensor, turns: Sequence[int]) -> TurnRewards:
        """Episode rewards as per-turn rewards: all at each episode's last turn."""
        values = rewards.tolist()
        rows = [
            [0.0] * (max(int(k), 1) - 1) + [float(r)] for r, k in zip(values, turns, strict=True)
        ]
        return TurnRewards.from_lists(rows, rewards.device)


# ``@register_advantage(name)`` on ``fn(rewards, group_ids, config, baseline) -> advantages``.
register_advantage = registrar(ADVANTAGE_ESTIMATORS)


def register_turn_advantage(name: str) -> Callable[[Callable[..., torch.Tensor]], Any]:
    """``@register_turn_advantage(name)`` on ``fn(turns: TurnRewards, group_ids, config,
    baseline) -> [B, K] advantages``: a per-turn mode, in the same registry."""

    def add(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        fn.per_turn = True  # type: ignore[attr-defined]
        return register_advantage(name)(fn)

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


def turn_returns(turns: TurnRewards, gamma: float) -> torch.Tensor:
    """G_t = r_t + gamma G_(t+1) within each episode's turns, [B, K] (0 off the mask)."""
    r = turns.rewards.float() * turns.mask
    out = torch.zeros_like(r)
    running = torch.zeros_like(r[:, 0])
    for k in range(r.size(1) - 1, -1, -1):
        running = r[:, k] + float(gamma) * running * turns.mask[:, k]
        out[:, k] = running
    return out * turns.mask


@register_turn_advantage("turn_grpo")
def _turn_grpo(turns: TurnRewards, ids: torch.Tensor, cfg: AdvantageConfig, baseline: float):
    returns = turn_returns(turns, cfg.turn_discount)
    k = returns.size(1)
    cells = (ids.unsqueeze(1) * k + torch.arange(k, device=ids.device)).reshape(-1)
    on = turns.mask.reshape(-1)
    slots = int(ids.max().item() + 1) * k if ids.numel() else 0
    count = torch.zeros(slots, device=returns.device).index_add(
        0, cells[on], torch.ones_like(returns.reshape(-1)[on])
    )
    total = torch.zeros(slots, device=returns.device).index_add(
        0, cells[on], returns.reshape(-1)[on]
    )
    mean = total / count.clamp(min=1)
    centred = (returns.reshape(-1) - mean[cells]) * on
    var = torch.zeros(slots, device=returns.device).index_add(0, cells, centred**2) / count.clamp(
        min=1
    )
    values = centred / (var.sqrt()[cells] + GROUP_STD_EPSILON)
    return values.reshape(returns.shape) * turns.mask


@register_turn_advantage("turn_group")
def _turn_group(turns: TurnRewards, ids: torch.Tensor, cfg: AdvantageConfig, baseline: float):
    returns = turn_returns(turns, cfg.turn_discount)
    mean, std = group_moments(returns[:, 0], ids)
    values = (returns - mean[ids].unsqueeze(1)) / (std[ids].unsqueeze(1) + GROUP_STD_EPSILON)
    return values * turns.mask


def token_advantages(turn_values: torch.Tensor, token_turns: torch.Tensor) -> torch.Tensor:
    """Per-turn advantages [B, K] spread over the tokens: [B, T-1] from ``token_turns``
    (each position's turn, -1 off the response: advantage 0 there)."""
    index = token_turns.clamp(min=0, max=turn_values.size(1) - 1)
    return turn_values.gather(1, index) * (token_turns >= 0)


def compute_advantages(
    rewards: torch.Tensor,
    group_ids: torch.Tensor,
    config: AdvantageConfig,
    baseline: float = 0.0,
    turns: TurnRewards | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Advantages under ``config.advantage_mode``, clipped to ±adv_clip, and their metrics.

    Episode modes give [B]; per-turn modes give [B, K] from ``turns`` (default: each reward
    at a single turn). With ``turns``, the metrics add ``turn/<k>/reward``, ``.../return``,
    ``.../advantage`` (means over the episodes that reached turn k) and ``.../episodes``.
    """
    estimator = lookup(ADVANTAGE_ESTIMATORS, config.advantage_mode, "advantage_mode")
    rewards = rewards.float()
    per_turn = bool(getattr(estimator, "per_turn", False))
    if per_turn:
        turns = turns or TurnRewards(
            rewards.unsqueeze(1), torch.ones_like(rewards.unsqueeze(1), dtype=torch.bool)
        )
        advantages = estimator(turns, group_ids, config, float(baseline))
    else:
        advantages = estimator(rewards, group_ids, config, float(baseline))
    if config.adv_clip > 0:
        advantages = advantages.clamp(-config.adv_clip, config.adv_clip)
    if config.negative_adv_scale != 1.0:
        advantages = torch.where(advantages < 0, advantages * config.negative_adv_scale, advantages)
    on = turns.mask if per_turn and turns is not None else None
    flat = advantages[on] if on is not None else advantages
    metrics = advantage_metrics(rewards, group_ids, flat, config.adv_min_std)
    if turns is not None:
        metrics.update(turn_metrics(turns, advantages, config.turn_discount))
    return advantages, metrics


def turn_metrics(
    turns: TurnRewards, advantages: torch.Tensor, gamma: float
) -> dict[str, torch.Tensor]:
    """Per turn index k: the mean reward, return and advantage of the episodes that reached
    it, and how many did (an episode advantage counts at each of its turns)."""
    mask = turns.mask.float()
    count = mask.sum(0)
    returns = turn_returns(turns, gamma)
    adv = advantages.unsqueeze(1).expand_as(mask) if advantages.dim() == 1 else advantages
    out: dict[str, torch.Tensor] = {}
    for k in range(mask.size(1)):
        n = count[k].clamp(min=1)
        out[f"turn/{k}/episodes"] = count[k]
        out[f"turn/{k}/reward"] = (turns.rewards[:, k] * mask[:, k]).sum() / n
        out[f"turn/{k}/return"] = (returns[:, k] * mask[:, k]).sum() / n
        out[f"turn/{k}/advantage"] = (adv[:, k] * mask[:, k]).sum() / n
    return out


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
