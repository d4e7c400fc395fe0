"""KV cache layers that grow in place, for the decode loop of :class:`TorchEngine`.

transformers' plain cache layer appends each step's keys and values with ``torch.cat``, which
copies the whole cache at every generated token: on a small model on the CPU that copy was
40% of generation time (16 rows, 150-token prompts, 48 new tokens). A growing layer keeps
its keys and values at the front of a larger buffer and writes each step's new positions
into the spare room; the model sees views of the filled part, so attention is unchanged.
When the room runs out the buffer doubles, so appends stay linear overall.

Only caches whose layers are all plain full-attention layers are converted (sliding-window,
quantised or offloaded caches keep their own behaviour): see :func:`with_room`.

A compiled decode (``TorchEngine(compile_decode=True)``) needs buffers whose shapes do not
change at every token instead: :func:`as_fixed` copies a plain cache into transformers'
fixed-size layers (``StaticLayer``, written in place at the next free position), with a
little spare room, since attention reads the whole buffer at every step; the engine copies
it into a larger one when the room runs out.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicLayer, StaticLayer

# Positions of spare room a converted cache starts with; past them the buffer doubles, so
# appends stay amortised O(1) and memory at most twice what the rows use.
INITIAL_ROOM = 256
# Spare positions of a fixed-size cache: attention reads all of its buffer at every step, so
# it grows by this much at a time rather than by doubling.
FIXED_ROOM = 64


class GrowingLayer(DynamicLayer):
    """A full-attention cache layer whose ``keys``/``values`` are views into a buffer with
    spare room along the sequence dimension."""

    def __init__(self, room: int = 0) -> None:
        super().__init__()
        self.room = max(0, int(room))
        # Empty until the first keys arrive; then ``[batch, heads, capacity, dim]``.
        self._key_buffer = torch.empty(0)
        self._value_buffer = torch.empty(0)

    @classmethod
    def holding(cls, keys: torch.Tensor, values: torch.Tensor, room: int) -> GrowingLayer:
        """A layer holding ``keys``/``values`` (``[batch, heads, length, dim]``) with room for
        ``room`` more positions before the buffer has to grow."""
        layer = cls(room)
        layer.lazy_initialization(keys, values)
        layer._adopt(keys, values, keys.size(-2) + layer.room)
        return layer

    def _adopt(self, keys: torch.Tensor, values: torch.Tensor, capacity: int) -> None:
        """Copy ``keys``/``values`` into fresh buffers of ``capacity`` positions."""
        length = keys.size(-2)
        key_buffer = keys.new_empty((*keys.shape[:-2], capacity, keys.size(-1)))
        value_buffer = values.new_empty((*values.shape[:-2], capacity, values.size(-1)))
        key_buffer[..., :length, :] = keys
        value_buffer[..., :length, :] = values
        self._key_buffer, self._value_buffer = key_buffer, value_buffer
        self.keys = key_buffer[..., :length, :]
        self.values = value_buffer[..., :length, :]

    def _owns_views(self) -> bool:
        """Whether ``keys``/``values`` are still the views this layer made (a caller may have
        replaced them, as transformers' ``crop`` does)."""
        kb, vb = self._key_buffer, self._value_buffer
        if kb.dim() < 2 or self.keys is None or self.values is None:
            return False
        return (
            self.keys.data_ptr() == kb.data_ptr()
            and self.values.data_ptr() == vb.data_ptr()
            and self.keys.shape[:-2] == kb.shape[:-2]
            and self.keys.stride() == kb.stride()
            and self.values.stride() == vb.stride()
        )

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized or self.keys is None or self.keys.numel() == 0:
            self.lazy_initialization(key_states, value_states)
            self._adopt(key_states, value_states, key_states.size(-2) + self.room)
            return self.keys, self.values
        length, new = self.keys.size(-2), key_states.size(-2)
        if not self._owns_views() or length + new > self._capacity():
            self._adopt(self.keys, self.values, max(2 * self._capacity(), length + new))
        self._key_buffer[..., length : length + new, :] = key_states
        self._value_buffer[..., length : length + new, :] = value_states
        self.keys = self._key_buffer[..., : length + new, :]
        self.values = self._value_buffer[..., : length + new, :]
        return self.keys, self.values

    def _capacity(self) -> int:
        return self._key_buffer.size(-2) if self._key_buffer.dim() >= 2 else 0

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep (or repeat) the ``indices`` rows, with the spare room kept too."""
        if self.get_seq_length() == 0:
            return
        if not self._owns_views():
            self._adopt(self.keys, self.values, self.keys.size(-2) + self.room)
        length = self.keys.size(-2)
        self._key_buffer = self._key_buffer.index_select(0, indices)
        self._value_buffer = self._value_buffer.index_select(0, indices)
        self.keys = self._key_buffer[..., :length, :]
        self.values = self._value_buffer[..., :length, :]

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.get_seq_length() > 0:
            rows = torch.arange(self.keys.size(0), device=self.keys.device)
            self.batch_select_indices(rows.repeat_interleave(repeats))


def is_plain(cache: Any) -> bool:
    """Whether every layer of ``cache`` is a plain (or growing) full-attention layer."""
    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer) in (DynamicLayer, GrowingLayer) for layer in layers)


def is_fixed(cache: Any) -> bool:
    """Whether every layer of ``cache`` is a fixed-size full-attention layer."""
    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer) is StaticLayer for layer in layers)


class SharedPrefixCache(Cache):
    """Fixed-size layers holding each row's positions after a prefix that every row shares,
    and that prefix once: ``shared_prefix`` keys and values ``[heads, prefix_length, dim]``
    per layer (read by `shared_prefix.shared_prefix_attention`)."""

    def __init__(
        self, layers: list[StaticLayer], shared_prefix: list[tuple[torch.Tensor, torch.Tensor]]
    ) -> None:
        super().__init__(layers=layers)
        self.shared_prefix = shared_prefix

    @property
    def prefix_length(self) -> int:
        return int(self.shared_prefix[0][0].size(1))


def prefix_length(cache: Any) -> int:
    """Positions a cache holds once for every row (0: none)."""
    return cache.prefix_length if isinstance(cache, SharedPrefixCache) else 0


def capacity(cache: Any) -> int:
    """Positions a fixed-size cache holds in all, shared prefix included (0 for any other
    cache)."""
    if not is_fixed(cache):
        return 0
    return prefix_length(cache) + int(cache.layers[0].max_cache_len)


def filled_layers(
    cache: Any, length: int, row: int | None = None
) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """Keys and values ``[batch, heads, length, dim]`` of every layer of a plain or fixed-size
    cache holding ``length`` positions (a shared prefix repeated for every row), or
    ``[heads, length, dim]`` of batch row ``row`` only; None for any other cache (sliding
    windows, quantised, ...). ``length`` comes from the caller (the width of its attention
    mask), so that a fixed-size cache needs no read of its device-side counter."""
    pick = slice(None) if row is None else row
    if is_fixed(cache):
        if any(not layer.is_initialized for layer in cache.layers):
            return None
        own = length - prefix_length(cache)
        layers = [
            (layer.keys[pick, ..., :own, :], layer.values[pick, ..., :own, :])
            for layer in cache.layers
        ]
        if not isinstance(cache, SharedPrefixCache):
            return layers
        return [
            (_behind(keys, own_keys), _behind(values, own_values))
            for (keys, values), (own_keys, own_values) in zip(
                cache.shared_prefix, layers, strict=True
            )
        ]
    if not is_plain(cache) or any(layer.keys is None for layer in cache.layers):
        return None
    return [(layer.keys[pick], layer.values[pick]) for layer in cache.layers]


def _behind(prefix: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``prefix`` [heads, S, dim] in front of ``rows``: [heads, T, dim] (one row) or
    [batch, heads, T, dim] (every row)."""
    if rows.dim() == prefix.dim():
        return torch.cat([prefix, rows], dim=1)
    return torch.cat([prefix.unsqueeze(0).expand(rows.size(0), -1, -1, -1), rows], dim=2)


def as_fixed(cache: Any, length: int, room: int, shared: int = 0) -> Any | None:
    """A cache of fixed-size layers holding the ``length`` positions of a plain (or
    fixed-size) ``cache`` with ``room`` spare positions; None when ``cache`` is neither.

    ``shared`` > 0: the first ``shared`` positions, the same in every row, are kept once
    (a `SharedPrefixCache`); a `SharedPrefixCache` given keeps its prefix.
    """
    if isinstance(cache, SharedPrefixCache):
        prefix = cache.shared_prefix
        shared = cache.prefix_length
        rows = [
            (layer.keys[..., : length - shared, :], layer.values[..., : length - shared, :])
            for layer in cache.layers
        ]
    else:
        layers = filled_layers(cache, length)
        if layers is None:
            return None
        prefix = [
            (keys[0, :, :shared].contiguous(), values[0, :, :shared].contiguous())
            for keys, values in layers
        ]
        rows = [
            (keys[..., shared:length, :], values[..., shared:length, :]) for keys, values in layers
        ]
    own = length - shared
    fixed_layers = [StaticLayer(max_cache_len=own + max(1, room)) for _ in rows]
    for layer, (keys, values) in zip(fixed_layers, rows, strict=True):
        layer.lazy_initialization(keys, values)
        layer.keys[..., :own, :] = keys
        layer.values[..., :own, :] = values
        layer.cumulative_length.fill_(own)
    if shared > 0:
        return SharedPrefixCache(fixed_layers, prefix)
    return Cache(layers=fixed_layers)


def select_fixed_rows(cache: Any, index: torch.Tensor) -> Any:
    """A fixed-size cache restricted to (or repeated along) ``index`` of its batch rows."""
    for layer in cache.layers:
        layer.keys = layer.keys.index_select(0, index)
        layer.values = layer.values.index_select(0, index)
        layer.batch_size = int(index.numel())
    return cache


def with_room(cache: Any, room: int) -> Any:
    """``cache`` with its plain layers replaced by growing ones that have ``room`` spare
    positions; any other cache is returned as it is."""
    if not is_plain(cache) or any(layer.keys is None for layer in cache.layers):
        return cache
    cache.layers = [
        layer
        if isinstance(layer, GrowingLayer)
        else GrowingLayer.holding(layer.keys, layer.values, room)
        for layer in cache.layers
    ]
    return cache


__all__ = [
    "FIXED_ROOM",
    "INITIAL_ROOM",
    "GrowingLayer",
    "SharedPrefixCache",
    "as_fixed",
    "capacity",
    "filled_layers",
    "is_fixed",
    "is_plain",
    "prefix_length",
    "select_fixed_rows",
    "with_room",
]
