"""Behaviour correction: how much each token sampled by an older policy is trusted.

Asynchronous rollouts are sampled by a policy a few versions behind the one being
trained. Decoupled PPO splits the correction in two: the clipped objective measures its
ratio against a *proximal* policy (near the current one, see :data:`PROXIMAL_POLICIES`),
and a separate importance weight ``pi_prox / pi_behaviour``, without gradient, corrects
for the policy that actually sampled the token. That weight can be capped, and tokens
whose behaviour policy is too far from the proximal one can be masked out entirely (M2:
the squared log-ratio above a threshold).

:func:`staleness_weights` is the row-level counterpart: a discount per policy version a
row is behind, applied by the reductions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from agentrl.rl.losses.metrics import masked_fraction
from agentrl.utils.registry import lookup, registrar

__all__ = [
    "PROXIMAL_POLICIES",
    "BehaviourCorrection",
    "behaviour_correction",
    "finite_logps",
    "no_correction",
    "register_proximal_policy",
    "resolve_prox_logps",
    "staleness_weights",
]


@dataclass
class BehaviourCorrection:
    """What the objective needs from the behaviour policy, and what to report about it.

    ``anchor_logps``: the log-probs the objective's ratio is measured against.
    ``weights``: per-token importance weights (no gradient). ``mask``: the trained tokens
    left after masking. ``stats``: 0-dim detached tensors, keyed by metric name.
    """

    anchor_logps: torch.Tensor
    weights: torch.Tensor
    mask: torch.Tensor
    stats: dict[str, torch.Tensor]


def finite_logps(logps: torch.Tensor) -> torch.Tensor:
    """Log-probs with NaN and infinities replaced by 0 (a missing behaviour log-prob)."""
    return torch.nan_to_num(logps, nan=0.0, posinf=0.0, neginf=0.0)


ProximalPolicy = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor]
PROXIMAL_POLICIES: dict[str, ProximalPolicy] = {}


# ``@register_proximal_policy(name)`` on
# ``fn(behaviour, current, token_versions, current_version) -> proximal log-probs``.
register_proximal_policy = registrar(PROXIMAL_POLICIES)


@register_proximal_policy("loglinear")
def loglinear_proximal(old, current, versions, current_version) -> torch.Tensor:
    """Move in log space from the behaviour policy (version v) towards the current one
    (version V), to where version V - 1 would lie: alpha = (V-1-v) / max(V-v, 1), clamped to
    [0, 1]. Fresh tokens (v = V) and observation tokens (v < 0) keep the behaviour log-prob.
    """
    cur = finite_logps(current.detach())
    v = versions.to(old.dtype)
    target = float(max(int(current_version) - 1, 0))
    alpha = ((target - v) / (float(current_version) - v).clamp(min=1.0)).clamp(0.0, 1.0)
    return torch.where(versions >= 0, old + alpha * (cur - old), old)


@register_proximal_policy("behavior")
def behaviour_as_proximal(old, current, versions, current_version) -> torch.Tensor:
    """The behaviour policy itself: plain PPO on stale data."""
    return old


def resolve_prox_logps(
    behavior_logps: torch.Tensor,
    current_logps: torch.Tensor,
    token_versions: torch.Tensor,
    current_version: int,
    method: str = "loglinear",
) -> torch.Tensor:
    """Log-probs of the proximal policy ``method`` (no gradient flows through them)."""
    fn = lookup(PROXIMAL_POLICIES, method, "prox_logp_method")
    return fn(finite_logps(behavior_logps), current_logps, token_versions, current_version)


def no_correction(behavior_logps: torch.Tensor, mask: torch.Tensor) -> BehaviourCorrection:
    """On-policy PPO: the ratio is taken against the behaviour policy, every weight is 1."""
    old = finite_logps(behavior_logps)
    zero = mask.new_zeros(())
    stats = {"policy/behav_imp_weight_cap_frac": zero, "policy/m2_mask_frac": zero}
    return BehaviourCorrection(old, torch.ones_like(old), mask, stats)


def behaviour_correction(
    behavior_logps: torch.Tensor,
    logps: torch.Tensor,
    mask: torch.Tensor,
    *,
    token_versions: torch.Tensor | None,
    current_version: int,
    method: str,
    weight_cap: float,
    m2_threshold: float,
    log_ratio_clip: float,
) -> BehaviourCorrection:
    """Decoupled PPO: proximal anchor, capped behaviour weights, optional M2 mask.

    Without ``token_versions`` every token counts as fresh (version ``current_version``).
    The fractions of capped and masked tokens are measured on the incoming ``mask``.
    """
    old = finite_logps(behavior_logps)
    if token_versions is None:
        token_versions = torch.full_like(old, int(current_version), dtype=torch.long)
    prox = resolve_prox_logps(old, logps, token_versions, current_version, method)
    weights = torch.exp((prox - old).clamp(-log_ratio_clip, log_ratio_clip)).detach()
    zero = mask.new_zeros(())
    cap_frac = m2_frac = zero
    if weight_cap > 0:
        cap_frac = masked_fraction(weights > weight_cap, mask)
        weights = weights.clamp(max=weight_cap)
    if m2_threshold > 0:
        keep = ((old - prox).pow(2) <= m2_threshold).float()
        m2_frac = masked_fraction(keep == 0, mask)
        mask = mask * keep
    stats = {"policy/behav_imp_weight_cap_frac": cap_frac, "policy/m2_mask_frac": m2_frac}
    return BehaviourCorrection(prox, weights, mask, stats)


def staleness_weights(
    row_versions: torch.Tensor, current_version: int, discount: float
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-row weight discount**(versions behind), discount clamped to [0, 1].

    Older rollouts were sampled further from the policy being trained, so their gradient
    is trusted less. Returns the weights and their summary as 0-dim tensors.
    """
    staleness = (int(current_version) - row_versions.long()).clamp(min=0).float()
    d = min(max(float(discount), 0.0), 1.0)
    weights = (
        torch.full_like(staleness, d).pow(staleness) if d < 1.0 else torch.ones_like(staleness)
    )
    return weights, {
        "async/row_staleness_mean": _mean_or_zero(staleness),
        "async/row_weight_mean": _mean_or_zero(weights),
    }


def _mean_or_zero(values: torch.Tensor) -> torch.Tensor:
    return values.mean() if values.numel() else values.new_zeros(())
