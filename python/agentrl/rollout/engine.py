"""Batched, KV-cached generation with any Hugging Face causal LM (`TorchEngine`).

Why batched: a rollout step of one sequence leaves a CPU or GPU mostly idle; a step over
every live sequence costs little more. So the engine takes a list of token-id prompts of
different lengths and generates for all of them at once. One call reads top to bottom in
`TorchEngine._decode`, and each concern lives in its own module beside this one:

* `prefill`: the distinct prompts run once, left-padded with explicit positions, so a
  row's output does not depend on its batch-mates (greedy batched == greedy one at a
  time); identical prompts (the G samples of a group) and a prefix every prompt shares
  are prefilled once and copied;
* `decoding`: the state carried from token to token (`DecodeState`: record a step, feed
  it back, compact the batch); each row stops on its own: an end token (EOS, also the pad
  token), a stop string in its generated text, or its own token budget; finished rows are
  dropped from the batch once enough of them have accumulated;
* `decoding.EagerDecoding` and `compiled_decoding.CompiledDecoding`: how the model runs a
  decoding step (eagerly over a cache growing in place, or compiled over a fixed-size one);
* `kv_store`: KV reuse across calls (``kv_reuse``): a row given a cache key keeps its KV
  cache after the call; a later row with the same key whose prompt starts with those ids
  prefills only the rest, so multi-turn episodes append each observation instead of
  prefilling the whole context again;
* behaviour log-probs come from the raw policy distribution (`sampling`); the trainer
  recomputes them with `agentrl.training.forward.masked_logps`.

`update_weights` loads new policy weights between generations (the engine lock makes it
wait for a running `generate`), skipping weights with non-finite values
(`agentrl.models.weights`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import torch

from agentrl.errors import UsageError
from agentrl.models.weights import load_weights
from agentrl.rollout.batch_engine import (
    FINISH_EOS,
    FINISH_LENGTH,
    FINISH_STOP,
    BatchEngine,
    Generation,
    WeightSource,
    generation_rows,
    tokenizer_end_ids,
)
from agentrl.rollout.cache_args import cache_kwarg, forward_kwarg_names, output_cache
from agentrl.rollout.compiled_decoding import CompiledDecoding, CompileFailed
from agentrl.rollout.decoding import (
    DecodeState,
    Decoding,
    EagerDecoding,
    Finished,
    RowOutput,
    StopMatcher,
)
from agentrl.rollout.kv_store import KVStore
from agentrl.rollout.options import RolloutConfig
from agentrl.rollout.prefill import Prefill, select_cache_rows
from agentrl.rollout.sampling import SamplingParams, sample_tokens, seen_mask

AutocastFactory = Callable[[], contextlib.AbstractContextManager[Any]]


class TorchEngine(BatchEngine):
    """Generate for many prompts at once with a Hugging Face causal LM (see module doc).

    ``eos_token_ids`` default: the tokenizer's EOS and pad ids plus the model's generation
    config EOS ids. ``autocast``: None picks bf16 autocast for fp32 weights on CUDA,
    True/False force it on/off, or pass a factory returning a context manager.
    ``max_batch_rows`` caps rows per forward pass (0: no cap), and ``max_batch_tokens`` the
    tokens of their KV caches: rows x (the chunk's longest prompt + its largest budget)
    (0: no cap; a row longer than the cap goes alone). ``compact_fraction``: drop
    finished rows from the batch once they are at least this share of it. ``kv_reuse``:
    keep the KV caches of rows given ``cache_keys`` between calls (module doc); it needs
    a model that takes ``position_ids``. Counters: ``prefill_tokens`` computed,
    ``prefill_tokens_reused`` read from kept caches, ``kv_reuse_misses`` kept caches that
    could not be used (weights changed, prompt no longer starts with their ids),
    ``kv_reuse_unsupported`` rows whose cache type cannot be kept.

    ``compile_decode``: decode with the model compiled over a fixed-size KV cache
    (`compiled_decoding`); the first call pays the compile (seconds to tens of seconds).
    Sampled tokens can differ from eager ones (log-probs agree within float rounding).
    ``compiled_decode_steps`` counts compiled steps, ``compiled_decode_unsupported`` the
    caches that decoded eagerly instead.
    """

    STAT_NAMES = (
        *BatchEngine.STAT_NAMES,
        "forward_calls",
        "prefill_tokens",
        "prefill_tokens_shared",
        "prefill_tokens_reused",
        "kv_reuse_misses",
        "kv_reuse_unsupported",
        "decode_rows",
        "generated_tokens",
        "compactions",
        "nonfinite_rows",
        "nonfinite_steps",
        "fallback_rows",
        "bad_prompt_ids",
        "compiled_decode_steps",
        "compiled_decode_unsupported",
        "shared_prefix_decodes",
    )

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
        max_batch_rows: int = RolloutConfig.rollout_batch_rows,
        max_batch_tokens: int = RolloutConfig.rollout_batch_tokens,
        compact_fraction: float = 0.125,
        kv_reuse: bool = RolloutConfig.rollout_kv_reuse,
        compile_decode: bool = RolloutConfig.rollout_compile,
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
        self.max_batch_tokens = max(0, int(max_batch_tokens))
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
        self._stop_matchers: dict[tuple[str, ...], StopMatcher] = {}
        if kv_reuse and not self._takes_positions:
            raise ValueError(
                "kv_reuse needs a model whose forward takes position_ids; turn it off "
                "(kv_reuse=False, agentrl train --rollout_kv_reuse 0)"
            )
        self.kv_reuse = bool(kv_reuse)
        self.kv_store = KVStore()
        self.compile_decode = bool(compile_decode)
        self.decoding: Decoding = (
            self._compiled_decoding() if self.compile_decode else EagerDecoding(self._forward)
        )

    # ---- configuration helpers ----

    def _compiled_decoding(self) -> CompiledDecoding:
        from agentrl.models.compile import missing_compiler

        reason = missing_compiler(self.device)
        if reason is not None:
            raise UsageError(
                f"compile_decode: {reason}; install one (g++) or turn it off "
                "(agentrl train --rollout_compile 0)"
            )
        from agentrl.rollout import shared_prefix

        shared = None if shared_prefix.enable(self.model) else False
        return CompiledDecoding(self._forward, self.model, self.fallback_token_id, shared)

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

    # ---- weights and kept KV caches ----

    def _load_weights(self, source: WeightSource, version: int, *, strict: bool) -> bool:
        if not load_weights(self.model, source, strict=strict):
            return False
        self.kv_store.clear()  # computed by the old weights
        return True

    def drop_cache(self, keys: Sequence[Hashable]) -> None:
        """Forget the KV caches kept for ``keys`` (finished episodes)."""
        with self.lock:
            self.kv_store.drop(keys)

    @property
    def kept_caches(self) -> int:
        """How many rows' KV caches are kept now."""
        return len(self.kv_store)

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
        """Every row's `Generation`, decoded chunk by chunk (`_chunks`). A row with no
        budget generates nothing, and whatever its key kept is dropped: there is nothing to
        continue."""
        if not self.kv_reuse:
            keys = [None] * len(rows)
        outputs = [RowOutput(prompt_tokens=len(ids)) for ids in rows]
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                for chunk in self._chunks(rows, budgets):
                    live = [i for i in chunk if budgets[i] > 0]
                    self.kv_store.drop([keys[i] for i in chunk if budgets[i] <= 0])
                    if live:
                        self._decode(rows, budgets, outputs, live, [keys[i] for i in live], params)
        finally:
            self.model.train(was_training)
        texts = self.tokenizer.batch_decode(
            [o.token_ids for o in outputs], skip_special_tokens=True
        )
        version = self.version
        return [out.generation(text, version) for out, text in zip(outputs, texts, strict=True)]

    def _chunks(self, rows: list[list[int]], budgets: list[int]) -> list[list[int]]:
        """Row indices in forward-pass chunks: similar lengths together, copies adjacent, at
        most ``max_batch_rows`` rows and ``max_batch_tokens`` cache tokens a chunk (its rows x
        (its longest prompt + its largest budget): prompts are padded to the longest, and
        the pass decodes for the largest budget). Rows without a budget decode nothing and
        count for neither cap."""
        rows_cap = self.max_batch_rows if self.max_batch_rows > 0 else len(rows)
        if self.max_batch_tokens <= 0 and len(rows) <= rows_cap:
            return [list(range(len(rows)))]
        order = sorted(range(len(rows)), key=lambda i: (len(rows[i]), rows[i]))
        chunks: list[list[int]] = []
        chunk: list[int] = []
        idle = [i for i in order if budgets[i] <= 0]
        most = 0  # the chunk's largest budget
        for i in (i for i in order if budgets[i] > 0):
            # Sorted by length: this row's prompt is the longest yet.
            width = len(rows[i]) + max(most, budgets[i])
            tokens_over = (
                self.max_batch_tokens > 0 and width * (len(chunk) + 1) > self.max_batch_tokens
            )
            if chunk and (len(chunk) >= rows_cap or tokens_over):
                chunks.append(chunk)
                chunk, most = [], 0
            chunk.append(i)
            most = max(most, budgets[i])
        chunks.append(chunk + idle)  # rows without a budget ride along, decoded in none
        if len(chunks) == 1:  # one pass: the rows in their own order, as without a cap
            return [list(range(len(rows)))]
        return chunks

    def _forward(
        self,
        ids: torch.Tensor,
        attn: torch.Tensor,
        positions: torch.Tensor,
        cache: Any,
        model: torch.nn.Module | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> tuple[torch.Tensor, Any]:
        """One forward pass: the last position's logits (float32) and the new cache."""
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

    def _stop_matcher(self, stops: tuple[str, ...], vocab: int) -> StopMatcher | None:
        if not stops:
            return None
        key = (*stops, str(vocab))
        matcher = self._stop_matchers.get(key)
        if matcher is None:
            matcher = StopMatcher(self.tokenizer, stops, vocab)
            self._stop_matchers[key] = matcher
        return matcher

    def _valid_ids(self, ids: list[int], vocab: int) -> list[int]:
        """Ids outside the embedding table become the fallback token (counted)."""
        bad = sum(1 for t in ids if not 0 <= t < vocab)
        if not bad:
            return ids
        self.stats["bad_prompt_ids"] += bad
        return [t if 0 <= t < vocab else self.fallback_token_id for t in ids]

    def _decode(
        self,
        rows: list[list[int]],
        budgets: list[int],
        outputs: list[RowOutput],
        live: list[int],
        keys: list[Hashable | None],
        params: SamplingParams,
    ) -> None:
        """Prefill the distinct prompts of the ``live`` rows, then decode until all are done,
        filling their ``outputs``. A row with a reusable kept cache is prefilled from where
        that cache ends; rows with a cache key have theirs kept when they finish."""
        vocab = _embedding_rows(self.model)
        reuse = self.kv_store.take([rows[i] for i in live], keys, self.version, self.stats)
        prefill = Prefill(self._forward, self.device, self.fallback_token_id)
        valid = None if vocab is None else (lambda ids: self._valid_ids(ids, vocab))
        filled = prefill.rows([rows[i] for i in live], reuse, self.stats, valid)
        most = max(budgets[i] for i in live)
        cache, decoding = self.decoding.begin(
            filled.cache, filled.attn, most, filled.common, self.stats
        )
        logits, attn = filled.logits, filled.attn
        if filled.copied:  # rows that copy a distinct prompt get their own cache rows
            source = torch.tensor(filled.source, dtype=torch.long, device=self.device)
            cache = select_cache_rows(cache, source)
            logits, attn = logits.index_select(0, source), attn.index_select(0, source)
        seen = None
        if params.repetition_penalty != 1.0:
            seen = seen_mask([rows[i] for i in live], logits.size(-1), self.device)
        state = DecodeState(rows, budgets, outputs, live, keys, logits, cache, attn, seen)
        stops = self._stop_matcher(params.stop, logits.size(-1))
        end_ids = self.eos_token_ids | set(params.stop_token_ids)
        while True:
            step = sample_tokens(
                state.logits,
                params,
                seen=state.seen,
                generator=self._generator,
                fallback_token_id=self.fallback_token_id,
            )
            self._count_step(step.nonfinite_rows, step.fallback_rows)
            for row in state.record(step, end_ids, stops, self.stats):
                self._keep(state, row)
            if state.finished:
                return
            token_col, compacted = state.feed(step.tokens, self.compact_fraction)
            self.stats["compactions"] += int(compacted)
            self.stats["decode_rows"] += state.size
            state.logits, state.cache = decoding.step(
                token_col, state.attn, state.next_pos, state.cache
            )
            state.next_pos = state.next_pos + 1

    def _keep(self, state: DecodeState, row: Finished) -> None:
        """Keep a finished row's KV cache under its key (when it has one)."""
        if row.key is not None:
            cache, attn = state.cache, state.attn
            self.kv_store.keep(row.key, cache, attn, row.row, row.covered, self.version, self.stats)

    def _count_step(self, nonfinite_rows: torch.Tensor, fallback_rows: torch.Tensor) -> None:
        bad_rows = int(nonfinite_rows.sum())
        if bad_rows:
            self.stats["nonfinite_rows"] += bad_rows
            self.stats["nonfinite_steps"] += 1
        self.stats["fallback_rows"] += int(fallback_rows.sum())


def _embedding_rows(model: torch.nn.Module) -> int | None:
    try:
        emb = model.get_input_embeddings()
    except (AttributeError, NotImplementedError):
        return None
    weight = getattr(emb, "weight", None)
    return int(weight.shape[0]) if weight is not None else None


__all__ = [
    "FINISH_EOS",
    "FINISH_LENGTH",
    "FINISH_STOP",
    "BatchEngine",
    "CompileFailed",
    "Generation",
    "TorchEngine",
    "WeightSource",
    "generation_rows",
    "tokenizer_end_ids",
]
