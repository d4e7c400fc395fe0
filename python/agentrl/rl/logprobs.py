"""Per-token log-probs (and entropy, MoE auxiliary loss) from one model forward pass.

Logits are sanitised (NaN -> 0, +-inf -> +-30, clamp to +-80) before normalising: one
bad activation must produce a large-but-finite loss that the optimiser's non-finite
check can reason about, not NaN everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch

__all__ = ["ForwardOutput", "sanitize_logits", "sequence_logps", "token_entropy"]


@dataclass
class ForwardOutput:
    logps: torch.Tensor  # [B, T-1] log pi(input_ids[:, t+1] | prefix), with grad
    entropy: torch.Tensor | None  # [B, T-1] detached, when asked for
    aux_loss: torch.Tensor | None  # scaled MoE load-balancing loss, when the model has one


def sanitize_logits(logits: torch.Tensor) -> torch.Tensor:
    """Float32 logits with NaN/inf replaced and the range clamped to +-80."""
    return torch.nan_to_num(logits.float(), nan=0.0, posinf=30.0, neginf=-30.0).clamp(-80.0, 80.0)


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of each position's next-token distribution (no gradient)."""
    with torch.no_grad():
        logp = torch.log_softmax(logits, dim=-1)
        return -(logp.exp() * logp).sum(dim=-1)


def _moe_kwargs(model: torch.nn.Module) -> tuple[dict[str, bool], float | None]:
    """Ask HF mixture-of-experts models for router logits; their aux loss is unscaled."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "output_router_logits"):
        return {}, None
    experts = getattr(config, "num_experts", 0) or getattr(config, "num_local_experts", 0)
    if not experts:
        return {}, None
    return {"output_router_logits": True}, float(getattr(config, "router_aux_loss_coef", 0.0))


def sequence_logps(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    autocast: Callable[[], AbstractContextManager[object]] | None = None,
) -> ForwardOutput:
    """Score every next token of ``input_ids`` under ``model``.

    ``temperature`` divides the logits first, for engines whose behaviour log-probs were
    taken at the sampling temperature; the default scores the raw policy distribution.
    """
    kwargs, aux_scale = _moe_kwargs(model)
    with (autocast or nullcontext)():
        out = model(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    logits = sanitize_logits(out.logits[:, :-1, :])
    if temperature != 1.0:
        logits = logits / max(float(temperature), 1e-6)
    targets = input_ids[:, 1:].clamp(min=0, max=logits.size(-1) - 1)
    picked = logits.gather(2, targets.unsqueeze(-1)).squeeze(-1)
    logps = picked - torch.logsumexp(logits, dim=-1)
    aux = getattr(out, "aux_loss", None)
    if aux is not None and aux_scale is not None:
        aux = aux * aux_scale
    if aux is not None and not torch.is_tensor(aux):
        aux = None
    entropy = token_entropy(logits) if with_entropy else None
    return ForwardOutput(logps=logps, entropy=entropy, aux_loss=aux)
