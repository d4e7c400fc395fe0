"""Pieces every remote engine shares: rows and budgets, sampling fields, result assembly.

A remote engine (an SGLang server, an in-process vLLM) hands back token ids, behaviour
log-probs and a finish reason in its own format; each engine parses its own format, then
the rules that make its `Generation` match `TorchEngine`'s live here once: log-probs
stored finite and <= 0, a final end token moved out of ``token_ids``, the finish reason.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping, Set
from typing import Any

import torch

from agentrl.rollout.engine import (
    FINISH_EOS,
    FINISH_LENGTH,
    FINISH_STOP,
    BatchEngine,
    Generation,
    generation_rows,
    tokenizer_end_ids,
)
from agentrl.rollout.sampling import SamplingParams


def empty_generation(version: int, prompt_len: int) -> Generation:
    """What a row with a zero token budget produces."""
    return Generation([], [], [], "", FINISH_LENGTH, None, None, version, prompt_len)


def shared_sampling_fields(params: SamplingParams, end_ids: Set[int]) -> dict[str, Any]:
    """The sampling settings SGLang and vLLM both take under these names and meanings."""
    return {
        "temperature": 0.0 if params.is_greedy else float(params.temperature),
        "top_p": float(params.top_p),
        "min_p": float(params.min_p),
        "repetition_penalty": float(params.repetition_penalty),
        "stop_token_ids": sorted(set(end_ids) | set(params.stop_token_ids)),
    }


def stored_logp(value: Any, stats: dict[str, int]) -> float:
    """A behaviour log-prob as stored: finite and <= 0; a missing or bad one is 0.0.

    Bad values are counted in ``stats["nonfinite_logps"]``.
    """
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    if not math.isfinite(x):
        stats["nonfinite_logps"] += 1
        return 0.0
    return min(x, 0.0)


def finish_generation(
    tokenizer: Any,
    ids: list[int],
    logps: list[float],
    *,
    stopped: bool,
    matched: Any,
    end_ids: Set[int],
    version: int,
    prompt_len: int,
) -> Generation:
    """A `Generation` from a remote result, in `TorchEngine`'s conventions.

    ``stopped``: the server stopped the row itself (not its budget). ``matched``: what it
    stopped on, a stop string or a token id (None: an end token). A final end token (one
    of ``end_ids`` or the matched id) is moved out of ``ids``/``logps`` (which are
    changed in place) into ``end_token_id``/``end_logp``.
    """
    end_id = end_logp = None
    finish = FINISH_LENGTH
    if stopped:
        finish = FINISH_STOP if isinstance(matched, str) else FINISH_EOS
        if ids and (ids[-1] in end_ids or (isinstance(matched, int) and ids[-1] == matched)):
            end_id, end_logp = ids.pop(), logps.pop()
            finish = FINISH_EOS
    return Generation(
        token_ids=ids,
        logps=logps,
        sample_logps=list(logps),
        text=tokenizer.decode(ids, skip_special_tokens=True),
        finish_reason=finish,
        end_token_id=end_id,
        end_logp=end_logp,
        version=version,
        prompt_tokens=prompt_len,
    )


class PushedWeights:
    """Stands in for ``engine.model`` of a server engine: the weights it was last sent.

    A server's weights cannot be read back cheaply, so a CPU copy of what was pushed is
    kept for callers that save the rollout weights (a checkpoint taken while the rollout
    weights lag the policy).
    """

    def __init__(self) -> None:
        self._state: dict[str, torch.Tensor] | None = None

    def keep(self, state: Mapping[str, torch.Tensor]) -> None:
        """Copy ``state`` to the CPU, into the buffers of the previous copy when they fit."""
        old = self._state or {}
        kept: dict[str, torch.Tensor] = {}
        with torch.no_grad():
            for name, tensor in state.items():
                if not torch.is_tensor(tensor):
                    continue
                buffer = old.get(name)
                if (
                    buffer is not None
                    and buffer.shape == tensor.shape
                    and buffer.dtype == tensor.dtype
                ):
                    kept[name] = buffer.copy_(tensor.detach())
                else:
                    kept[name] = tensor.detach().to("cpu", copy=True)
        self._state = kept

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The last weights sent; the next push overwrites these tensors: clone to keep."""
        if self._state is None:
            raise RuntimeError("no weights have been sent to the rollout server yet")
        return dict(self._state)


class LiveRowsEngine(BatchEngine):
    """`BatchEngine` for engines that hand whole batches of rows to another generator.

    Zero-budget rows get an empty `Generation` without asking the backend; calls are
    counted (the per-call seed depends on the count). A subclass names its counters in
    ``STAT_NAMES`` and implements `_generate_live` for the rows that have a token budget.
    """

    _seed: int | None
    _calls: int

    def reseed(self, seed: int) -> None:
        """Restart the per-call seeds: the same seed and calls give the same request seeds."""
        self._seed = int(seed)
        self._calls = 0

    def _call_seed(self) -> int | None:
        """This call's request seed: differs per ``generate`` call (None: never seeded)."""
        if self._seed is None:
            return None
        return (self._seed * 1_000_003 + self._calls) % (2**31)

    @abc.abstractmethod
    def _generate_live(
        self, rows: list[list[int]], budgets: list[int], params: SamplingParams, version: int
    ) -> list[Generation]:
        """One `Generation` per row, in order; every budget is positive."""

    def _sample_rows(
        self, rows: list[list[int]], budgets: list[int], params: SamplingParams
    ) -> list[Generation]:
        version = self.version
        live = [i for i in range(len(rows)) if budgets[i] > 0]
        made: dict[int, Generation] = {}
        if live:
            outs = self._generate_live(
                [rows[i] for i in live], [budgets[i] for i in live], params, version
            )
            made = dict(zip(live, outs, strict=True))
        self._calls += 1
        return [
            made[i] if i in made else empty_generation(version, len(row))
            for i, row in enumerate(rows)
        ]


__all__ = [
    "LiveRowsEngine",
    "PushedWeights",
    "empty_generation",
    "finish_generation",
    "generation_rows",
    "shared_sampling_fields",
    "stored_logp",
    "tokenizer_end_ids",
]
