"""Policy losses: objective x reduction x KL estimator, each a small pure function.

All per-token tensors are [B, L] in the shifted layout of :mod:`agentrl.rl.pack`
(position t scores token t + 1); ``mask`` is 1 where a generated token is trained on.

- Objective: PPO's clipped surrogate with separate lower/upper widths (``epsilon``,
  ``epsilon_high``: DAPO's clip-higher), on a token-level ratio or GSPO's
  sequence-level one. Decoupled PPO (the first seed) measures the ratio against a
  *proximal* policy between the behaviour policy and the current one, and corrects
  for the behaviour policy with a separate, capped, gradient-free importance weight.
- Reduction (:data:`REDUCTIONS`): how per-token losses become one number. Each returns
  (numerator, denominator) so that micro-batches can be weighted by their share of the
  denominator and add up to the full-batch loss exactly.
- KL to the reference (:data:`KL_ESTIMATORS`): k1, k2 or k3; k3 in the overflow-safe
  ``expm1`` form, with the fraction of saturated tokens reported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

__all__ = [
    "KL_ESTIMATORS",
    "MAX_KL_LOG_RATIO",
    "REDUCTIONS",
    "LossConfig",
    "LossResult",
    "clipped_surrogate",
    "importance_log_weights",
    "kl_penalty",
    "masked_mean",
    "masked_stats",
    "policy_loss",
    "reduce_loss",
    "reduction_denominator",
    "resolve_prox_logps",
    "staleness_weights",
]

# Reference/policy log-ratio above which exp() would overflow float32 long before the
# penalty means anything; tokens beyond it are counted as saturated.
MAX_KL_LOG_RATIO = 20.0


@dataclass
class LossConfig:
    """Loss options under the seeds' flag names; defaults are the first seed's."""

    epsilon: float = 0.20
    epsilon_high: float | None = None  # None or <= 0: same as epsilon
    use_decoupled_ppo: bool = True
    prox_logp_method: str = "loglinear"
    behav_imp_weight_cap: float = 1.5
    m2_threshold: float = 0.0
    loss_reduction: str = "sequence"
    importance_sampling_level: str = "token"
    kl_estimator: str = "k3"
    max_completion_length: int = 192
    log_ratio_clip: float = 10.0

    @property
    def upper_epsilon(self) -> float:
        """The clip width above 1: ``epsilon_high`` when set (> 0), else ``epsilon``."""
        high = self.epsilon_high
        return float(high) if high is not None and high > 0 else float(self.epsilon)


@dataclass
class LossResult:
    """The differentiable loss, its reduction terms, the final mask and detached metrics."""

    loss: torch.Tensor
    numerator: torch.Tensor
    denominator: float
    per_token_loss: torch.Tensor
    mask: torch.Tensor
    metrics: dict[str, float] = field(default_factory=dict)


# ----------------------------- masked helpers -----------------------------


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over mask == 1; 0 when the mask is empty (denominator floored at 1)."""
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def masked_stats(values: torch.Tensor, mask: torch.Tensor, prefix: str) -> dict[str, float]:
    """Mean and 5/50/95th percentiles of the masked values (all 0 when none)."""
    with torch.no_grad():
        picked = values.detach()[mask.bool()].float()
        if picked.numel() == 0:
            return {f"{prefix}_{k}": 0.0 for k in ("mean", "p05", "p50", "p95")}
        q = torch.quantile(picked, torch.tensor([0.05, 0.5, 0.95], device=picked.device))
        return {
            f"{prefix}_mean": float(picked.mean().item()),
            f"{prefix}_p05": float(q[0].item()),
            f"{prefix}_p50": float(q[1].item()),
            f"{prefix}_p95": float(q[2].item()),
        }


def staleness_weights(
    row_versions: torch.Tensor, current_version: int, discount: float
) -> tuple[torch.Tensor, dict[str, float]]:
    """Per-row weight discount**(versions behind), discount clamped to [0, 1].

    Older rollouts were sampled further from the policy being trained, so their
    gradient is trusted less. Returns the weights and the seed's async metrics.
    """
    staleness = (int(current_version) - row_versions.long()).clamp(min=0).float()
    d = min(max(float(discount), 0.0), 1.0)
    weights = (
        torch.full_like(staleness, d).pow(staleness) if d < 1.0 else torch.ones_like(staleness)
    )
    return weights, {
        "async/row_staleness_mean": float(staleness.mean().item()) if staleness.numel() else 0.0,
        "async/row_weight_mean": float(weights.mean().item()) if weights.numel() else 0.0,
    }


# ----------------------------- objective parts -----------------------------


def resolve_prox_logps(
    behavior_logps: torch.Tensor,
    current_logps: torch.Tensor,
    token_versions: torch.Tensor,
    current_version: int,
    method: str = "loglinear",
) -> torch.Tensor:
    """Log-probs of the proximal policy for decoupled PPO (no gradient flows through).

    ``behavior``: the behaviour policy itself (plain PPO on stale data). ``loglinear``:
    interpolate in log space from the behaviour policy (version v) towards the current
    one (version V) to where version V - 1 would be: alpha = (V-1-v) / max(V-v, 1),
    clamped to [0, 1]. Fresh tokens (v = V) and observation tokens (v < 0) stay at the
    behaviour log-prob.
    """
    old = torch.nan_to_num(behavior_logps, nan=0.0, posinf=0.0, neginf=0.0)
    if method == "behavior":
        return old
    if method != "loglinear":
        raise ValueError(f"unknown prox_logp_method {method!r} (loglinear, behavior)")
    cur = torch.nan_to_num(current_logps.detach(), nan=0.0, posinf=0.0, neginf=0.0)
    v = token_versions.to(old.dtype)
    target = float(max(int(current_version) - 1, 0))
    alpha = ((target - v) / (float(current_version) - v).clamp(min=1.0)).clamp(0.0, 1.0)
    return torch.where(token_versions >= 0, old + alpha * (cur - old), old)


def importance_log_weights(log_ratio: torch.Tensor, mask: torch.Tensor, level: str) -> torch.Tensor:
    """Token-level log-ratios, or GSPO's per-sequence mean log-ratio as a [B, 1] column.

    The sequence form keeps its gradient path through every token's log-ratio.
    """
    if level == "token":
        return log_ratio
    if level == "sequence":
        per_row = (log_ratio * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return per_row.unsqueeze(1)
    raise ValueError(f"unknown importance_sampling_level {level!r} (token, sequence)")


def clipped_surrogate(
    ratio: torch.Tensor, advantages: torch.Tensor, eps_low: float, eps_high: float
) -> torch.Tensor:
    """PPO's pessimistic objective min(r A, clip(r, 1-eps_low, 1+eps_high) A), per token."""
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    clipped = ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    return torch.minimum(ratio * adv, clipped * adv)


KLEstimator = Callable[[torch.Tensor], torch.Tensor]
KL_ESTIMATORS: dict[str, KLEstimator] = {
    # delta = log pi_ref - log pi. k1 = -delta; k2 = delta^2 / 2; k3 = e^delta - 1 - delta.
    "k1": lambda delta: -delta,
    "k2": lambda delta: 0.5 * delta.pow(2),
    "k3": lambda delta: (
        torch.expm1(delta.clamp(max=MAX_KL_LOG_RATIO)) - delta.clamp(max=MAX_KL_LOG_RATIO)
    ).clamp(min=0.0),
}


def kl_penalty(
    logps: torch.Tensor, ref_logps: torch.Tensor, estimator: str = "k3"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token KL(pi || pi_ref) estimate and the mask of saturated tokens.

    k3 uses ``expm1`` (no cancellation near zero, where the true KL is quadratic) on a
    log-ratio bounded above by :data:`MAX_KL_LOG_RATIO`; tokens past the bound are the
    saturated ones, reported so that a diverging run is visible rather than hidden.
    """
    try:
        fn = KL_ESTIMATORS[estimator]
    except KeyError:
        raise ValueError(f"unknown kl_estimator {estimator!r} (k1, k2, k3)") from None
    delta = ref_logps.detach() - logps
    return fn(delta), delta.detach() > MAX_KL_LOG_RATIO


# ----------------------------- reductions -----------------------------

Reduction = Callable[..., tuple[torch.Tensor, float]]
REDUCTIONS: dict[str, Reduction] = {}


def _register(name: str) -> Callable[[Reduction], Reduction]:
    def add(fn: Reduction) -> Reduction:
        REDUCTIONS[name] = fn
        return fn

    return add


@_register("token")
def _token(loss, mask, weights, **_: object) -> tuple[torch.Tensor, float]:
    """First seed: staleness-weighted mean over all trained tokens of the batch."""
    wm = mask * weights.unsqueeze(1)
    return (loss * wm).sum(), max(float(wm.sum().item()), 1.0)


@_register("sequence")
def _sequence(loss, mask, weights, **_: object) -> tuple[torch.Tensor, float]:
    """First seed: token mean per row, then a staleness-weighted mean over non-empty rows."""
    counts = mask.sum(dim=1)
    rows = (loss * mask).sum(dim=1) / counts.clamp(min=1.0)
    w = weights * (counts > 0).to(weights.dtype)
    return (rows * w).sum(), max(float(w.sum().item()), 1.0)


@_register("grpo")
def _grpo(loss, mask, weights, **_: object) -> tuple[torch.Tensor, float]:
    """Second seed: token mean per row, then a mean over all rows (empty rows count as 0)."""
    rows = (loss * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
    return (rows * weights).sum(), float(max(loss.size(0), 1))


@_register("bnpo")
def _bnpo(loss, mask, weights, **_: object) -> tuple[torch.Tensor, float]:
    """Second seed: token sum over the batch's trained-token count."""
    return (loss * mask * weights.unsqueeze(1)).sum(), max(float(mask.sum().item()), 1.0)


@_register("dr_grpo")
def _dr_grpo(loss, mask, weights, *, max_completion_length: int, **_: object):
    """Second seed (Dr. GRPO): token sum over rows x max_completion_length, length-unbiased."""
    if max_completion_length < 1:
        raise ValueError("dr_grpo needs max_completion_length >= 1")
    num = (loss * mask * weights.unsqueeze(1)).sum()
    return num, float(max(loss.size(0), 1) * int(max_completion_length))


@_register("dapo")
def _dapo(loss, mask, weights, *, global_tokens: float | None = None, **_: object):
    """DAPO: token sum over the trained-token count of the whole step (all micro-batches)."""
    total = float(mask.sum().item()) if global_tokens is None else float(global_tokens)
    return (loss * mask * weights.unsqueeze(1)).sum(), max(total, 1.0)


def reduce_loss(
    per_token_loss: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    row_weights: torch.Tensor | None = None,
    *,
    max_completion_length: int = 0,
    global_tokens: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(loss, numerator, denominator) of ``mode``; loss = numerator / denominator."""
    try:
        fn = REDUCTIONS[mode]
    except KeyError:
        known = ", ".join(REDUCTIONS)
        raise ValueError(f"unknown loss_reduction {mode!r} ({known})") from None
    if row_weights is None:
        row_weights = torch.ones(per_token_loss.size(0), device=per_token_loss.device)
    num, den = fn(
        per_token_loss,
        mask,
        row_weights.to(per_token_loss.dtype),
        max_completion_length=max_completion_length,
        global_tokens=global_tokens,
    )
    return num / den, num, den


def reduction_denominator(
    mask: torch.Tensor,
    mode: str,
    row_weights: torch.Tensor | None = None,
    *,
    max_completion_length: int = 0,
    global_tokens: float | None = None,
) -> float:
    """The denominator ``mode`` divides by for this mask: a micro-batch's share of the loss."""
    zeros = torch.zeros_like(mask, dtype=torch.float32)
    return reduce_loss(
        zeros,
        mask.float(),
        mode,
        row_weights,
        max_completion_length=max_completion_length,
        global_tokens=global_tokens,
    )[2]


# ----------------------------- the loss -----------------------------


def policy_loss(
    logps: torch.Tensor,
    behavior_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: LossConfig,
    *,
    beta: float = 0.0,
    ref_logps: torch.Tensor | None = None,
    token_versions: torch.Tensor | None = None,
    current_version: int = 0,
    row_weights: torch.Tensor | None = None,
    global_tokens: float | None = None,
    entropy: torch.Tensor | None = None,
) -> LossResult:
    """The clipped (optionally decoupled) policy loss with KL penalty, reduced, with metrics.

    ``logps`` carries the gradient; ``behavior_logps`` are the sampler's; ``advantages``
    is one value per row. ``token_versions`` is needed by the ``loglinear`` proximal
    policy; ``entropy`` (per token, detached) is only reported.
    """
    mask = mask.float()
    old = torch.nan_to_num(behavior_logps, nan=0.0, posinf=0.0, neginf=0.0)
    lo, hi, lim = config.epsilon, config.upper_epsilon, config.log_ratio_clip
    denom0 = mask.sum().clamp(min=1.0)
    cap_frac = m2_frac = 0.0
    if config.use_decoupled_ppo:
        versions = token_versions
        if versions is None:  # no per-token versions: every token counts as fresh
            versions = torch.full_like(old, int(current_version), dtype=torch.long)
        prox = resolve_prox_logps(old, logps, versions, current_version, config.prox_logp_method)
        behav_w = torch.exp((prox - old).clamp(-lim, lim)).detach()
        if config.behav_imp_weight_cap > 0:
            cap_frac = float(
                ((behav_w > config.behav_imp_weight_cap).float() * mask).sum() / denom0
            )
            behav_w = behav_w.clamp(max=config.behav_imp_weight_cap)
        if config.m2_threshold > 0:
            # Drop tokens whose behaviour policy is too far from the proximal one (M2).
            keep = ((old - prox).pow(2) <= config.m2_threshold).float()
            m2_frac = float(((1.0 - keep) * mask).sum() / denom0)
            mask = mask * keep
    else:
        prox, behav_w = old, torch.ones_like(old)
    log_w = importance_log_weights(logps - prox, mask, config.importance_sampling_level)
    ratio = torch.exp(log_w.clamp(-lim, lim)).expand_as(logps)
    surrogate = behav_w * clipped_surrogate(ratio, advantages, lo, hi)
    per_token = -surrogate
    if ref_logps is not None:
        kl, saturated = kl_penalty(logps, ref_logps, config.kl_estimator)
    else:
        kl, saturated = torch.zeros_like(logps), torch.zeros_like(mask, dtype=torch.bool)
    if beta != 0.0 and ref_logps is not None:
        per_token = per_token + float(beta) * kl
    loss, num, den = reduce_loss(
        per_token,
        mask,
        config.loss_reduction,
        row_weights,
        max_completion_length=config.max_completion_length,
        global_tokens=global_tokens,
    )
    with torch.no_grad():
        metrics = _metrics(logps, old, ratio, advantages, mask, kl, saturated, lo, hi)
        metrics.update(
            {
                "loss/policy": float(loss.detach().item()),
                "policy/behav_imp_weight_cap_frac": cap_frac,
                "policy/m2_mask_frac": m2_frac,
            }
        )
        metrics.update(masked_stats(ratio, mask, "policy/ratio"))
        metrics.update(masked_stats(behav_w, mask, "policy/behav_weight"))
        if entropy is not None:
            metrics["policy/entropy"] = float(masked_mean(entropy.detach().float(), mask).item())
    return LossResult(loss, num, den, per_token, mask, metrics)


def _metrics(logps, old, ratio, advantages, mask, kl, saturated, lo, hi) -> dict[str, float]:
    """Clip fractions, KL to reference and to the behaviour policy, lengths."""
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    on = mask.bool()
    total = mask.sum().clamp(min=1.0)
    low = (ratio < 1.0 - lo) & (adv < 0) & on
    high = (ratio > 1.0 + hi) & (adv > 0) & on
    outside = ((ratio < 1.0 - lo) | (ratio > 1.0 + hi)) & on
    counts = mask.sum(dim=1)
    diff = (logps.detach() - old) * mask
    approx_kl = float(diff.sum() / total)
    return {
        "policy/kl_ref": float(((kl.detach() * mask).sum() / total).item()),
        "policy/kl_ref_row_mean": float(
            ((kl.detach() * mask).sum(dim=1) / counts.clamp(min=1.0)).mean().item()
        ),
        "policy/kl_ref_saturation": float(((saturated & on).float().sum() / total).item()),
        "policy/approx_kl_old": approx_kl,
        "policy/approx_kl_old_abs": abs(approx_kl),
        "policy/old_current_abs_delta": float((diff.abs().sum() / total).item()),
        "policy/ratio_clip_frac": float((outside.float().sum() / total).item()),
        "policy/clip_frac_low": float((low.float().sum() / total).item()),
        "policy/clip_frac_high": float((high.float().sum() / total).item()),
        "policy/clip_frac_total": float(((low | high).float().sum() / total).item()),
        "policy/valid_completion_rows": float((counts > 0).float().mean().item()),
        "length/avg_completion_tokens": float(counts.mean().item()),
    }
