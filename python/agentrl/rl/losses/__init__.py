"""Policy losses, composed from registered parts.

All per-token tensors are [B, L] in the shifted layout of :mod:`agentrl.rl.pack`
(position t scores token t + 1); ``mask`` is 1 where a generated token is trained on.

:func:`policy_loss` is the composition; each part is a pure tensor function:

1. behaviour correction (:mod:`.correction`): the log-probs the ratio is anchored to,
   per-token importance weights and the mask left after M2 (decoupled PPO), or the plain
   on-policy anchor;
2. objective (:data:`OBJECTIVES`, chosen by ``importance_sampling_level``): per-token loss;
3. KL to the reference (:data:`KL_ESTIMATORS`), added with coefficient ``beta``;
4. reduction (:data:`REDUCTIONS`): the per-token loss as numerator / denominator;
5. metrics (:mod:`.metrics`): 0-dim detached tensors, read on the host once per step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch

from agentrl.rl.losses.correction import (
    PROXIMAL_POLICIES,
    BehaviourCorrection,
    behaviour_correction,
    finite_logps,
    no_correction,
    register_proximal_policy,
    resolve_prox_logps,
    staleness_weights,
)
from agentrl.rl.losses.kl import KL_ESTIMATORS, MAX_KL_LOG_RATIO, kl_penalty, register_kl_estimator
from agentrl.rl.losses.metrics import masked_mean, masked_stats, policy_metrics
from agentrl.rl.losses.objectives import (
    OBJECTIVE_BY_LEVEL,
    OBJECTIVES,
    ClipRange,
    advantage_weighted,
    clipped_surrogate,
    objective_for_level,
    register_objective,
)
from agentrl.rl.losses.reductions import (
    REDUCTIONS,
    reduce_loss,
    reduction_denominator,
    register_reduction,
)
from agentrl.utils.options import option

__all__ = [
    "KL_ESTIMATORS",
    "MAX_KL_LOG_RATIO",
    "OBJECTIVES",
    "OBJECTIVE_BY_LEVEL",
    "PROXIMAL_POLICIES",
    "REDUCTIONS",
    "BehaviourCorrection",
    "ClipRange",
    "LossConfig",
    "LossResult",
    "advantage_weighted",
    "behaviour_correction",
    "clipped_surrogate",
    "kl_penalty",
    "masked_mean",
    "masked_stats",
    "no_correction",
    "objective_for_level",
    "policy_loss",
    "reduce_loss",
    "reduction_denominator",
    "register_kl_estimator",
    "register_objective",
    "register_proximal_policy",
    "register_reduction",
    "resolve_prox_logps",
    "staleness_weights",
]


@dataclass(frozen=True)
class LossConfig:
    """Loss options (the ``loss`` section of the run's config, with AdvantageConfig's)."""

    SECTION: ClassVar[str] = "loss"

    epsilon: float = option(0.20, "PPO clip width", check=">0")
    epsilon_high: float = option(0.0, "upper clip width, clip-higher (0: epsilon)", check=">=0")
    use_decoupled_ppo: bool = option(True, "decoupled PPO with a proximal policy")
    prox_logp_method: str = option("loglinear", "proximal log-probs", PROXIMAL_POLICIES)
    behav_imp_weight_cap: float = option(1.5, "cap of the behaviour importance weight", check=">=0")
    m2_threshold: float = option(
        0.0, "mask tokens with (behav - prox)^2 above (0: off)", check=">=0"
    )
    loss_reduction: str = option(
        "sequence", "how token losses are averaged over the batch", REDUCTIONS, common=True
    )
    importance_sampling_level: str = option(
        "token", "importance ratio per token or per sequence (GSPO)", OBJECTIVE_BY_LEVEL
    )
    kl_estimator: str = option("k3", "KL estimator", KL_ESTIMATORS)
    max_completion_length: int = option(
        0,
        "tokens one episode may generate, tool results included (0: no cap); dr_grpo's "
        "constant length (0: max_gen_len)",
        check=">=0",
    )
    # Not an option: the bound on |log ratio| before exp, against overflow.
    log_ratio_clip: float = 10.0

    @property
    def upper_epsilon(self) -> float:
        """The clip width above 1: ``epsilon_high`` when set (> 0), else ``epsilon``."""
        high = self.epsilon_high
        return float(high) if high is not None and high > 0 else float(self.epsilon)

    @property
    def clip(self) -> ClipRange:
        return ClipRange(float(self.epsilon), self.upper_epsilon, float(self.log_ratio_clip))


@dataclass
class LossResult:
    """The differentiable loss, its reduction terms, the final mask and detached metrics."""

    loss: torch.Tensor
    numerator: torch.Tensor
    denominator: torch.Tensor
    per_token_loss: torch.Tensor
    mask: torch.Tensor
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)


def correction_for(
    config: LossConfig,
    logps: torch.Tensor,
    behavior_logps: torch.Tensor,
    mask: torch.Tensor,
    token_versions: torch.Tensor | None,
    current_version: int,
) -> BehaviourCorrection:
    """The behaviour correction ``config`` asks for (none unless decoupled PPO is on)."""
    if not config.use_decoupled_ppo:
        return no_correction(behavior_logps, mask)
    return behaviour_correction(
        behavior_logps,
        logps,
        mask,
        token_versions=token_versions,
        current_version=current_version,
        method=config.prox_logp_method,
        weight_cap=config.behav_imp_weight_cap,
        m2_threshold=config.m2_threshold,
        log_ratio_clip=config.log_ratio_clip,
    )


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
    global_tokens: torch.Tensor | float | None = None,
    entropy: torch.Tensor | None = None,
) -> LossResult:
    """The configured objective, behaviour-corrected, plus beta x KL, reduced, with metrics.

    ``logps`` carries the gradient; ``behavior_logps`` are the sampler's; ``advantages``
    is one value per row. ``token_versions`` feeds the proximal policy; ``entropy`` (per
    token, detached) is only reported.
    """
    objective = objective_for_level(config.importance_sampling_level)
    fix = correction_for(
        config, logps, behavior_logps, mask.float(), token_versions, current_version
    )
    out = objective(logps, fix.anchor_logps, advantages, fix.mask, config.clip)
    per_token = fix.weights * out.per_token_loss
    if ref_logps is not None:
        kl, saturated = kl_penalty(logps, ref_logps, config.kl_estimator)
    else:
        kl, saturated = torch.zeros_like(logps), torch.zeros_like(fix.mask, dtype=torch.bool)
    if beta != 0.0 and ref_logps is not None:
        per_token = per_token + float(beta) * kl
    loss, num, den = reduce_loss(
        per_token,
        fix.mask,
        config.loss_reduction,
        row_weights,
        max_completion_length=config.max_completion_length,
        global_tokens=global_tokens,
    )
    clip = config.clip
    metrics = policy_metrics(
        logps,
        finite_logps(behavior_logps),
        out.ratio,
        advantages,
        fix.mask,
        kl,
        saturated,
        clip.low,
        clip.high,
    )
    metrics.update(fix.stats)
    metrics["loss/policy"] = loss.detach()
    metrics.update(masked_stats(out.ratio, fix.mask, "policy/ratio"))
    metrics.update(masked_stats(fix.weights, fix.mask, "policy/behav_weight"))
    if entropy is not None:
        metrics["policy/entropy"] = masked_mean(entropy.detach().float(), fix.mask)
    return LossResult(loss, num, den, per_token, fix.mask, metrics)
