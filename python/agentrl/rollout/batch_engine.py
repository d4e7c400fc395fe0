"""What every rollout engine shares: the `Generation` a row produces, the rows and budgets of
a ``generate`` call, and `BatchEngine`, the lock, counters and weight version around an
engine's own sampling and weight loading.

`TorchEngine` (`agentrl.rollout.engine`) and the remote engines (`agentrl.rollout.remote`)
implement it; callers only see ``generate(prompts, params, ...)`` and
``update_weights(source, version)``.
"""

from __future__ import annotations

import abc
import os
import threading
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from agentrl.rollout.sampling import SamplingParams

# Finish reasons of a generation.
FINISH_EOS = "eos"
FINISH_STOP = "stop"
FINISH_LENGTH = "length"


@dataclass
class Generation:
    """What one prompt row produced.

    ``token_ids`` excludes the end token that stopped it (EOS is not part of the
    response); ``end_token_id``/``end_logp`` keep it for callers that want to train on it.
    ``version`` is the engine's weight version when the tokens were sampled.
    """

    token_ids: list[int]
    logps: list[float]
    sample_logps: list[float]
    text: str
    finish_reason: str
    end_token_id: int | None
    end_logp: float | None
    version: int
    prompt_tokens: int


def generation_rows(
    prompts: Sequence[Sequence[int]],
    num_samples: int,
    max_new_tokens: int | Sequence[int] | None,
    params: SamplingParams,
) -> tuple[list[list[int]], list[int]]:
    """The output rows of a ``generate`` call and one new-token budget per row.

    Every engine follows this convention: each prompt ``num_samples`` times, prompt-major,
    as lists of ints (no empty prompt); ``max_new_tokens`` is one budget for all rows, one
    per row, or None for ``params.max_new_tokens``; negative budgets count as 0.
    """
    samples = max(1, int(num_samples))
    rows = [[int(t) for t in p] for p in prompts for _ in range(samples)]
    for i, ids in enumerate(rows):
        if not ids:
            raise ValueError(f"prompt {i // samples} is empty")
    if max_new_tokens is None:
        budgets = [params.max_new_tokens] * len(rows)
    elif isinstance(max_new_tokens, int):
        budgets = [max_new_tokens] * len(rows)
    else:
        budgets = [int(b) for b in max_new_tokens]
        if len(budgets) != len(rows):
            raise ValueError(
                f"{len(budgets)} token budgets for {len(rows)} output rows "
                f"({len(prompts)} prompts x {samples} samples)"
            )
    return rows, [max(0, b) for b in budgets]


def tokenizer_end_ids(tokenizer: Any) -> list[int]:
    """EOS and pad ids of a tokenizer, and the special token its chat template closes an
    assistant turn with (`agentrl.chat.turn_end_ids`): end tokens of every engine by
    default."""
    from agentrl.chat import turn_end_ids

    ids = []
    for name in ("eos_token_id", "pad_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            ids.append(value)
    if callable(tokenizer) and hasattr(tokenizer, "convert_tokens_to_ids"):
        ids.extend(t for t in turn_end_ids(tokenizer) if t not in ids)
    return ids


WeightSource = Mapping[str, torch.Tensor] | torch.nn.Module | str | os.PathLike[str]


class BatchEngine(abc.ABC):
    """What every rollout engine shares around its own sampling and weight loading.

    One lock serializes ``generate`` and ``update_weights``; counters are named in
    ``STAT_NAMES``. ``generate`` expands prompts into rows and budgets, reseeds when asked
    and counts calls and rows; a subclass samples the rows in `_sample_rows`.
    ``update_weights`` keeps the version and counters; a subclass loads the weights in
    `_load_weights`.
    """

    STAT_NAMES: tuple[str, ...] = (
        "sequences",
        "generate_calls",
        "weight_updates",
        "weight_updates_skipped",
    )
    lock: threading.RLock
    stats: dict[str, int]
    version: int
    # Whether ``generate`` takes ``cache_keys`` and keeps KV caches between calls.
    kv_reuse: bool = False

    def _fresh_stats(self) -> dict[str, int]:
        return dict.fromkeys(self.STAT_NAMES, 0)

    def reset_stats(self) -> dict[str, int]:
        """Return the counters and start new ones."""
        with self.lock:
            old, self.stats = self.stats, self._fresh_stats()
        return old

    @abc.abstractmethod
    def reseed(self, seed: int) -> None:
        """Restart the sampling randomness: the same seed and calls give the same tokens."""

    @abc.abstractmethod
    def _sample_rows(
        self, rows: list[list[int]], budgets: list[int], params: SamplingParams
    ) -> list[Generation]:
        """One `Generation` per row, in order (called holding the lock)."""

    def _sample_keyed_rows(
        self,
        rows: list[list[int]],
        budgets: list[int],
        params: SamplingParams,
        keys: list[Hashable],
    ) -> list[Generation]:
        """`_sample_rows` for an engine with ``kv_reuse``: each row has a cache key."""
        raise ValueError(f"{type(self).__name__} keeps no KV caches: cache_keys is not accepted")

    @abc.abstractmethod
    def _load_weights(self, source: WeightSource, version: int, *, strict: bool) -> bool:
        """Load ``source`` as weights ``version`` (holding the lock); False, with the
        weights left alone, when any floating tensor is not finite."""

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        params: SamplingParams | None = None,
        *,
        num_samples: int = 1,
        max_new_tokens: int | Sequence[int] | None = None,
        seed: int | None = None,
        cache_keys: Sequence[Hashable] | None = None,
    ) -> list[Generation]:
        """Generate for every prompt, ``num_samples`` times each (outputs prompt-major).

        ``max_new_tokens``: one budget for all, or one per output row (length
        ``len(prompts) * num_samples``); default ``params.max_new_tokens``.
        ``cache_keys`` (engines with ``kv_reuse``): one key per output row; the row's KV
        cache is kept under it for the next call with that key (see the module doc).
        """
        params = params or SamplingParams()
        rows, budgets = generation_rows(prompts, num_samples, max_new_tokens, params)
        keys = None if cache_keys is None else list(cache_keys)
        if keys is not None and len(keys) != len(rows):
            raise ValueError(f"{len(keys)} cache keys for {len(rows)} output rows")
        with self.lock:
            if seed is not None:
                self.reseed(seed)
            if keys is None:
                results = self._sample_rows(rows, budgets, params)
            else:
                results = self._sample_keyed_rows(rows, budgets, params, keys)
            self.stats["generate_calls"] += 1
            self.stats["sequences"] += len(rows)
        return results

    def update_weights(
        self, source: WeightSource, version: int | None = None, *, strict: bool = False
    ) -> bool:
        """Load new policy weights (a state dict, a module, or a path the engine reads).

        Returns False, and leaves the weights alone, when any floating tensor is not
        finite. Otherwise sets ``version`` (default: current + 1) and returns True.
        """
        with self.lock:
            new_version = self.version + 1 if version is None else int(version)
            if not self._load_weights(source, new_version, strict=strict):
                self.stats["weight_updates_skipped"] += 1
                return False
            self.version = new_version
            self.stats["weight_updates"] += 1
        return True


__all__ = [
    "FINISH_EOS",
    "FINISH_LENGTH",
    "FINISH_STOP",
    "BatchEngine",
    "Generation",
    "WeightSource",
    "generation_rows",
    "tokenizer_end_ids",
]
