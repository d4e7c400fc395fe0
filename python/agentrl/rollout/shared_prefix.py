"""Decoding attention that reads a prompt prefix shared by every row once.

The G samples of a group start from the same prompt, and the prompts of a batch usually
open alike (system turn, tool list). Decoding one token for each row reads every row's
keys and values: on a small model that read is most of a decoding step, and it reads the
same prefix G (or batch-size) times. Here a fixed-size decoding cache
(`kv_cache.SharedPrefixCache`) holds that prefix once per layer and each row's own
positions after it; attention scores the one query of each row against both, and one
softmax over the two score blocks gives exactly the attention over the whole row (the
prefix comes first in every row, and no row masks any of it).

The model reaches this function through transformers' attention registry: `enable` sets the
model's attention implementation to ``agentrl_shared_prefix``, which is plain SDPA for every
call that does not pass ``shared_prefix_kv`` (prefill, training), so nothing else changes.
A model whose attention does not take that path (or passes options this function does not
implement) is caught by the engine's first-use check, which compares one step both ways.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

NAME = "agentrl_shared_prefix"
# Attention options this function does not implement; a model that sets any of them fails
# the engine's first-use check and decodes through its own attention.
_UNSUPPORTED = ("softcap", "sliding_window", "s_aux", "position_bias")


def shared_prefix_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention signature: ``query`` [B, H, q, D]; ``key``/``value`` each row's
    own positions [B, Hkv, T, D]. With ``shared_prefix_kv`` (per layer: keys and values
    [Hkv, S, D] every row starts with; empty: none) and one query position, attention covers
    prefix and own positions, key heads shared by query heads read in place (SDPA under
    ``torch.compile`` copies them per query head); anything else is SDPA."""
    prefix: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = kwargs.pop(
        "shared_prefix_kv", None
    )
    if prefix is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    unsupported = [name for name in _UNSUPPORTED if kwargs.get(name) is not None]
    if query.size(2) != 1 or dropout or unsupported:
        raise ValueError(
            "shared-prefix attention decodes one position at a time without "
            f"{', '.join(unsupported) or 'dropout'}"
        )
    batch, heads, _, dim = query.shape
    kv_heads = key.size(1)
    scale = scaling if scaling is not None else dim**-0.5
    # Query head h reads key head h // groups, as repeat_kv lays them out.
    q = query.reshape(batch, kv_heads, heads // kv_heads, dim)
    own = torch.einsum("bkgd,bktd->bkgt", q, key) * scale
    if attention_mask is not None:
        # [B or 1, 1, 1, T]: broadcasts over key heads and their query groups.
        if attention_mask.dtype == torch.bool:
            own = own.masked_fill(~attention_mask, float("-inf"))
        else:
            own = own + attention_mask
    if not prefix:  # no shared block: each row's own positions are the whole row
        weights = torch.softmax(own.float(), dim=-1).to(query.dtype)
        out = torch.einsum("bkgt,bktd->bkgd", weights, value)
        return out.reshape(batch, 1, heads, value.size(-1)), None
    prefix_keys, prefix_values = prefix[module.layer_idx]
    shared = torch.einsum("bkgd,ksd->bkgs", q, prefix_keys) * scale
    weights = torch.softmax(torch.cat([shared, own], dim=-1).float(), dim=-1).to(query.dtype)
    length = prefix_keys.size(1)
    out = torch.einsum("bkgs,ksd->bkgd", weights[..., :length], prefix_values)
    out = out + torch.einsum("bkgt,bktd->bkgd", weights[..., length:], value)
    return out.reshape(batch, 1, heads, value.size(-1)), None


def enable(model: torch.nn.Module) -> bool:
    """Route ``model``'s attention through `shared_prefix_attention` (SDPA unless a decoding
    call passes a prefix); False, and nothing changed, when the model does not use SDPA."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "_attn_implementation", None) not in ("sdpa", NAME):
        return False
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(NAME, shared_prefix_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    config._attn_implementation = NAME
    return True


__all__ = ["NAME", "enable", "shared_prefix_attention"]
