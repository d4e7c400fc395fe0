"""Run the leading tokens that every row of a batch shares once, not once per row.

Tool-use training data repeats the same system prompt and tool specifications at the start
of every conversation: in the built-in demonstrations they are 64 of about 148 tokens, 43%
of the compute of a training step. When all rows of a batch start with the same tokens, the
body runs that prefix on one row, its keys and values are broadcast to the batch, and the
rest of each row attends to them as a KV cache. The result is the same function (causal
attention never lets the prefix see the rows that follow it); autograd sums the gradients
that flow back into the shared prefix from every row.
"""

from __future__ import annotations

from typing import Any

import torch

from agentrl.rollout.cache_args import cache_kwarg, output_cache
from agentrl.rollout.kv_cache import is_plain

# Shorter shared prefixes are not worth the second forward call.
MIN_SHARED_PREFIX = 16


def shared_prefix_length(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    loss_mask: torch.Tensor,
    minimum: int = MIN_SHARED_PREFIX,
) -> int:
    """Leading positions that may run once for the whole batch; 0 when sharing is not worth it.

    The prefix is identical and unpadded in every row, no position in it predicts a trained
    token (position ``i`` predicts token ``i + 1``), and every row keeps at least one token
    after it.
    """
    rows, width = input_ids.shape
    if rows < 2 or width < 2:
        return 0
    same = (input_ids == input_ids[:1]).all(dim=0) & attention_mask.bool().all(dim=0)
    differing = torch.nonzero(~same)
    length = int(differing[0, 0]) if differing.numel() else width
    trained = torch.nonzero(loss_mask.bool().any(dim=0))
    if trained.numel():
        length = min(length, int(trained[0, 0]) - 1)
    shortest = int(attention_mask.sum(dim=1).min())
    length = min(length, shortest - 1)
    return length if length >= minimum else 0


def hidden_after_prefix(
    body: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    prefix: int,
) -> torch.Tensor | None:
    """Last hidden states of positions ``prefix..`` of every row, the first ``prefix``
    positions run once; None when the model's cache cannot be shared this way (then the
    caller runs the plain forward)."""
    rows = input_ids.size(0)
    first = body(input_ids=input_ids[:1, :prefix], use_cache=True)
    cache: Any = output_cache(first)
    if cache is None or not is_plain(cache):
        return None
    for layer in cache.layers:
        layer.keys = layer.keys.expand(rows, -1, -1, -1)
        layer.values = layer.values.expand(rows, -1, -1, -1)
    out = body(
        input_ids=input_ids[:, prefix:],
        attention_mask=attention_mask,
        use_cache=True,
        **{cache_kwarg(body): cache},
    )
    return out.last_hidden_state


__all__ = ["MIN_SHARED_PREFIX", "hidden_after_prefix", "shared_prefix_length"]
