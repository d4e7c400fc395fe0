"""Loss reductions, registered by name (``--loss_reduction``).

A reduction turns the per-token loss [B, L] into one number. Each returns a
(numerator, denominator) pair of tensors, so that a micro-batch contributes its
numerator over the denominator of the whole batch and the micro-batches add up to the
full-batch loss exactly. Denominators stay on the device: reading them on the host would
stall the accelerator once per micro-batch.

``weights`` is one weight per row (staleness discount; ones when not discounting).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from agentrl.utils.registry import lookup, registrar

__all__ = ["REDUCTIONS", "reduce_loss", "reduction_denominator", "register_reduction"]

Reduction = Callable[..., tuple[torch.Tensor, torch.Tensor]]
REDUCTIONS: dict[str, Reduction] = {}


# ``@register_reduction(name)`` on
# ``fn(loss, mask, weights, *, max_completion_length, global_tokens) -> (num, den)``.
register_reduction = registrar(REDUCTIONS)


def _at_least_one(value: torch.Tensor) -> torch.Tensor:
    return value.clamp(min=1.0)


def _constant(like: torch.Tensor, value: float) -> torch.Tensor:
    return torch.tensor(float(value), dtype=like.dtype, device=like.device)


@register_reduction("token")
def token_mean(loss, mask, weights, **_: object) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted mean over every trained token of the batch (row weights per token)."""
    weighted = mask * weights.unsqueeze(1)
    return (loss * weighted).sum(), _at_least_one(weighted.sum())


@register_reduction("sequence")
def sequence_mean(loss, mask, weights, **_: object) -> tuple[torch.Tensor, torch.Tensor]:
    """Token mean within each row, then a weighted mean over the rows that have tokens."""
    counts = mask.sum(dim=1)
    rows = (loss * mask).sum(dim=1) / counts.clamp(min=1.0)
    w = weights * (counts > 0).to(weights.dtype)
    return (rows * w).sum(), _at_least_one(w.sum())


@register_reduction("grpo")
def row_mean(loss, mask, weights, **_: object) -> tuple[torch.Tensor, torch.Tensor]:
    """Token mean within each row, then a plain mean over all rows (empty rows add 0)."""
    rows = (loss * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
    return (rows * weights).sum(), _constant(loss, max(loss.size(0), 1))


@register_reduction("bnpo")
def batch_token_mean(loss, mask, weights, **_: object) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted token sum over this batch's (unweighted) trained-token count."""
    return (loss * mask * weights.unsqueeze(1)).sum(), _at_least_one(mask.sum())


@register_reduction("dr_grpo")
def fixed_length_sum(loss, mask, weights, *, max_completion_length: int, **_: object):
    """Token sum over rows x max_completion_length: long answers are not averaged down."""
    if max_completion_length < 1:
        raise ValueError("dr_grpo needs max_completion_length >= 1")
    num = (loss * mask * weights.unsqueeze(1)).sum()
    return num, _constant(loss, max(loss.size(0), 1) * int(max_completion_length))


@register_reduction("dapo")
def step_token_mean(loss, mask, weights, *, global_tokens=None, **_: object):
    """Token sum over the trained-token count of the whole step (all micro-batches)."""
    if global_tokens is None:
        total = mask.sum()
    else:
        total = torch.as_tensor(global_tokens, dtype=loss.dtype, device=loss.device)
    return (loss * mask * weights.unsqueeze(1)).sum(), _at_least_one(total)


def reduce_loss(
    per_token_loss: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    row_weights: torch.Tensor | None = None,
    *,
    max_completion_length: int = 0,
    global_tokens: torch.Tensor | float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, numerator, denominator) of ``mode``; loss = numerator / denominator."""
    fn = lookup(REDUCTIONS, mode, "loss_reduction")
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
    global_tokens: torch.Tensor | float | None = None,
) -> torch.Tensor:
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
