"""Log-probs of the trained tokens only: the output layer runs where the loss looks.

A training row is a prompt plus a response, and the loss reads log-probs at response
positions only. The decoder must see every token, but the output projection (hidden ->
vocabulary logits), the softmax over the vocabulary and the entropy need not: for a small
model with a large vocabulary they are most of the work. So the decoder runs on the whole
row, and the output layer on the hidden states of masked positions alone. Log-probs (and
entropies) at other positions are returned as 0; every consumer multiplies by the mask.

Models where this split is not plain (mixture-of-experts with router losses, logit
soft-capping or scaling, wrappers such as peft or torch.compile) take the full-logits
path of `agentrl.rl.logprobs.sequence_logps`, with the same results.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
from torch.distributed.fsdp import FSDPModule

from agentrl.rl.logprobs import ForwardOutput, sanitize_logits, sequence_logps

# Config attributes that change logits after the output projection.
_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling")


def split_output_layer(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Linear] | None:
    """(decoder, output projection) when logits are exactly ``head(decoder(x))``, else None."""
    get_head = getattr(model, "get_output_embeddings", None)
    body = getattr(model, "model", None)
    if get_head is None or not isinstance(body, torch.nn.Module):
        return None
    head = get_head()
    if not isinstance(head, torch.nn.Linear) or head.bias is not None:
        return None
    config = getattr(model, "config", None)
    if config is None or any(getattr(config, k, None) for k in _LOGIT_TRANSFORMS):
        return None
    if getattr(config, "num_experts", 0) or getattr(config, "num_local_experts", 0):
        return None
    if type(model).__module__.startswith("peft"):
        return None
    if isinstance(model, FSDPModule):  # its root's forward must run (it gathers the root)
        return None
    return body, head


def masked_logps(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    mask: torch.Tensor,
    *,
    with_entropy: bool = False,
    autocast: Callable[[], AbstractContextManager[Any]] | None = None,
    temperature: float = 1.0,
) -> ForwardOutput:
    """Per-token log-probs [B, T-1] of ``input_ids[:, 1:]``, computed where ``mask`` > 0,
    under ``logits / temperature`` (1.0: the raw policy)."""
    parts = split_output_layer(model)
    if parts is None:
        return sequence_logps(model, input_ids, attention_mask, temperature=temperature,
                              with_entropy=with_entropy, autocast=autocast)  # fmt: skip
    body, head = parts
    with (autocast or nullcontext)():
        hidden = body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    where = mask > 0
    picked_hidden = hidden[:, :-1][where]
    with (autocast or nullcontext)():
        logits = head(picked_hidden)
    logits = sanitize_logits(logits)
    if temperature != 1.0:
        logits = logits / temperature
    targets = input_ids[:, 1:][where].clamp(min=0, max=logits.size(-1) - 1)
    norm = torch.logsumexp(logits, dim=-1)
    picked = logits.gather(1, targets.unsqueeze(1)).squeeze(1) - norm
    logps = torch.zeros(mask.shape, dtype=picked.dtype, device=picked.device)
    logps = logps.masked_scatter(where, picked)
    entropy = None
    if with_entropy:
        with torch.no_grad():
            logp_all = logits - norm.unsqueeze(1)
            values = -(logp_all.exp() * logp_all).sum(dim=-1)
            entropy = torch.zeros(mask.shape, dtype=values.dtype, device=values.device)
            entropy = entropy.masked_scatter(where, values)
    return ForwardOutput(logps=logps, entropy=entropy, aux_loss=None)


__all__ = ["masked_logps", "split_output_layer"]
