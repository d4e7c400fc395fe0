"""The decode loop's state and its eager strategy, for `TorchEngine`.

`DecodeState` is everything one chunk of rows carries from token to token: per output row
the ids, log-probs and finish reason produced so far; per batch row the KV cache, attention
mask, next positions and the tokens seen (repetition penalty). A step records the sampled
tokens (`DecodeState.record`: a row ends on an end token, a stop string or its budget),
then feeds them back (`DecodeState.feed`), dropping finished rows from the batch
(compaction) once enough have accumulated.

How the model runs one decoding step is a strategy beside it, given the engine's forward
function (`prefill.Forward`): `EagerDecoding` calls the model over a cache that grows in
place (`kv_cache.with_room`); `compiled_decoding.CompiledDecoding` runs a compiled model
over a fixed-size cache.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from agentrl.rollout.batch_engine import FINISH_EOS, FINISH_LENGTH, FINISH_STOP, Generation
from agentrl.rollout.prefill import Forward, select_cache_rows
from agentrl.rollout.sampling import SampleResult


def finite_logp(value: float) -> float:
    """A stored log-prob: finite and <= 0 (sanitised logits make this a formality)."""
    if not math.isfinite(value):
        return 0.0
    return min(value, 0.0)


class StopMatcher:
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


@dataclass
class RowOutput:
    """What one output row has produced so far."""

    prompt_tokens: int
    token_ids: list[int] = field(default_factory=list)
    logps: list[float] = field(default_factory=list)
    sample_logps: list[float] = field(default_factory=list)
    finish_reason: str = FINISH_LENGTH
    end_token_id: int | None = None
    end_logp: float | None = None

    def generation(self, text: str, version: int) -> Generation:
        return Generation(
            token_ids=self.token_ids,
            logps=self.logps,
            sample_logps=self.sample_logps,
            text=text,
            finish_reason=self.finish_reason,
            end_token_id=self.end_token_id,
            end_logp=self.end_logp,
            version=version,
            prompt_tokens=self.prompt_tokens,
        )


@dataclass
class Finished:
    """A batch row that ended at this step, and the ids its cache covers now."""

    row: int
    key: Hashable | None
    covered: list[int]


class DecodeState:
    """The rows of one chunk being decoded (see module doc).

    ``rows``/``budgets``/``outputs`` are indexed by output row; ``slots`` maps each batch
    row of ``logits``, ``cache``, ``attn``, ``next_pos`` and ``seen`` to its output row.
    """

    def __init__(
        self,
        rows: list[list[int]],
        budgets: list[int],
        outputs: list[RowOutput],
        slots: list[int],
        keys: list[Hashable | None],
        logits: torch.Tensor,
        cache: Any,
        attn: torch.Tensor,
        seen: torch.Tensor | None,
    ) -> None:
        self.rows, self.budgets, self.outputs = rows, budgets, outputs
        self.slots, self.keys = list(slots), list(keys)
        self.logits, self.cache, self.attn, self.seen = logits, cache, attn, seen
        self.next_pos = attn.sum(-1)
        self.done = [False] * len(self.slots)
        self.n_done = 0

    @property
    def size(self) -> int:
        """Rows in the batch (finished ones included until compaction drops them)."""
        return len(self.slots)

    @property
    def finished(self) -> bool:
        return self.n_done == len(self.slots)

    def record(
        self,
        step: SampleResult,
        end_ids: Set[int],
        stops: StopMatcher | None,
        stats: dict[str, int],
    ) -> list[Finished]:
        """Append each live row's sampled token; the rows that end at this step."""
        tokens = step.tokens.tolist()
        logps = step.logps.tolist()
        sample_logps = step.sample_logps.tolist()
        ended: list[Finished] = []
        for b, slot in enumerate(self.slots):
            if self.done[b]:
                continue
            out = self.outputs[slot]
            token = tokens[b]
            if token in end_ids:
                out.finish_reason = FINISH_EOS
                out.end_token_id = token
                out.end_logp = finite_logp(logps[b])
                # Every generated token was fed: the cache covers them all.
                ended.append(self._finish(b, self.rows[slot] + out.token_ids))
                continue
            out.token_ids.append(token)
            out.logps.append(finite_logp(logps[b]))
            out.sample_logps.append(finite_logp(sample_logps[b]))
            stats["generated_tokens"] += 1
            if stops is not None and stops.hit(out.token_ids):
                out.finish_reason = FINISH_STOP
            elif len(out.token_ids) < self.budgets[slot]:
                continue
            # The last token was sampled, not fed: the cache ends before it.
            ended.append(self._finish(b, self.rows[slot] + out.token_ids[:-1]))
        return ended

    def _finish(self, b: int, covered: list[int]) -> Finished:
        self.done[b] = True
        self.n_done += 1
        return Finished(b, self.keys[b], covered)

    def feed(self, tokens: torch.Tensor, compact_fraction: float) -> tuple[torch.Tensor, bool]:
        """The sampled ``tokens`` as the next input column (finished rows dropped once they
        are ``compact_fraction`` of the batch) with the mask grown by one position; whether
        the batch was compacted."""
        token_col = tokens.unsqueeze(-1)
        if self.seen is not None:
            self.seen.scatter_(1, token_col, True)
        compacted = self.n_done >= max(1, math.ceil(compact_fraction * len(self.slots)))
        if compacted:
            token_col = self._compact(token_col)
        self.attn = torch.cat([self.attn, self.attn.new_ones((self.attn.size(0), 1))], dim=-1)
        return token_col, compacted

    def _compact(self, token_col: torch.Tensor) -> torch.Tensor:
        """Drop finished rows from the batch; the kept rows of ``token_col``."""
        keep_rows = [b for b in range(len(self.slots)) if not self.done[b]]
        keep = torch.tensor(keep_rows, dtype=torch.long, device=self.attn.device)
        self.cache = select_cache_rows(self.cache, keep)
        self.attn = self.attn.index_select(0, keep)
        self.next_pos = self.next_pos.index_select(0, keep)
        if self.seen is not None:
            self.seen = self.seen.index_select(0, keep)
        self.slots = [self.slots[b] for b in keep_rows]
        self.keys = [self.keys[b] for b in keep_rows]
        self.done = [False] * len(self.slots)
        self.n_done = 0
        return token_col.index_select(0, keep)


class Decoding(Protocol):
    """How the model runs decoding steps over a prefilled cache."""

    def begin(
        self, cache: Any, attn: torch.Tensor, budget: int, common: int, stats: dict[str, int]
    ) -> tuple[Any, Any]:
        """The cache to decode over (``attn`` masks its positions; ``budget`` new tokens at
        most; the ``common`` leading positions are the same in every row) and the strategy
        that decodes it (itself, or another when it cannot); it counts into ``stats`` (the
        engine's counters of the moment) until the next ``begin``."""
        ...

    def step(
        self, token_col: torch.Tensor, attn: torch.Tensor, next_pos: torch.Tensor, cache: Any
    ) -> tuple[torch.Tensor, Any]:
        """One step: next logits and cache for input tokens ``token_col`` at ``next_pos``."""
        ...


class EagerDecoding:
    """Decoding through the model as it is (``forward``), over a cache growing in place: at
    most INITIAL_ROOM positions of room up front, doubling after, so a large budget that rows
    do not use costs no memory."""

    def __init__(self, forward: Forward) -> None:
        self.forward = forward

    def begin(
        self, cache: Any, attn: torch.Tensor, budget: int, common: int, stats: dict[str, int]
    ) -> tuple[Any, EagerDecoding]:
        from agentrl.rollout.kv_cache import INITIAL_ROOM, with_room  # imports transformers

        return with_room(cache, min(budget, INITIAL_ROOM)), self

    def step(
        self, token_col: torch.Tensor, attn: torch.Tensor, next_pos: torch.Tensor, cache: Any
    ) -> tuple[torch.Tensor, Any]:
        return self.forward(token_col, attn, next_pos.unsqueeze(-1), cache)


__all__ = [
    "DecodeState",
    "Decoding",
    "EagerDecoding",
    "Finished",
    "RowOutput",
    "StopMatcher",
    "finite_logp",
]
