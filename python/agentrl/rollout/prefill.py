"""Prefill for `TorchEngine`: the distinct prompts of a call run through the model once.

Prompts are left-padded; attention masks hide the padding and explicit position ids give
every row the positions it would have alone, so a row's output does not depend on its
batch-mates. Identical prompts (the G samples of a group) are prefilled once and their
cache rows copied; a prefix every prompt shares (the system turn and tool list) is run once
and copied to every row; a row continuing a kept cache (`kv_store`) prefills only its new
tail after the kept positions.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import torch

from agentrl.rollout.kv_store import Reuse, common_prefix

# A prefix shared by every prompt of a batch is prefilled once when at least this long.
MIN_SHARED_PREFIX = 16

# One forward pass of the engine's model, forward(ids, attention mask, position ids, cache,
# model=None, extra=None) -> (last position's logits in float32, new cache); ``model`` runs
# in the engine's model's place (the compiled decoder), ``extra`` adds keyword arguments.
Forward = Callable[..., tuple[torch.Tensor, Any]]


@dataclass
class Prefilled:
    """The distinct prompts of a call after prefill, and which of them each row copies.

    ``logits`` [distinct, vocab] are the last positions' logits; ``attn`` [distinct, width]
    masks the padding of ``cache``; ``common`` leading positions are the same in every row
    (0: none known); ``source[r]`` is the distinct prompt of row ``r``.
    """

    logits: torch.Tensor
    cache: Any
    attn: torch.Tensor
    common: int
    source: list[int]

    @property
    def copied(self) -> bool:
        """Whether rows are not the distinct prompts one for one (some are copies)."""
        return self.source != list(range(len(self.source))) or self.logits.size(0) != len(
            self.source
        )


def select_cache_rows(cache: Any, index: torch.Tensor) -> Any:
    """The cache restricted to (or repeated along) ``index`` of its batch dimension."""
    from agentrl.rollout.kv_cache import is_fixed, select_fixed_rows  # imports transformers

    if is_fixed(cache):
        return select_fixed_rows(cache, index)
    if hasattr(cache, "batch_select_indices"):
        cache.batch_select_indices(index)
        return cache
    if isinstance(cache, tuple | list):
        return tuple(tuple(t.index_select(0, index) for t in layer) for layer in cache)
    raise TypeError(f"cannot select rows of a {type(cache).__name__} cache")


class Prefill:
    """Runs prompts through ``forward`` on ``device``, padding with ``pad_id``; counts into
    the ``stats`` given (``prefill_tokens``, ``prefill_tokens_shared``,
    ``prefill_tokens_reused``)."""

    def __init__(self, forward: Forward, device: torch.device, pad_id: int) -> None:
        self.forward = forward
        self.device = device
        self.pad_id = pad_id

    def rows(
        self,
        rows: list[list[int]],
        reuse: list[Reuse | None],
        stats: dict[str, int],
        valid: Callable[[list[int]], list[int]] | None = None,
    ) -> Prefilled:
        """Prefill the distinct prompts of ``rows`` (a row continuing its own kept cache,
        ``reuse``, is distinct); ``valid`` maps a prompt's ids into the embedding table."""
        distinct: dict[tuple[Hashable, ...], int] = {}
        source: list[int] = []
        prompts: list[list[int]] = []
        prefixes: list[Reuse | None] = []
        for n, ids in enumerate(rows):
            key = (tuple(ids), None if reuse[n] is None else n)
            if key not in distinct:
                distinct[key] = len(prompts)
                prompts.append(ids)
                prefixes.append(reuse[n])
            source.append(distinct[key])
        if valid is not None:
            prompts = [valid(p) for p in prompts]
        stats["prefill_tokens_shared"] += sum(len(ids) for ids in rows) - sum(
            len(p) for p in prompts
        )
        if any(p is not None for p in prefixes):
            logits, cache, attn = self.reusing(prompts, prefixes, stats)
            return Prefilled(logits, cache, attn, 0, source)
        logits, cache, attn, common = self.fresh(prompts, stats)
        if len(prompts) == 1:  # every row is a copy of one prompt
            common = attn.size(1) - 1
        return Prefilled(logits, cache, attn, common, source)

    def _padded(self, tails: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Left-padded ids and their mask, on the device."""
        width = max(len(t) for t in tails)
        ids = torch.full((len(tails), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(tails), width), dtype=torch.long)
        for r, tail in enumerate(tails):
            ids[r, width - len(tail) :] = torch.tensor(tail, dtype=torch.long)
            mask[r, width - len(tail) :] = 1
        return ids.to(self.device), mask.to(self.device)

    def fresh(
        self, prompts: list[list[int]], stats: dict[str, int]
    ) -> tuple[torch.Tensor, Any, torch.Tensor, int]:
        """Run distinct prompts through the model: last logits, cache, attention mask, and
        how many leading positions every row shares (the prefix run once; 0: none).

        A prefix shared by all prompts is run once and its cache copied to every row; the
        rest of each prompt follows it, left-padded, so padding sits between prefix and
        suffix where the mask hides it.
        """
        device = self.device
        shared = common_prefix(prompts) if len(prompts) > 1 else 0
        shared = min(shared, min(len(p) for p in prompts) - 1)
        cache = None
        head = None
        if shared >= MIN_SHARED_PREFIX:
            ids = torch.tensor([prompts[0][:shared]], dtype=torch.long, device=device)
            ones = torch.ones_like(ids)
            _, cache = self.forward(ids, ones, torch.arange(shared, device=device)[None], None)
            cache = select_cache_rows(
                cache, torch.zeros(len(prompts), dtype=torch.long, device=device)
            )
            head = ones.expand(len(prompts), shared)
            stats["prefill_tokens"] += shared
        else:
            shared = 0
        tails = [p[shared:] for p in prompts]
        ids, mask = self._padded(tails)
        positions = shared + (mask.cumsum(-1) - 1).clamp(min=0)
        attn = mask if head is None else torch.cat([head, mask], dim=-1)
        stats["prefill_tokens"] += sum(len(t) for t in tails)
        logits, cache = self.forward(ids, attn, positions, cache)
        return logits, cache, attn, shared

    def reusing(
        self, prompts: list[list[int]], prefixes: list[Reuse | None], stats: dict[str, int]
    ) -> tuple[torch.Tensor, Any, torch.Tensor]:
        """`fresh` for prompts of which some continue a kept cache: last logits, cache,
        attention mask.

        Each row's kept positions are left-padded to the longest, then its new tail
        follows, left-padded too; the mask hides both paddings and the position ids
        continue each row's own count.
        """
        from transformers import DynamicCache

        device = self.device
        used = [p.length if p is not None else 0 for p in prefixes]
        head_width = max(used)
        sample = next(p for p in prefixes if p is not None)
        layers = []
        for index, (k0, v0) in enumerate(sample.layers):
            shape = (len(prompts), k0.size(0), head_width, k0.size(-1))
            keys, values = k0.new_zeros(shape), v0.new_zeros((*shape[:3], v0.size(-1)))
            for r, prefix in enumerate(prefixes):
                if prefix is not None:
                    k, v = prefix.layers[index]
                    keys[r, :, head_width - prefix.length :] = k[:, : prefix.length]
                    values[r, :, head_width - prefix.length :] = v[:, : prefix.length]
            layers.append((keys, values))
        head = torch.zeros((len(prompts), head_width), dtype=torch.long)
        for r in range(len(prompts)):
            head[r, head_width - used[r] :] = 1
        tails = [p[n:] for p, n in zip(prompts, used, strict=True)]
        ids, mask = self._padded(tails)
        head = head.to(device)
        starts = torch.tensor(used, dtype=torch.long, device=device)[:, None]
        positions = starts + (mask.cumsum(-1) - 1).clamp(min=0)
        attn = torch.cat([head, mask], dim=-1)
        stats["prefill_tokens"] += sum(len(t) for t in tails)
        stats["prefill_tokens_reused"] += sum(used)
        logits, cache = self.forward(ids, attn, positions, DynamicCache(ddp_cache_data=layers))
        return logits, cache, attn


__all__ = ["MIN_SHARED_PREFIX", "Prefill", "Prefilled", "select_cache_rows"]
