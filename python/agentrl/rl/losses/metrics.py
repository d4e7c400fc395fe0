"""Loss diagnostics as 0-dim detached tensors.

Nothing here reads a value on the host: a training step gathers these tensors over its
micro-batches and converts them to floats once (see ``agentrl.training.step``), so the
accelerator is not stalled once per metric per micro-batch.
"""

from __future__ import annotations

import torch

__all__ = ["masked_fraction", "masked_mean", "masked_stats", "policy_metrics"]

_QUANTILES = (("p05", 0.05), ("p50", 0.5), ("p95", 0.95))


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over mask == 1; 0 when the mask is empty (denominator floored at 1)."""
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def masked_fraction(condition: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Share of the masked tokens where ``condition`` holds (0 when the mask is empty)."""
    return masked_mean(condition.float(), mask)


@torch.no_grad()
def masked_stats(values: torch.Tensor, mask: torch.Tensor, prefix: str) -> dict[str, torch.Tensor]:
    """Mean and 5/50/95th percentiles of the masked values (all 0 when none).

    Percentiles interpolate linearly between order statistics, as ``torch.quantile``
    does; the masked-out values are sorted to the end instead of being dropped, so the
    shapes, and hence the work, never depend on the data.
    """
    flat = values.detach().float().reshape(-1)
    keep = mask.reshape(-1) > 0
    count = keep.sum()
    ordered = torch.sort(torch.where(keep, flat, torch.full_like(flat, float("inf")))).values
    last = (count - 1).clamp(min=0)
    total = torch.where(keep, flat, torch.zeros_like(flat)).sum()
    out = {f"{prefix}_mean": total / count.clamp(min=1).to(flat.dtype)}
    for name, q in _QUANTILES:
        rank = q * last.to(flat.dtype)
        below, above = rank.floor().long(), rank.ceil().long()
        low, high = ordered[below], ordered[above]
        value = torch.lerp(low, high, rank - below.to(flat.dtype))
        out[f"{prefix}_{name}"] = torch.where(count > 0, value, flat.new_zeros(()))
    return out


@torch.no_grad()
def policy_metrics(
    logps: torch.Tensor,
    behavior_logps: torch.Tensor,
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    kl: torch.Tensor,
    saturated: torch.Tensor,
    eps_low: float,
    eps_high: float,
) -> dict[str, torch.Tensor]:
    """Clip fractions, KL to the reference and to the behaviour policy, lengths.

    ``clip_frac_low``/``_high`` count tokens whose ratio left the band on the side where
    clipping removes the gradient; ``ratio_clip_frac`` counts every token outside it.
    """
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    on = mask.bool()
    below, above = ratio < 1.0 - eps_low, ratio > 1.0 + eps_high
    low, high = below & (adv < 0) & on, above & (adv > 0) & on
    counts = mask.sum(dim=1)
    drift = logps.detach() - behavior_logps
    kl = kl.detach()
    approx_kl = masked_mean(drift, mask)
    return {
        "policy/kl_ref": masked_mean(kl, mask),
        "policy/kl_ref_row_mean": ((kl * mask).sum(dim=1) / counts.clamp(min=1.0)).mean(),
        "policy/kl_ref_saturation": masked_fraction(saturated & on, mask),
        "policy/approx_kl_old": approx_kl,
        "policy/approx_kl_old_abs": approx_kl.abs(),
        "policy/old_current_abs_delta": masked_mean(drift.abs(), mask),
        "policy/ratio_clip_frac": masked_fraction((below | above) & on, mask),
        "policy/clip_frac_low": masked_fraction(low, mask),
        "policy/clip_frac_high": masked_fraction(high, mask),
        "policy/clip_frac_total": masked_fraction(low | high, mask),
        "policy/valid_completion_rows": (counts > 0).float().mean(),
        "length/avg_completion_tokens": counts.mean(),
    }
