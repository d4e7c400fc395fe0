"""The KV caches `TorchEngine` keeps between calls (``kv_reuse``), keyed by the caller.

A multi-turn episode calls ``generate`` once per turn with a prompt that is the previous
one, the tokens generated and the observation. A row given a cache key keeps its KV cache
(the positions it covered, padding trimmed) when it finishes; the next row with that key
whose prompt starts with those ids prefills only the rest. A kept cache is taken out when
used, and is not used when other weights computed it or when its ids no longer prefix the
prompt (a truncated context): both count as misses. New weights clear the store.

Kept free of transformers imports (`kv_cache` is imported when a row is kept).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

logger = logging.getLogger(__name__)

Layers = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass
class KeptCache:
    """One row's KV cache kept between calls: the ids it covers and, per layer, keys and
    values ``[heads, len(ids), dim]``, computed by weights ``version``."""

    ids: list[int]
    layers: Layers
    version: int


@dataclass
class Reuse:
    """The first ``length`` positions of a kept cache, reused by a prompt of this call."""

    layers: Layers
    length: int


def common_prefix(prompts: Sequence[Sequence[int]]) -> int:
    """Length of the longest prefix all prompts share."""
    first = prompts[0]
    n = min(len(p) for p in prompts)
    for p in prompts[1:]:
        k = 0
        while k < n and p[k] == first[k]:
            k += 1
        n = k
        if n == 0:
            break
    return n


def count_unsupported(stats: dict[str, int], counter: str, message: str, cache: Any) -> None:
    """Count a cache a feature cannot use; warn the first time (``message`` takes the
    cache's type name)."""
    if not stats[counter]:
        logger.warning(message + " (counted in %s)", type(cache).__name__, counter)
    stats[counter] += 1


class KVStore:
    """Kept KV caches by key. ``take`` and ``keep`` count into the ``stats`` they are given
    (the engine's counters of the moment: ``kv_reuse_misses``, ``kv_reuse_unsupported``)."""

    def __init__(self) -> None:
        self._kept: dict[Hashable, KeptCache] = {}

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, key: Hashable) -> KeptCache | None:
        """The cache kept under ``key`` (left in the store)."""
        return self._kept.get(key)

    def clear(self) -> None:
        """Forget every kept cache (the weights changed)."""
        self._kept.clear()

    def drop(self, keys: Sequence[Hashable | None]) -> None:
        """Forget the caches kept under ``keys`` (finished episodes, rows with no budget)."""
        for key in keys:
            if key is not None:
                self._kept.pop(key, None)

    def take(
        self,
        rows: Sequence[list[int]],
        keys: Sequence[Hashable | None],
        version: int,
        stats: dict[str, int],
    ) -> list[Reuse | None]:
        """The reusable part of each row's kept cache (taken out of the store)."""
        reuse: list[Reuse | None] = []
        for ids, key in zip(rows, keys, strict=True):
            kept = self._kept.pop(key, None) if key is not None else None
            if kept is None:
                reuse.append(None)
                continue
            length = min(common_prefix([kept.ids, ids]), len(ids) - 1)
            if kept.version != version or length < 1:
                stats["kv_reuse_misses"] += 1
                reuse.append(None)
                continue
            reuse.append(Reuse(kept.layers, length))
        return reuse

    def keep(
        self,
        key: Hashable,
        cache: Any,
        attn: torch.Tensor,
        b: int,
        ids: list[int],
        version: int,
        stats: dict[str, int],
    ) -> None:
        """Keep batch row ``b`` of ``cache`` (its unpadded positions under ``attn``, covering
        ``ids``), computed by weights ``version``."""
        from agentrl.rollout.kv_cache import filled_layers  # imports transformers

        layers = filled_layers(cache, attn.size(1), row=b)
        if layers is None:
            count_unsupported(
                stats,
                "kv_reuse_unsupported",
                "kv_reuse: %s caches cannot be kept between calls; every turn is prefilled in full",
                cache,
            )
            return
        where = attn[b].nonzero().squeeze(-1)
        if where.numel() != len(ids):
            raise RuntimeError(f"row cache holds {where.numel()} positions for {len(ids)} ids")
        rows = [(k.index_select(1, where), v.index_select(1, where)) for k, v in layers]
        self._kept[key] = KeptCache(ids, rows, version)


__all__ = ["KVStore", "KeptCache", "Reuse", "common_prefix", "count_unsupported"]
