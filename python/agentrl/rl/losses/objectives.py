"""Policy objectives, registered by name; ``--importance_sampling_level`` picks one.

An objective turns the current log-probs, the log-probs its ratio is anchored to (the
behaviour or the proximal policy, see :mod:`.correction`) and one advantage per row into
a per-token loss (to be minimised) and the per-token ratio it used.

- ``ppo_clip``: PPO's clipped surrogate on each token's own ratio, with separate lower and
  upper clip widths (a wider upper width is DAPO's clip-higher).
- ``gspo``: the same clipped surrogate on one ratio per sequence, the exponential of the
  row's mean log-ratio (GSPO); every token of a row is clipped together, while the gradient
  still reaches each token through the mean.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from agentrl.utils.registry import lookup

__all__ = [
    "ADVANTAGE_WEIGHTED",
    "OBJECTIVES",
    "OBJECTIVE_BY_LEVEL",
    "ClipRange",
    "ObjectiveOutput",
    "advantage_weighted",
    "clipped_surrogate",
    "objective_for_level",
    "register_objective",
    "sequence_log_ratio",
]


@dataclass(frozen=True)
class ClipRange:
    """The ratio band [1 - low, 1 + high]; log-ratios are bounded by ``log_ratio`` first."""

    low: float
    high: float
    log_ratio: float


@dataclass
class ObjectiveOutput:
    per_token_loss: torch.Tensor  # [B, L], with gradient
    ratio: torch.Tensor  # [B, L], the ratio each token's loss used


Objective = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, ClipRange], ObjectiveOutput
]
OBJECTIVES: dict[str, Objective] = {}
# importance_sampling_level value -> objective name.
OBJECTIVE_BY_LEVEL: dict[str, str] = {}
# Objectives whose loss, and its gradient, is zero wherever the advantage is.
ADVANTAGE_WEIGHTED: set[str] = set()


def register_objective(
    name: str, *, level: str, advantage_weighted: bool = False
) -> Callable[[Objective], Objective]:
    """Register ``fn(logps, anchor_logps, advantages, mask, clip)`` as ``name``.

    ``level`` is the ``importance_sampling_level`` value that selects it.
    ``advantage_weighted``: its per-token loss is a multiple of the advantage, so a row
    whose advantages are all zero contributes no gradient and training may skip it.
    """

    def add(fn: Objective) -> Objective:
        OBJECTIVES[name] = fn
        OBJECTIVE_BY_LEVEL[level] = name
        if advantage_weighted:
            ADVANTAGE_WEIGHTED.add(name)
        else:
            ADVANTAGE_WEIGHTED.discard(name)
        return fn

    return add


def advantage_weighted(level: str) -> bool:
    """Whether the objective an ``importance_sampling_level`` selects is advantage-weighted."""
    return lookup(OBJECTIVE_BY_LEVEL, level, "importance_sampling_level") in ADVANTAGE_WEIGHTED


def objective_for_level(level: str) -> Objective:
    """The objective an ``importance_sampling_level`` selects."""
    return OBJECTIVES[lookup(OBJECTIVE_BY_LEVEL, level, "importance_sampling_level")]


def clipped_surrogate(
    ratio: torch.Tensor, advantages: torch.Tensor, eps_low: float, eps_high: float
) -> torch.Tensor:
    """Per token, the smaller of r A and clip(r, 1 - eps_low, 1 + eps_high) A.

    Taking the smaller one means a ratio that has already moved far in the advantage's
    direction earns nothing more (and gets no gradient), while one that moved against it
    is never let off.
    """
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    clipped = ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    return torch.minimum(ratio * adv, clipped * adv)


def sequence_log_ratio(log_ratio: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Each row's mean log-ratio over its trained tokens, as a [B, 1] column."""
    per_row = (log_ratio * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
    return per_row.unsqueeze(1)


def _surrogate_loss(log_ratio, logps, advantages, clip: ClipRange) -> ObjectiveOutput:
    bound = clip.log_ratio
    ratio = torch.exp(log_ratio.clamp(-bound, bound)).expand_as(logps)
    return ObjectiveOutput(-clipped_surrogate(ratio, advantages, clip.low, clip.high), ratio)


@register_objective("ppo_clip", level="token", advantage_weighted=True)
def ppo_clip(logps, anchor_logps, advantages, mask, clip: ClipRange) -> ObjectiveOutput:
    """PPO's clipped surrogate on per-token ratios."""
    return _surrogate_loss(logps - anchor_logps, logps, advantages, clip)


@register_objective("gspo", level="sequence", advantage_weighted=True)
def gspo(logps, anchor_logps, advantages, mask, clip: ClipRange) -> ObjectiveOutput:
    """The clipped surrogate on one length-normalised ratio per sequence."""
    log_ratio = sequence_log_ratio(logps - anchor_logps, mask)
    return _surrogate_loss(log_ratio, logps, advantages, clip)
