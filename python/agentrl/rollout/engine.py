"""Batched, KV-cached generation with any Hugging Face causal LM (`TorchEngine`).

Why batched: a rollout step of one sequence leaves a CPU or GPU mostly idle; a step over
every live sequence costs little more. So the engine takes a list of token-id prompts of
different lengths and generates for all of them at once:

* prompts are left-padded; attention masks hide the padding and explicit position ids
  give every row the positions it would have alone, so a row's output does not depend on
  its batch-mates (greedy batched == greedy one at a time);
* identical prompts (the G samples of a group) are prefilled once; their KV cache rows are
  then copied G times;
* each row stops on its own: an end token (EOS, also the pad token), a stop string in its
  generated text, or its own token budget; finished rows are dropped from the batch (the
  cache is compacted) once enough of them have accumulated;
* behaviour log-probs come from the raw policy distribution (see `sampling`);
* KV reuse across calls (``kv_reuse``): a row given a cache key keeps its KV cache (the
  context and the tokens fed, padding trimmed) after the call; a later row with the same
  key whose prompt starts with those ids prefills only the rest. Multi-turn episodes thus
  append each observation instead of prefilling the whole context again. A stored cache
  is dropped when used, when the weights change, when its ids no longer prefix the prompt
  (a truncated context) and by `drop_cache` (finished episodes).

`update_weights` loads new policy weights between generations (the engine lock makes it
wait for a running `generate`), skipping weights with non-finite values.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import math
import os
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from agentrl.errors import RecurringError, UsageError, first_line
from agentrl.rollout.cache_args import cache_kwarg, forward_kwarg_names, output_cache
from agentrl.rollout.sampling import SamplingParams, gather_logprobs, sample_tokens, seen_mask
from agentrl.rollout.state_dicts import has_nonfinite, strip_wrapper_prefixes

logger = logging.getLogger(__name__)

AutocastFactory = Callable[[], contextlib.AbstractContextManager[Any]]

# A prefix shared by every prompt of a batch is prefilled once when at least this long.
MIN_SHARED_PREFIX = 16
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
    """EOS and pad ids of a tokenizer: end tokens of every engine by default."""
    ids = []
    for name in ("eos_token_id", "pad_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            ids.append(value)
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

    STAT_NAMES: tuple[str, ...] = ("sequences", "generate_calls", "weight_updates",
                                   "weight_updates_skipped")  # fmt: skip
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


def _select_cache_rows(cache: Any, index: torch.Tensor) -> Any:
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


def _cache_of_layers(layers: list[tuple[torch.Tensor, torch.Tensor]]) -> Any:
    """A transformers cache holding ``layers`` (keys and values per layer)."""
    from transformers import DynamicCache

    return DynamicCache(ddp_cache_data=layers)


@dataclass
class _KeptCache:
    """One row's KV cache kept between calls: the ids it covers and, per layer, keys and
    values ``[heads, len(ids), dim]``, computed by weights ``version``."""

    ids: list[int]
    layers: list[tuple[torch.Tensor, torch.Tensor]]
    version: int


@dataclass
class _Reuse:
    """The first ``length`` positions of a kept cache, reused by a prompt of this call."""

    layers: list[tuple[torch.Tensor, torch.Tensor]]
    length: int


class _StopMatcher:
    """Finds stop strings in generated text, decoding only when a token could end one.

    A token "could end" a stop string when its own text contains the string's last
    character (or is an incomplete UTF-8 piece, for non-ASCII endings). The check then
    decodes a short window of the row's last tokens, long enough to hold any stop string.
    """

    def __init__(self, tokenizer: Any, stops: Sequence[str], vocab_size: int) -> None:
        self.tokenizer = tokenizer
        self.stops = tuple(stops)
        longest = max(len(s.encode("utf-8")) for s in self.stops)
        self.window = 2 * longest + 4
        finals = {s[-1] for s in self.stops}
        partial = any(ord(c) > 127 for c in finals)
        texts = tokenizer.batch_decode([[i] for i in range(vocab_size)], skip_special_tokens=False)
        self.may_end = [
            any(c in text for c in finals) or (partial and "\ufffd" in text) for text in texts
        ]

    def hit(self, generated: list[int]) -> bool:
        last = generated[-1]
        if last >= len(self.may_end) or not self.may_end[last]:
            return False
        text = self.tokenizer.decode(generated[-self.window :], skip_special_tokens=False)
        return any(s in text for s in self.stops)


class TorchEngine(BatchEngine):
    """Generate for many prompts at once with a Hugging Face causal LM (see module doc).

    ``eos_token_ids`` default: the tokenizer's EOS and pad ids plus the model's generation
    config EOS ids. ``autocast``: None picks bf16 autocast for fp32 weights on CUDA,
    True/False force it on/off, or pass a factory returning a context manager.
    ``max_batch_rows`` caps rows per forward pass (0: no cap). ``compact_fraction``: drop
    finished rows from the batch once they are at least this share of it. ``kv_reuse``:
    keep the KV caches of rows given ``cache_keys`` between calls (module doc); it needs
    a model that takes ``position_ids``. Counters: ``prefill_tokens`` computed,
    ``prefill_tokens_reused`` read from kept caches, ``kv_reuse_misses`` kept caches that
    could not be used (weights changed, prompt no longer starts with their ids),
    ``kv_reuse_unsupported`` rows whose cache type cannot be kept.

    ``compile_decode``: decode one token at a time with the model compiled
    (``torch.compile``, dynamic shapes, built at the first call) over a fixed-size KV cache
    (see `kv_cache.as_fixed`); prefill stays eager. Each decoding step runs fused kernels
    instead of a few hundred small ones; the first call pays the compile (seconds to tens of
    seconds). Compiled kernels sum in other orders, so sampled tokens can differ from eager
    ones (log-probs agree within float rounding). Caches that are not plain full-attention
    layers decode eagerly, with a warning, counted in ``compiled_decode_unsupported``;
    ``compiled_decode_steps`` counts compiled steps.
    """

    STAT_NAMES = (*BatchEngine.STAT_NAMES, "forward_calls", "prefill_tokens",
                  "prefill_tokens_shared", "prefill_tokens_reused", "kv_reuse_misses",
                  "kv_reuse_unsupported", "decode_rows", "generated_tokens", "compactions",
                  "nonfinite_rows", "nonfinite_steps", "fallback_rows",
                  "bad_prompt_ids", "compiled_decode_steps",
                  "compiled_decode_unsupported", "shared_prefix_decodes")  # fmt: skip

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        *,
        device: str | torch.device | None = None,
        autocast: bool | AutocastFactory | None = None,
        eos_token_ids: Sequence[int] | None = None,
        seed: int = 0,
        version: int = 0,
        max_batch_rows: int = 0,
        compact_fraction: float = 0.125,
        kv_reuse: bool = True,
        compile_decode: bool = False,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        first = next(iter(model.parameters()), None)
        default_device = first.device if first is not None else torch.device("cpu")
        self.device = torch.device(device) if device is not None else default_device
        if first is not None and first.device != self.device:
            self.model.to(self.device)
        self.weight_dtype = first.dtype if first is not None else torch.float32
        self._autocast = self._autocast_factory(autocast)
        self.eos_token_ids = self._end_ids(eos_token_ids)
        self.fallback_token_id = (
            tokenizer.eos_token_id
            if getattr(tokenizer, "eos_token_id", None) is not None
            else min(self.eos_token_ids, default=0)
        )
        self.max_batch_rows = max(0, int(max_batch_rows))
        self.compact_fraction = min(max(float(compact_fraction), 0.0), 1.0)
        self.version = int(version)
        self.lock = threading.RLock()
        self.stats = self._fresh_stats()
        self._generator = torch.Generator(device=self.device)
        self._generator.manual_seed(int(seed))
        names = forward_kwarg_names(model)
        self._cache_kwarg = cache_kwarg(model)
        self._takes_positions = "position_ids" in names or not names
        self._takes_logits_to_keep = "logits_to_keep" in names
        self._stop_matchers: dict[tuple[str, ...], _StopMatcher] = {}
        if kv_reuse and not self._takes_positions:
            raise ValueError(
                "kv_reuse needs a model whose forward takes position_ids; turn it off "
                "(kv_reuse=False, agentrl train --rollout_kv_reuse 0)"
            )
        self.kv_reuse = bool(kv_reuse)
        self._kept: dict[Hashable, _KeptCache] = {}
        self.compile_decode = bool(compile_decode)
        self._compiled: torch.nn.Module | None = None
        # Whether compiled steps go through the grouped attention of `shared_prefix` (and so
        # may hold a shared prompt prefix once); None: not checked yet.
        self._shared_prefix: bool | None = False
        if self.compile_decode:
            from agentrl.models.compile import missing_compiler

            reason = missing_compiler(self.device)
            if reason is not None:
                raise UsageError(
                    f"compile_decode: {reason}; install one (g++) or turn it off "
                    "(agentrl train --rollout_compile 0)"
                )
            from agentrl.rollout import shared_prefix

            self._shared_prefix = None if shared_prefix.enable(model) else False

    # ---- configuration helpers ----

    def _autocast_factory(self, autocast: bool | AutocastFactory | None) -> AutocastFactory:
        if callable(autocast):
            return autocast
        if autocast is False:
            return contextlib.nullcontext
        if autocast is True:
            if self.device.type == "cuda":
                return lambda: torch.autocast("cuda", dtype=torch.bfloat16)
            return lambda: torch.autocast("cpu", dtype=torch.bfloat16)
        from agentrl.models.loading import autocast_context

        return lambda: autocast_context(self.device, self.weight_dtype)

    def _end_ids(self, explicit: Sequence[int] | None) -> frozenset[int]:
        if explicit is not None:
            return frozenset(int(t) for t in explicit)
        ids = set(tokenizer_end_ids(self.tokenizer))
        config = getattr(self.model, "generation_config", None)
        value = getattr(config, "eos_token_id", None)
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list | tuple):
            ids.update(int(v) for v in value)
        return frozenset(ids)

    def reseed(self, seed: int) -> None:
        """Restart the sampling random stream (same seed + same calls = same tokens)."""
        self._generator.manual_seed(int(seed))

    # ---- weights ----

    def _load_weights(self, source: WeightSource, version: int, *, strict: bool) -> bool:
        state = _state_dict_of(source)
        if has_nonfinite(state):
            return False
        with torch.no_grad():
            own = self.model.state_dict()
            if not any(k in own for k in state):
                raise ValueError(
                    "no parameter of the given weights matches the rollout model "
                    f"(first given key: {next(iter(state), None)!r})"
                )
            result = self.model.load_state_dict(state, strict=strict)
        self._kept.clear()  # computed by the old weights
        unexpected = list(getattr(result, "unexpected_keys", []))
        if unexpected and strict:
            raise ValueError(f"unexpected weight names: {unexpected[:5]}")
        return True

    # ---- kept KV caches ----

    def drop_cache(self, keys: Sequence[Hashable]) -> None:
        """Forget the KV caches kept for ``keys`` (finished episodes)."""
        with self.lock:
            for key in keys:
                self._kept.pop(key, None)

    @property
    def kept_caches(self) -> int:
        """How many rows' KV caches are kept now."""
        return len(self._kept)

    def _take_kept(self, rows: list[list[int]], keys: list[Hashable | None]) -> list[_Reuse | None]:
        """The reusable part of each row's kept cache (taken out of the store)."""
        reuse: list[_Reuse | None] = []
        for ids, key in zip(rows, keys, strict=True):
            kept = self._kept.pop(key, None) if key is not None else None
            if kept is None:
                reuse.append(None)
                continue
            length = min(_common_prefix([kept.ids, ids]), len(ids) - 1)
            if kept.version != self.version or length < 1:
                self.stats["kv_reuse_misses"] += 1
                reuse.append(None)
                continue
            reuse.append(_Reuse(kept.layers, length))
        return reuse

    def _count_unsupported(self, counter: str, message: str, cache: Any) -> None:
        """Count a cache a feature cannot use; warn the first time (``message`` takes the
        cache's type name)."""
        if not self.stats[counter]:
            logger.warning(message + " (counted in %s)", type(cache).__name__, counter)
        self.stats[counter] += 1

    def _keep(self, key: Hashable, cache: Any, attn: torch.Tensor, b: int, ids: list[int]) -> None:
        """Keep batch row ``b`` of ``cache`` (its unpadded positions, covering ``ids``)."""
        from agentrl.rollout.kv_cache import filled_layers  # imports transformers

        layers = filled_layers(cache, attn.size(1), row=b)
        if layers is None:
            self._count_unsupported(
                "kv_reuse_unsupported",
                "kv_reuse: %s caches cannot be kept between calls; every turn is prefilled in full",
                cache,
            )
            return
        where = attn[b].nonzero().squeeze(-1)
        if where.numel() != len(ids):
            raise RuntimeError(f"row cache holds {where.numel()} positions for {len(ids)} ids")
        rows = [(k.index_select(1, where), v.index_select(1, where)) for k, v in layers]
        self._kept[key] = _KeptCache(ids, rows, self.version)

    # ---- generation ----

    def _sample_rows(
        self, rows: list[list[int]], budgets: list[int], params: SamplingParams
    ) -> list[Generation]:
        return self._sample_keyed_rows(rows, budgets, params, [None] * len(rows))

    def _sample_keyed_rows(
        self,
        rows: list[list[int]],
        budgets: list[int],
        params: SamplingParams,
        keys: list[Hashable | None],
    ) -> list[Generation]:
        if not self.kv_reuse:
            keys = [None] * len(rows)
        results: list[Generation | None] = [None] * len(rows)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                for chunk in self._chunks(rows):
                    outs = self._generate_rows(
                        [rows[i] for i in chunk],
                        [budgets[i] for i in chunk],
                        params,
                        [keys[i] for i in chunk],
                    )
                    for i, out in zip(chunk, outs, strict=True):
                        results[i] = out
        finally:
            self.model.train(was_training)
        return [r for r in results if r is not None]

    def _chunks(self, rows: list[list[int]]) -> list[list[int]]:
        """Row indices in forward-pass chunks: similar lengths together, copies adjacent."""
        if self.max_batch_rows <= 0 or len(rows) <= self.max_batch_rows:
            return [list(range(len(rows)))]
        order = sorted(range(len(rows)), key=lambda i: (len(rows[i]), rows[i]))
        step = self.max_batch_rows
        return [order[i : i + step] for i in range(0, len(order), step)]

    def _forward(
        self,
        ids: torch.Tensor,
        attn: torch.Tensor,
        positions: torch.Tensor,
        cache: Any,
        model: torch.nn.Module | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> tuple[torch.Tensor, Any]:
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": attn, "use_cache": True}
        if self._takes_positions:
            kwargs["position_ids"] = positions
        if cache is not None:
            kwargs[self._cache_kwarg] = cache
        if self._takes_logits_to_keep:
            kwargs["logits_to_keep"] = 1
        kwargs.update(extra or {})
        with self._autocast():
            out = (self.model if model is None else model)(**kwargs)
        self.stats["forward_calls"] += 1
        logits = out["logits"] if isinstance(out, Mapping) else out.logits
        return logits[:, -1, :].float(), output_cache(out)

    def _stop_matcher(self, stops: tuple[str, ...], vocab: int) -> _StopMatcher | None:
        if not stops:
            return None
        key = (*stops, str(vocab))
        matcher = self._stop_matchers.get(key)
        if matcher is None:
            matcher = _StopMatcher(self.tokenizer, stops, vocab)
            self._stop_matchers[key] = matcher
        return matcher

    def _valid_ids(self, ids: list[int], vocab: int) -> list[int]:
        """Ids outside the embedding table become the fallback token (counted)."""
        bad = sum(1 for t in ids if not 0 <= t < vocab)
        if not bad:
            return ids
        self.stats["bad_prompt_ids"] += bad
        return [t if 0 <= t < vocab else self.fallback_token_id for t in ids]

    def _prefill(self, prompts: list[list[int]]) -> tuple[torch.Tensor, Any, torch.Tensor, int]:
        """Run distinct prompts through the model: last logits, cache, attention mask, and
        how many leading positions every row shares (the prefix run once; 0: none).

        A prefix shared by all prompts (the system turn and tool list, typically) is run
        once and its cache copied to every row; the rest of each prompt follows it,
        left-padded, so padding sits between prefix and suffix where the mask hides it.
        """
        device = self.device
        shared = _common_prefix(prompts) if len(prompts) > 1 else 0
        shared = min(shared, min(len(p) for p in prompts) - 1)
        cache = None
        head = None
        if shared >= MIN_SHARED_PREFIX:
            ids = torch.tensor([prompts[0][:shared]], dtype=torch.long, device=device)
            ones = torch.ones_like(ids)
            _, cache = self._forward(ids, ones, torch.arange(shared, device=device)[None], None)
            cache = _select_cache_rows(
                cache, torch.zeros(len(prompts), dtype=torch.long, device=device)
            )
            head = ones.expand(len(prompts), shared)
            self.stats["prefill_tokens"] += shared
        else:
            shared = 0
        tails = [p[shared:] for p in prompts]
        width = max(len(t) for t in tails)
        ids = torch.full((len(tails), width), self.fallback_token_id, dtype=torch.long)
        mask = torch.zeros((len(tails), width), dtype=torch.long)
        for r, tail in enumerate(tails):
            ids[r, width - len(tail) :] = torch.tensor(tail, dtype=torch.long)
            mask[r, width - len(tail) :] = 1
        ids, mask = ids.to(device), mask.to(device)
        positions = shared + (mask.cumsum(-1) - 1).clamp(min=0)
        attn = mask if head is None else torch.cat([head, mask], dim=-1)
        self.stats["prefill_tokens"] += sum(len(t) for t in tails)
        logits, cache = self._forward(ids, attn, positions, cache)
        return logits, cache, attn, shared

    def _prefill_reusing(
        self, prompts: list[list[int]], prefixes: list[_Reuse | None]
    ) -> tuple[torch.Tensor, Any, torch.Tensor]:
        """`_prefill` for prompts of which some continue a kept cache: last logits, cache,
        attention mask.

        Each row's kept positions are left-padded to the longest, then its new tail
        follows, left-padded too; the mask hides both paddings and the position ids
        continue each row's own count.
        """
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
        tails = [p[n:] for p, n in zip(prompts, used, strict=True)]
        width = max(len(t) for t in tails)
        ids = torch.full((len(tails), width), self.fallback_token_id, dtype=torch.long)
        mask = torch.zeros((len(tails), width), dtype=torch.long)
        for r, tail in enumerate(tails):
            head[r, head_width - used[r] :] = 1
            ids[r, width - len(tail) :] = torch.tensor(tail, dtype=torch.long)
            mask[r, width - len(tail) :] = 1
        ids, mask, head = ids.to(device), mask.to(device), head.to(device)
        starts = torch.tensor(used, dtype=torch.long, device=device)[:, None]
        positions = starts + (mask.cumsum(-1) - 1).clamp(min=0)
        attn = torch.cat([head, mask], dim=-1)
        self.stats["prefill_tokens"] += sum(len(t) for t in tails)
        self.stats["prefill_tokens_reused"] += sum(used)
        logits, cache = self._forward(ids, attn, positions, _cache_of_layers(layers))
        return logits, cache, attn

    def _keep_row(
        self, keys: list[Hashable | None], b: int, cache: Any, attn: torch.Tensor, ids: list[int]
    ) -> None:
        if keys[b] is not None:
            self._keep(keys[b], cache, attn, b, ids)

    def _generate_rows(
        self,
        rows: list[list[int]],
        budgets: list[int],
        params: SamplingParams,
        keys: list[Hashable | None],
    ) -> list[Generation]:
        n = len(rows)
        version = self.version
        out_ids: list[list[int]] = [[] for _ in range(n)]
        out_logps: list[list[float]] = [[] for _ in range(n)]
        out_sample: list[list[float]] = [[] for _ in range(n)]
        reasons = [FINISH_LENGTH] * n
        end_ids: list[int | None] = [None] * n
        end_logps: list[float | None] = [None] * n
        live = [i for i in range(n) if budgets[i] > 0]
        for i in range(n):
            if budgets[i] <= 0 and keys[i] is not None:
                self._kept.pop(keys[i], None)  # nothing generated: nothing to continue
        if live:
            self._decode(
                rows,
                budgets,
                live,
                params,
                [keys[i] for i in live],
                out_ids,
                out_logps,
                out_sample,
                reasons,
                end_ids,
                end_logps,
            )
        texts = self.tokenizer.batch_decode(out_ids, skip_special_tokens=True)
        return [
            Generation(
                token_ids=out_ids[i],
                logps=out_logps[i],
                sample_logps=out_sample[i],
                text=texts[i],
                finish_reason=reasons[i],
                end_token_id=end_ids[i],
                end_logp=end_logps[i],
                version=version,
                prompt_tokens=len(rows[i]),
            )
            for i in range(n)
        ]

    def _decode(
        self,
        rows: list[list[int]],
        budgets: list[int],
        live: list[int],
        params: SamplingParams,
        live_keys: list[Hashable | None],
        out_ids: list[list[int]],
        out_logps: list[list[float]],
        out_sample: list[list[float]],
        reasons: list[str],
        end_ids: list[int | None],
        end_logps: list[float | None],
    ) -> None:
        """Prefill the distinct prompts of ``live`` rows, then decode until all are done.

        A row with a reusable kept cache is prefilled from where that cache ends; rows
        with a cache key have theirs kept when they finish.
        """
        device = self.device
        end_set = self.eos_token_ids | set(params.stop_token_ids)
        vocab_limit = _embedding_rows(self.model)
        reuse = self._take_kept([rows[i] for i in live], live_keys)
        # Distinct prompts: each prefilled once, then its cache row copied to its rows
        # (a row continuing its own kept cache is distinct).
        distinct: dict[tuple[Any, ...], int] = {}
        row_source: list[int] = []
        prompts: list[list[int]] = []
        prefixes: list[_Reuse | None] = []
        for n, i in enumerate(live):
            key = (tuple(rows[i]), None if reuse[n] is None else n)
            if key not in distinct:
                distinct[key] = len(prompts)
                prompts.append(rows[i])
                prefixes.append(reuse[n])
            row_source.append(distinct[key])
        if vocab_limit is not None:
            prompts = [self._valid_ids(p, vocab_limit) for p in prompts]
        self.stats["prefill_tokens_shared"] += sum(len(rows[i]) for i in live) - sum(
            len(p) for p in prompts
        )
        common = 0  # leading positions every row shares
        if any(p is not None for p in prefixes):
            logits, cache, attn = self._prefill_reusing(prompts, prefixes)
        else:
            logits, cache, attn, common = self._prefill(prompts)
            if len(prompts) == 1:  # every row is a copy of one prompt
                common = attn.size(1) - 1
        # Room for the new tokens, so that decoding appends in place (see kv_cache); at most
        # INITIAL_ROOM up front, doubling after, so a large budget that rows do not use
        # costs no memory. A compiled decode takes a fixed-size copy instead.
        from agentrl.rollout.kv_cache import INITIAL_ROOM, with_room  # imports transformers

        most = max(budgets[i] for i in live)
        decoder = None
        if self.compile_decode:
            cache, decoder = self._fixed_decoding(cache, attn, most, common)
        if decoder is None:
            cache = with_room(cache, min(most, INITIAL_ROOM))
        source = torch.tensor(row_source, dtype=torch.long, device=device)
        if len(prompts) != len(live) or row_source != list(range(len(live))):
            cache = _select_cache_rows(cache, source)
            logits = logits.index_select(0, source)
            attn = attn.index_select(0, source)
        next_pos = attn.sum(-1)
        seen = None
        if params.repetition_penalty != 1.0:
            seen = seen_mask([rows[i] for i in live], logits.size(-1), device)
        matcher = self._stop_matcher(params.stop, logits.size(-1))
        slots = list(live)  # batch row -> output row
        slot_keys = list(live_keys)  # batch row -> cache key
        done = [False] * len(slots)
        n_done = 0
        while True:
            step = sample_tokens(
                logits,
                params,
                seen=seen,
                generator=self._generator,
                fallback_token_id=self.fallback_token_id,
            )
            bad_rows = int(step.nonfinite_rows.sum())
            if bad_rows:
                self.stats["nonfinite_rows"] += bad_rows
                self.stats["nonfinite_steps"] += 1
            self.stats["fallback_rows"] += int(step.fallback_rows.sum())
            tokens = step.tokens.tolist()
            logps = step.logps.tolist()
            sample_logps = step.sample_logps.tolist()
            for b, slot in enumerate(slots):
                if done[b]:
                    continue
                token = tokens[b]
                if token in end_set:
                    reasons[slot] = FINISH_EOS
                    end_ids[slot] = token
                    end_logps[slot] = _finite_logp(logps[b])
                    done[b] = True
                    n_done += 1
                    # Every generated token was fed: the cache covers them all.
                    self._keep_row(slot_keys, b, cache, attn, rows[slot] + out_ids[slot])
                    continue
                out_ids[slot].append(token)
                out_logps[slot].append(_finite_logp(logps[b]))
                out_sample[slot].append(_finite_logp(sample_logps[b]))
                self.stats["generated_tokens"] += 1
                if matcher is not None and matcher.hit(out_ids[slot]):
                    reasons[slot] = FINISH_STOP
                elif len(out_ids[slot]) < budgets[slot]:
                    continue
                done[b] = True
                n_done += 1
                # The last token was sampled, not fed: the cache ends before it.
                self._keep_row(slot_keys, b, cache, attn, rows[slot] + out_ids[slot][:-1])
            if n_done == len(slots):
                return
            token_col = step.tokens.unsqueeze(-1)
            if seen is not None:
                seen.scatter_(1, token_col, True)
            if n_done >= max(1, math.ceil(self.compact_fraction * len(slots))):
                keep_rows = [b for b in range(len(slots)) if not done[b]]
                keep = torch.tensor(keep_rows, dtype=torch.long, device=device)
                cache = _select_cache_rows(cache, keep)
                attn = attn.index_select(0, keep)
                next_pos = next_pos.index_select(0, keep)
                token_col = token_col.index_select(0, keep)
                if seen is not None:
                    seen = seen.index_select(0, keep)
                slots = [slots[b] for b in keep_rows]
                slot_keys = [slot_keys[b] for b in keep_rows]
                done = [False] * len(slots)
                n_done = 0
                self.stats["compactions"] += 1
            attn = torch.cat([attn, attn.new_ones((attn.size(0), 1))], dim=-1)
            self.stats["decode_rows"] += len(slots)
            if decoder is None:
                logits, cache = self._forward(token_col, attn, next_pos.unsqueeze(-1), cache)
            else:
                logits, cache = self._fixed_step(decoder, token_col, attn, next_pos, cache)
            next_pos = next_pos + 1

    def _fixed_decoding(
        self, cache: Any, attn: torch.Tensor, budget: int, common: int
    ) -> tuple[Any, Any]:
        """The prefilled ``cache`` (positions under ``attn``) as a fixed-size copy, holding
        the ``common`` leading positions once when there are enough of them, and the compiled
        model that decodes over it; ``(cache, None)`` when the cache cannot be copied (warned
        once, counted)."""
        from agentrl.rollout.kv_cache import FIXED_ROOM, as_fixed  # imports transformers

        room = min(budget, FIXED_ROOM)
        candidate = common if common >= MIN_SHARED_PREFIX else 0
        if self._shared_prefix is None:
            self._shared_prefix = self._shared_prefix_agrees(cache, attn, candidate)
        shared = candidate if self._shared_prefix else 0
        fixed = as_fixed(cache, attn.size(1), room, shared)
        if fixed is None:
            self._count_unsupported(
                "compiled_decode_unsupported",
                "compile_decode: %s caches have no fixed-size form here; these rows decode eagerly",
                cache,
            )
            return cache, None
        if self._compiled is None:
            self._compiled = torch.compile(self.model, dynamic=True)
        if shared:
            self.stats["shared_prefix_decodes"] += 1
        return fixed, self._compiled

    def _shared_prefix_agrees(self, cache: Any, attn: torch.Tensor, shared: int) -> bool | None:
        """Whether one decoding step through the shared-prefix attention path (the first
        ``shared`` positions held once; 0: none) gives the logits of the same step through
        the model's own attention over full rows (run eagerly, once per engine). A model
        whose attention does not take that path (see `shared_prefix`) decodes through its
        own, over full rows, with a warning. None when this call cannot tell (out of memory,
        logits that are not finite): the call decodes through the model's own attention and
        the next one checks again."""
        from agentrl.rollout.kv_cache import as_fixed, capacity

        width = attn.size(1)
        steps = []
        for grouped, split in ((False, 0), (True, shared)):
            fixed = as_fixed(cache, width, 1, split)
            if fixed is None:
                return False
            ids = torch.full((attn.size(0), 1), self.fallback_token_id, device=attn.device)
            mask = torch.cat([attn, attn.new_ones((attn.size(0), 1))], dim=-1)[:, split:]
            mask = torch.nn.functional.pad(mask, (0, capacity(fixed) - width - 1))
            extra = _prefix_kwargs(fixed) if grouped else None
            try:
                logits, _ = self._forward(ids, mask, attn.sum(-1, keepdim=True), fixed, extra=extra)
            except torch.OutOfMemoryError as exc:
                logger.warning("compile_decode: the shared-prefix check ran out of memory (%s); "
                               "checking again at the next call", first_line(exc, 300))  # fmt: skip
                return None
            except (ValueError, TypeError, RuntimeError, AttributeError) as exc:
                logger.warning("compile_decode: shared-prefix attention failed (%s)", exc)
                return False
            steps.append(logits)
        full, split_logits = steps
        if not bool(torch.isfinite(full).all() and torch.isfinite(split_logits).all()):
            logger.warning("compile_decode: the shared-prefix check gave logits that are not "
                           "finite; checking again at the next call")  # fmt: skip
            return None
        agrees = bool((full - split_logits).abs().max() <= 1e-2 * (1 + full.abs().max()))
        if not agrees:
            logger.warning(
                "compile_decode: %s does not take the shared-prefix attention path; "
                "decoding uses its own attention over every row's whole cache",
                type(self.model).__name__,
            )
        return agrees

    def _fixed_step(
        self,
        decoder: Any,
        token_col: torch.Tensor,
        attn: torch.Tensor,
        next_pos: torch.Tensor,
        cache: Any,
    ) -> tuple[torch.Tensor, Any]:
        """One compiled decoding step over a fixed-size cache (copied into a larger one when
        full); the mask spans the whole buffer, its unfilled tail hidden."""
        from agentrl.rollout.kv_cache import FIXED_ROOM, as_fixed, capacity, prefix_length

        if attn.size(1) > capacity(cache):
            cache = as_fixed(cache, attn.size(1) - 1, FIXED_ROOM)
        shared = prefix_length(cache)
        mask = torch.nn.functional.pad(attn[:, shared:], (0, capacity(cache) - attn.size(1)))
        extra = _prefix_kwargs(cache) if self._shared_prefix else None
        try:
            out = self._forward(
                token_col, mask, next_pos.unsqueeze(-1), cache, model=decoder, extra=extra
            )
        except Exception as exc:
            if not _is_compile_failure(exc):
                raise
            raise CompileFailed(
                f"compile_decode: compiling {type(self.model).__name__} for decoding failed "
                f"({type(exc).__name__}: {first_line(exc, 300)}); decode eagerly with "
                "agentrl train --rollout_compile 0 (or TorchEngine(compile_decode=False))"
            ) from exc
        self.stats["compiled_decode_steps"] += 1
        return out


class CompileFailed(RecurringError):
    """``torch.compile`` could not build the decoder (a compiler or toolchain problem, an
    operation it cannot trace): the run stops, naming the option that decodes eagerly."""


def _is_compile_failure(exc: BaseException) -> bool:
    """Whether ``exc`` comes from torch's compiler stack (dynamo, inductor, its C++ build)
    rather than from running the model."""
    return any(
        cls.__module__.startswith(("torch._dynamo", "torch._inductor")) for cls in type(exc).__mro__
    )


def _prefix_kwargs(cache: Any) -> dict[str, Any]:
    """Forward arguments that route a decoding step through `shared_prefix` attention: the
    cache's shared block per layer (empty when it holds none: each row's own positions are
    then all there is, still read without copying grouped key heads)."""
    from agentrl.rollout.kv_cache import SharedPrefixCache

    block = cache.shared_prefix if isinstance(cache, SharedPrefixCache) else ()
    return {"shared_prefix_kv": block}


def _common_prefix(prompts: list[list[int]]) -> int:
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


def _finite_logp(value: float) -> float:
    """A stored log-prob: finite and <= 0 (sanitised logits make this a formality)."""
    if not math.isfinite(value):
        return 0.0
    return min(value, 0.0)


def _embedding_rows(model: torch.nn.Module) -> int | None:
    try:
        emb = model.get_input_embeddings()
    except (AttributeError, NotImplementedError):
        return None
    weight = getattr(emb, "weight", None)
    return int(weight.shape[0]) if weight is not None else None


def _state_dict_of(
    source: Mapping[str, torch.Tensor] | torch.nn.Module | str | os.PathLike[str],
) -> dict[str, Any]:
    if isinstance(source, torch.nn.Module):
        return strip_wrapper_prefixes(source.state_dict())
    if isinstance(source, Mapping):
        return strip_wrapper_prefixes(source)
    path = Path(source)
    if path.is_dir():
        found = sorted(path.glob("*.safetensors")) or sorted(path.glob("*.bin"))
        if not found:
            raise FileNotFoundError(f"no .safetensors or .bin weights in {path}")
        state: dict[str, Any] = {}
        for part in found:
            state.update(_state_dict_of(part))
        return state
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return strip_wrapper_prefixes(load_file(str(path)))
    loaded = torch.load(str(path), map_location="cpu", weights_only=True)
    if isinstance(loaded, Mapping) and isinstance(loaded.get("model"), Mapping):
        loaded = loaded["model"]
    if not isinstance(loaded, Mapping):
        raise ValueError(f"{path} does not hold a state dict")
    return strip_wrapper_prefixes(loaded)


@torch.no_grad()
def forward_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    autocast: AutocastFactory | None = None,
    temperature: float = 1.0,
) -> torch.Tensor:
    """Log-prob of every token after the first under ``logits / temperature`` (1.0: the raw
    policy): shape ``[batch, len - 1]``.

    The reference computation behind the rollout's behaviour log-probs (no cache, one
    forward pass over whole sequences), used to check them and by evaluation code.
    """
    context = autocast() if autocast is not None else contextlib.nullcontext()
    with context:
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    return gather_logprobs(logits[:, :-1, :], input_ids[:, 1:], temperature)


__all__ = [
    "FINISH_EOS",
    "FINISH_LENGTH",
    "FINISH_STOP",
    "Generation",
    "TorchEngine",
    "forward_logprobs",
    "generation_rows",
    "tokenizer_end_ids",
]
