"""Adaptive KL coefficient and the hard KL stop.

The controller watches one drift metric (by default the mean |log pi - log pi_behaviour|
of the trained tokens), smooths it with an EMA, and every ``beta_update_interval``
optimizer steps nudges beta up when the EMA is above 1.25 x target or down when below
0.8 x target, by at most x1.12 per update (sqrt of the ratio, capped), within
[beta_min, beta_max]. The dead band and the small steps keep beta from oscillating.

The hard stop is the emergency brake: when the drift is ``hard_kl_stop_mult`` x target,
the step's update is skipped (and the caller says so) instead of moving further away.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from agentrl.utils.options import option

__all__ = [
    "CONTROL_METRICS",
    "BetaConfig",
    "BetaController",
    "control_metric_key",
    "hard_kl_stop",
    "update_beta",
]

# --beta_control_metric value -> metric key written by agentrl.rl.losses.policy_loss.
CONTROL_METRICS = {
    "old_current_abs_delta": "policy/old_current_abs_delta",
    "approx_kl_old": "policy/approx_kl_old_abs",
    "kl_ref": "policy/kl_ref",
}

_MAX_MULT = 1.12


@dataclass(frozen=True)
class BetaConfig:
    """KL control options (the ``kl`` section of the run's config)."""

    SECTION: ClassVar[str] = "kl"

    beta: float = option(0.03, "initial KL coefficient", check=">=0", common=True)
    beta_auto_tune: bool = option(True, "adapt beta towards kl_target")
    beta_control_metric: str = option(
        "old_current_abs_delta", "drift metric beta follows", CONTROL_METRICS
    )
    beta_update_interval: int = option(4, "optimizer steps between beta updates", check=">=1")
    beta_ema_decay: float = option(0.90, "EMA decay of the drift metric", check="[0,1]")
    kl_target: float = option(0.06, "drift the controller aims at", check=">0")
    beta_min: float = option(0.01, "lower bound of beta", check=">=0")
    beta_max: float = option(0.08, "upper bound of beta", check=">=0")
    hard_kl_stop_mult: float = option(
        8.0, "skip updates past mult x kl_target (0: off)", check=">=0"
    )


def _finite(x: Any, default: float) -> float:
    try:
        y = float(x)
    except (TypeError, ValueError):
        return default
    return y if math.isfinite(y) else default


def control_metric_key(name: str) -> str:
    """The metric key a ``beta_control_metric`` name reads (unknown names: the default)."""
    return CONTROL_METRICS.get(name, CONTROL_METRICS["old_current_abs_delta"])


def update_beta(
    beta: float, ema: float, observed: float, opt_step: int, config: BetaConfig
) -> tuple[float, float]:
    """(new beta, new EMA) after observing ``observed`` at optimizer step ``opt_step``."""
    observed = _finite(observed, 0.0)
    decay = min(max(float(config.beta_ema_decay), 0.0), 0.999)
    ema = observed if not math.isfinite(ema) else decay * ema + (1.0 - decay) * observed
    if not config.beta_auto_tune or opt_step % max(1, int(config.beta_update_interval)) != 0:
        return float(beta), float(ema)
    target = max(_finite(config.kl_target, 0.08), 1e-6)
    if ema > target * 1.25:
        ratio = min(max(ema / target, 1.0), _MAX_MULT * _MAX_MULT)
        beta = min(beta * max(min(math.sqrt(ratio), _MAX_MULT), 1.0), config.beta_max)
    elif ema < target * 0.80:
        ratio = min(max(target / max(ema, 1e-6), 1.0), _MAX_MULT * _MAX_MULT)
        beta = max(beta * min(max(1.0 / math.sqrt(ratio), 1.0 / _MAX_MULT), 1.0), config.beta_min)
    return float(beta), float(ema)


def hard_kl_stop(control_value: float, config: BetaConfig) -> bool:
    """True when the drift is past ``hard_kl_stop_mult`` x target (0 disables the stop)."""
    return (
        config.hard_kl_stop_mult > 0 and control_value > config.kl_target * config.hard_kl_stop_mult
    )


class BetaController:
    """Holds beta and its EMA across steps; its state goes into checkpoints."""

    def __init__(self, config: BetaConfig) -> None:
        self.config = config
        self.beta = float(config.beta)
        # The EMA starts at the target, so early noise moves beta slowly.
        self.ema = _finite(config.kl_target, 0.08)

    @property
    def metric_key(self) -> str:
        return control_metric_key(self.config.beta_control_metric)

    def control_value(self, metrics: dict[str, Any]) -> float:
        return _finite(metrics.get(self.metric_key, 0.0), 0.0)

    def should_stop(self, metrics: dict[str, Any]) -> str | None:
        """A message saying why this step's update must be skipped, or None."""
        value = self.control_value(metrics)
        if not hard_kl_stop(value, self.config):
            return None
        ref = _finite(metrics.get("policy/kl_ref", 0.0), 0.0)
        limit = self.config.kl_target * self.config.hard_kl_stop_mult
        return (
            f"KL too high: {self.metric_key}={value:.4f} > {limit:.4f} "
            f"(kl_ref={ref:.4f}); update skipped"
        )

    def update(self, metrics: dict[str, Any], opt_step: int) -> float:
        """Fold this step's control metric in after a successful optimizer step; returns the EMA."""
        self.beta, self.ema = update_beta(
            self.beta, self.ema, self.control_value(metrics), opt_step, self.config
        )
        return self.ema

    def state_dict(self) -> dict[str, float]:
        return {"beta": self.beta, "beta_ema": self.ema}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.beta = float(state["beta"])
        self.ema = float(state["beta_ema"])
