"""KL-to-reference estimators, registered by name (``--kl_estimator``).

Each estimator maps ``delta = log pi_ref - log pi`` (per token) to a per-token estimate
of KL(pi || pi_ref) whose expectation under the sampling policy is the true divergence
(k1) or close to it with lower variance (k2, k3).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from agentrl.utils.registry import lookup, registrar

__all__ = ["KL_ESTIMATORS", "MAX_KL_LOG_RATIO", "kl_penalty", "register_kl_estimator"]

# Reference/policy log-ratio above which exp() would overflow float32 long before the
# penalty means anything; tokens beyond it are counted as saturated.
MAX_KL_LOG_RATIO = 20.0

KLEstimator = Callable[[torch.Tensor], torch.Tensor]
KL_ESTIMATORS: dict[str, KLEstimator] = {}


# ``@register_kl_estimator(name)`` on ``fn(delta) -> per-token KL``.
register_kl_estimator = registrar(KL_ESTIMATORS)


@register_kl_estimator("k1")
def k1(delta: torch.Tensor) -> torch.Tensor:
    """log pi - log pi_ref: unbiased, but single tokens can be negative."""
    return -delta


@register_kl_estimator("k2")
def k2(delta: torch.Tensor) -> torch.Tensor:
    """Half the squared log-ratio: non-negative, biased away from small divergences."""
    return 0.5 * delta.pow(2)


@register_kl_estimator("k3")
def k3(delta: torch.Tensor) -> torch.Tensor:
    """e^delta - 1 - delta: unbiased and non-negative.

    Written with ``expm1`` so that small deltas, where the estimate behaves like
    delta^2 / 2, keep their precision instead of vanishing in 1 - 1; the log-ratio is
    bounded by :data:`MAX_KL_LOG_RATIO` so a diverged token stays finite.
    """
    bounded = delta.clamp(max=MAX_KL_LOG_RATIO)
    return (torch.expm1(bounded) - bounded).clamp(min=0.0)


def kl_penalty(
    logps: torch.Tensor, ref_logps: torch.Tensor, estimator: str = "k3"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token KL(pi || pi_ref) estimate and the mask of saturated tokens.

    Saturated tokens are those past :data:`MAX_KL_LOG_RATIO`; they are reported so that
    a run drifting away from its reference shows up in the metrics.
    """
    fn = lookup(KL_ESTIMATORS, estimator, "kl_estimator")
    delta = ref_logps.detach() - logps
    return fn(delta), delta.detach() > MAX_KL_LOG_RATIO
