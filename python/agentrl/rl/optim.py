"""Optimisation: AdamW, cosine schedule, micro-batches, gradient accumulation, safe steps.

One training step may be split into micro-batches (bounded activation memory) and an
optimizer step may span several training steps (gradient accumulation). Two promises:

- Micro-batching does not change the objective: each micro-batch contributes its loss's
  numerator over the whole batch's denominator (rows for grpo/dr_grpo, tokens for bnpo;
  likewise for the other reductions), so the contributions sum to the full-batch loss.
  The rows are cut in `agentrl.training.minibatch`; their metrics merge here
  (:func:`merge_microbatch_metrics`).
- A step whose loss or gradient is not finite is skipped and reported, and nothing else
  moves: the parameters, the optimizer state, the scheduler and the gradient already
  accumulated from earlier steps stay exactly as they were. The gradient of earlier
  steps is set aside while a step runs and added back only if the step was clean.

A model held in bfloat16 or float16 trains on float32 master weights (the mixed-precision
recipe of DeepSpeed and Megatron): AdamW, its state and the gradient clipping work on
float32 copies, and the model's weights are rounded copies of them after each step. A
learning rate of 1e-6 moves a bfloat16 weight of 0.02 by far less than its rounding step
(about 1e-4), so without masters such updates would vanish.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch.optim.lr_scheduler import CosineAnnealingLR, LambdaLR, LRScheduler

from agentrl.utils.options import option
from agentrl.utils.schedule import lr_factor
from agentrl.utils.tensors import all_finite

__all__ = [
    "OptimConfig",
    "Optimization",
    "StepReport",
    "build_optimizer",
    "build_scheduler",
    "clip_and_step",
    "load_masters",
    "master_weights",
    "merge_microbatch_metrics",
    "step_on_masters",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OptimConfig:
    """Optimizer options (the ``optim`` section of the run's config)."""

    SECTION: ClassVar[str] = "optim"

    learning_rate: float = option(
        2e-7, "AdamW peak rate (cosine to a tenth)", check=">0", common=True
    )
    weight_decay: float = option(0.01, "AdamW weight decay", check=">=0")
    adam_beta1: float = option(0.9, "AdamW first-moment decay", check="[0,1]")
    adam_beta2: float = option(0.95, "AdamW second-moment decay", check="[0,1]")
    adam_epsilon: float = option(
        1e-8, "AdamW epsilon (larger: damps tiny-gradient weights)", check=">0"
    )
    accumulation_steps: int = option(2, "training steps per optimizer step", check=">=1")
    flush_accumulation: bool = option(
        False,
        "at the run's last step, apply a partial accumulation window (its gradient averaged "
        "over its steps) instead of keeping it for a resume",
    )
    grad_clip: float = option(0.5, "gradient-norm clip (0: off)", check=">=0")
    warmup_steps: int = option(0, "optimizer steps of linear lr warm-up", check=">=0")
    min_lr_ratio: float = option(
        0.1, "the rate at the end of the run, as a share of the peak (1: constant)", check="[0,1]"
    )
    micro_batch_size: int = option(0, "rows per forward pass (0: whole batch)", check=">=0")
    ppo_epochs: int = option(1, "passes over each rollout batch (PPO epochs)", check=">=1")
    num_mini_batches: int = option(
        1,
        "optimizer updates per pass: the batch's rows cut into this many parts",
        check=">=1",
        common=True,
    )


def build_optimizer(
    model: torch.nn.Module | Sequence[torch.nn.Parameter], config: OptimConfig
) -> torch.optim.AdamW:
    """AdamW over the trainable parameters, betas (0.9, 0.95) by default.

    A larger ``adam_epsilon`` damps the steps of weights whose gradients are tiny (Adam
    otherwise moves every weight by about ``lr``, noise or not): the update of a weight
    with gradient RMS well below epsilon shrinks towards plain momentum SGD.
    """
    return torch.optim.AdamW(
        _params(model),
        lr=config.learning_rate,
        betas=(config.adam_beta1, config.adam_beta2),
        eps=config.adam_epsilon,
        weight_decay=config.weight_decay,
    )


def build_scheduler(
    optimizer: torch.optim.Optimizer, total_steps: int, config: OptimConfig
) -> LRScheduler:
    """Cosine decay over the run's optimizer steps, down to ``min_lr_ratio`` of the peak
    rate (a tenth by default; 1.0 holds the rate constant, for a short run that should not
    spend half its steps at a fraction of it).

    With ``warmup_steps`` the rate first climbs linearly to its peak: a fresh Adam's
    first updates move every weight by about ``lr`` whatever the gradient's size (its
    second-moment estimate has seen one sample), which a warm-started policy may not
    survive at full rate.
    """
    t_max = max(1, math.ceil(max(int(total_steps), 1) / max(1, config.accumulation_steps)))
    warmup = max(0, int(config.warmup_steps))
    floor = float(config.min_lr_ratio)
    if warmup == 0 and floor == 0.1:  # the published runs' schedule, kept to the bit
        return CosineAnnealingLR(optimizer, T_max=t_max, eta_min=config.learning_rate / 10)

    return LambdaLR(optimizer, lambda step: lr_factor(step, t_max, warmup, floor))


def merge_microbatch_metrics(parts: Sequence[tuple[dict[str, Any], Any, Any]]) -> dict[str, Any]:
    """Combine (metrics, row share, token share) of each micro-batch into batch metrics.

    Clip fractions and KL saturation are fractions of tokens, so they are averaged by
    token share; ``*_max``/``*_min`` keys take the max/min; everything else by row share
    (percentiles merged this way are an approximation). Values and shares may be floats
    or 0-dim tensors; tensors stay on their device (no host read per micro-batch).
    """
    merged: dict[str, Any] = {}
    for metrics, row_share, token_share in parts:
        for key, value in metrics.items():
            if key.endswith("_max") or key.endswith("_min"):
                merged[key] = _extreme(merged.get(key), value, key.endswith("_max"))
                continue
            token_level = "clip_frac" in key or key.endswith("_saturation")
            share = token_share if token_level else row_share
            merged[key] = merged.get(key, 0.0) + share * value
    return merged


def _extreme(current: Any, value: Any, largest: bool) -> Any:
    if current is None:
        return value
    if torch.is_tensor(current) or torch.is_tensor(value):
        pick = torch.maximum if largest else torch.minimum
        return pick(torch.as_tensor(current), torch.as_tensor(value))
    return max(current, value) if largest else min(current, value)


def _params(model_or_params: torch.nn.Module | Sequence[torch.nn.Parameter]):
    if isinstance(model_or_params, torch.nn.Module):
        return [p for p in model_or_params.parameters() if p.requires_grad]
    return list(model_or_params)


def master_weights(params: Sequence[torch.nn.Parameter]) -> list[torch.Tensor] | None:
    """Float32 copies of half-precision trainable weights (float32 ones serve as their own);
    None when every weight is already float32."""
    if all(p.dtype == torch.float32 for p in params):
        return None
    return [
        p if p.dtype == torch.float32 else p.detach().float().requires_grad_(True) for p in params
    ]


def _grads_finite(params: Sequence[torch.nn.Parameter]) -> bool:
    """True when every gradient is finite; one host read for all parameters."""
    return all_finite(p.grad for p in params if p.grad is not None)


def clip_and_step(
    params: Sequence[torch.nn.Parameter],
    optimizer: torch.optim.Optimizer,
    scheduler: Any | None,
    grad_clip: float,
) -> tuple[bool, float]:
    """Clip, then step optimizer and scheduler; on a non-finite gradient step nothing.

    Returns (stepped, gradient norm before clipping). The gradient is cleared either way.
    """
    grad_norm = 0.0
    if grad_clip > 0:
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, grad_clip).item())
    # A finite norm of all gradients means every gradient is finite (clipping scales them
    # by at most 1); without clipping they are checked one by one.
    finite = math.isfinite(grad_norm) and (grad_clip > 0 or _grads_finite(params))
    if not finite:
        optimizer.zero_grad(set_to_none=True)
        return False, grad_norm
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return True, grad_norm


def step_on_masters(
    params: Sequence[torch.nn.Parameter],
    masters: Sequence[torch.Tensor] | None,
    optimizer: torch.optim.Optimizer,
    scheduler: Any | None,
    grad_clip: float,
) -> tuple[bool, float]:
    """`clip_and_step` on the weights, or (``masters``: `master_weights`) on their float32
    masters, the gradients moved there first and the stepped values rounded back."""
    if masters is None:
        return clip_and_step(params, optimizer, scheduler, grad_clip)
    for p, master in zip(params, masters, strict=True):
        grad, p.grad = p.grad, None
        master.grad = None if grad is None else grad.float()
    stepped, norm = clip_and_step(masters, optimizer, scheduler, grad_clip)
    if stepped:
        with torch.no_grad():
            for p, master in zip(params, masters, strict=True):
                if master is not p:
                    p.copy_(master)
    return stepped, norm


def load_masters(
    masters: Sequence[torch.Tensor] | None,
    saved: Sequence[torch.Tensor] | None,
    params: Sequence[torch.nn.Parameter],
) -> None:
    """Restore float32 masters from a checkpoint's ``saved`` copies, or (a checkpoint
    without them) from the weights just loaded."""
    if masters is None:
        return
    with torch.no_grad():
        for master, value in zip(masters, saved or params, strict=True):
            master.copy_(value)


@dataclass
class StepReport:
    stepped: bool  # the optimizer moved the weights at the end of this step
    skipped: str | None  # why this step's gradient was thrown away, if it was
    grad_norm: float
    loss: float  # sum of the weighted micro-batch losses that were back-propagated
    opt_step: int
    lr: float


class Optimization:
    """AdamW + cosine schedule + accumulation over training steps, with safe skipping.

    Per training step: :meth:`begin`, then :meth:`backward` once per micro-batch with
    its weight (stop when it returns False), then :meth:`finish`. The optimizer steps
    after ``accumulation_steps`` clean training steps.
    """

    def __init__(self, model: torch.nn.Module, config: OptimConfig, total_steps: int) -> None:
        self.config = config
        self.params = _params(model)
        self.masters = master_weights(self.params)
        self.optimizer = build_optimizer(self.masters or self.params, config)
        self.scheduler = build_scheduler(self.optimizer, total_steps, config)
        self.opt_step = 0
        self.pending = 0  # clean training steps accumulated since the last optimizer step
        self._stash: list[torch.Tensor | None] | None = None
        self._bad: str | None = None
        self._loss: torch.Tensor | float = 0.0  # a tensor while a step runs: read once, in finish

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def begin(self) -> None:
        """Set the gradient accumulated so far aside, so this step's can be judged alone."""
        self._stash = [p.grad for p in self.params]
        for p in self.params:
            p.grad = None
        self._bad, self._loss = None, 0.0

    def backward(self, loss: torch.Tensor, weight: float = 1.0) -> bool:
        """Back-propagate weight * loss / accumulation_steps; False if not finite (no backward)."""
        if self._stash is None:
            raise RuntimeError("Optimization.backward called outside begin()/finish()")
        if self._bad is not None:
            return False
        if not bool(torch.isfinite(loss.detach()).all()):
            self._bad = f"non-finite loss ({float(loss.detach().float().sum())})"
            return False
        scaled = loss * (float(weight) / max(1, self.config.accumulation_steps))
        scaled.backward()
        self._loss = self._loss + loss.detach().double() * float(weight)
        return True

    def finish(self, skip: str | None = None) -> StepReport:
        """Keep or discard this step's gradient, then step the optimizer when a window is full.

        ``skip`` discards the step for a caller's reason (e.g. the hard KL stop).
        """
        if self._stash is None:
            raise RuntimeError("Optimization.finish called without begin()")
        reason = skip or self._bad
        if reason is None and not _grads_finite(self.params):
            reason = "non-finite gradient"
        stash, self._stash = self._stash, None
        self._loss = float(self._loss)
        for p, old in zip(self.params, stash, strict=True):
            if reason is not None:
                p.grad = old
            elif old is not None:
                p.grad = old if p.grad is None else p.grad.add_(old)
        if reason is not None:
            logger.warning("training step skipped: %s", reason)
            return StepReport(False, reason, 0.0, self._loss, self.opt_step, self.lr)
        self.pending += 1
        if self.pending < max(1, self.config.accumulation_steps):
            return StepReport(False, None, 0.0, self._loss, self.opt_step, self.lr)
        self.pending = 0
        stepped, norm = self._clip_and_step()
        if not stepped:
            logger.warning("optimizer step skipped: non-finite accumulated gradient")
            return StepReport(
                False, "non-finite gradient norm", norm, self._loss, self.opt_step, self.lr
            )
        self.opt_step += 1
        return StepReport(True, None, norm, self._loss, self.opt_step, self.lr)

    def flush(self) -> StepReport | None:
        """Step on a partial accumulation window, its gradient rescaled to the mean over
        the steps it holds (each step back-propagated 1/``accumulation_steps``); None when
        no step is pending."""
        if self.pending == 0:
            return None
        scale = max(1, self.config.accumulation_steps) / self.pending
        for p in self.params:
            if p.grad is not None:
                p.grad.mul_(scale)
        self.pending = 0
        stepped, norm = self._clip_and_step()
        if not stepped:
            logger.warning("optimizer step skipped: non-finite accumulated gradient")
            return StepReport(False, "non-finite gradient norm", norm, 0.0, self.opt_step, self.lr)
        self.opt_step += 1
        return StepReport(True, None, norm, 0.0, self.opt_step, self.lr)

    def _clip_and_step(self) -> tuple[bool, float]:
        return step_on_masters(
            self.params, self.masters, self.optimizer, self.scheduler, self.config.grad_clip
        )

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume mid-run, accumulated gradient included."""
        grads = None
        if self.pending > 0:
            grads = [None if p.grad is None else p.grad.detach().cpu().clone() for p in self.params]
        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "opt_step": self.opt_step,
            "pending": self.pending,
            "pending_grads": grads,
            "master_weights": None
            if self.masters is None
            else [m.detach().cpu().clone() for m in self.masters],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.opt_step = int(state["opt_step"])
        self.pending = int(state.get("pending", 0))
        load_masters(self.masters, state.get("master_weights"), self.params)
        grads = state.get("pending_grads")
        for i, p in enumerate(self.params):
            g = grads[i] if grads else None
            p.grad = None if g is None else g.to(device=p.device, dtype=p.dtype).clone()
