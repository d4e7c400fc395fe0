"""Compiled decoding for `TorchEngine` (``compile_decode``): a decoding strategy beside
`decoding.EagerDecoding`.

The model is compiled (``torch.compile``, dynamic shapes, built at the first call) and
decodes one token at a time over a fixed-size KV cache (`kv_cache.as_fixed`); prefill stays
eager. Each decoding step runs fused kernels instead of a few hundred small ones. Compiled
kernels sum in other orders, so sampled tokens can differ from eager ones (log-probs agree
within float rounding). Caches that are not plain full-attention layers decode eagerly,
with a warning, counted in ``compiled_decode_unsupported``.

A prompt prefix every row shares (the G samples of a group) is held once in the cache and
read through `shared_prefix` attention, when a first-use check finds that one step through
that path gives the logits of the model's own attention.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from agentrl.errors import RecurringError, first_line
from agentrl.rollout.decoding import EagerDecoding
from agentrl.rollout.kv_store import count_unsupported
from agentrl.rollout.prefill import MIN_SHARED_PREFIX, Forward

logger = logging.getLogger(__name__)


class CompileFailed(RecurringError):
    """``torch.compile`` could not build the decoder (a compiler or toolchain problem, an
    operation it cannot trace): the run stops, naming the option that decodes eagerly."""


def is_compile_failure(exc: BaseException) -> bool:
    """Whether ``exc`` comes from torch's compiler stack (dynamo, inductor, its C++ build)
    rather than from running the model."""
    return any(
        cls.__module__.startswith(("torch._dynamo", "torch._inductor")) for cls in type(exc).__mro__
    )


def prefix_kwargs(cache: Any) -> dict[str, Any]:
    """Forward arguments that route a decoding step through `shared_prefix` attention: the
    cache's shared block per layer (empty when it holds none: each row's own positions are
    then all there is, still read without copying grouped key heads)."""
    from agentrl.rollout.kv_cache import SharedPrefixCache

    block = cache.shared_prefix if isinstance(cache, SharedPrefixCache) else ()
    return {"shared_prefix_kv": block}


class CompiledDecoding:
    """Decoding steps through ``model`` compiled, over a fixed-size cache (module doc).

    ``forward`` runs the engine's model or the module it is given (the compiled one);
    ``fallback_token_id`` is a token any row may be fed (the shared-prefix check's input).
    ``shared_prefix``: whether steps go through the grouped attention of `shared_prefix`
    (and so may hold a shared prompt prefix once); None: not checked yet.
    """

    def __init__(
        self,
        forward: Forward,
        model: torch.nn.Module,
        fallback_token_id: int,
        shared_prefix: bool | None,
    ) -> None:
        self.forward = forward
        self.model = model
        self.fallback_token_id = fallback_token_id
        self.shared_prefix = shared_prefix
        self.eager = EagerDecoding(forward)
        self.compiled: torch.nn.Module | None = None
        self.stats: dict[str, int] = {}  # the counters of the current decode (`begin`)

    def begin(
        self, cache: Any, attn: torch.Tensor, budget: int, common: int, stats: dict[str, int]
    ) -> tuple[Any, Any]:
        """The prefilled ``cache`` (positions under ``attn``) as a fixed-size copy, holding
        the ``common`` leading positions once when there are enough of them; the eager
        strategy's cache when it cannot be copied (warned once, counted)."""
        from agentrl.rollout.kv_cache import FIXED_ROOM, as_fixed  # imports transformers

        self.stats = stats
        room = min(budget, FIXED_ROOM)
        candidate = common if common >= MIN_SHARED_PREFIX else 0
        if self.shared_prefix is None:
            self.shared_prefix = self._shared_prefix_agrees(cache, attn, candidate)
        shared = candidate if self.shared_prefix else 0
        fixed = as_fixed(cache, attn.size(1), room, shared)
        if fixed is None:
            count_unsupported(
                stats,
                "compiled_decode_unsupported",
                "compile_decode: %s caches have no fixed-size form here; these rows decode eagerly",
                cache,
            )
            return self.eager.begin(cache, attn, budget, common, stats)
        if self.compiled is None:
            self.compiled = torch.compile(self.model, dynamic=True)
        if shared:
            stats["shared_prefix_decodes"] += 1
        return fixed, self

    def step(
        self, token_col: torch.Tensor, attn: torch.Tensor, next_pos: torch.Tensor, cache: Any
    ) -> tuple[torch.Tensor, Any]:
        """One compiled decoding step over a fixed-size cache (copied into a larger one when
        full); the mask spans the whole buffer, its unfilled tail hidden."""
        from agentrl.rollout.kv_cache import FIXED_ROOM, as_fixed, capacity, prefix_length

        if attn.size(1) > capacity(cache):
            cache = as_fixed(cache, attn.size(1) - 1, FIXED_ROOM)
        shared = prefix_length(cache)
        mask = torch.nn.functional.pad(attn[:, shared:], (0, capacity(cache) - attn.size(1)))
        extra = prefix_kwargs(cache) if self.shared_prefix else None
        try:
            out = self.forward(
                token_col, mask, next_pos.unsqueeze(-1), cache, model=self.compiled, extra=extra
            )
        except Exception as exc:
            if not is_compile_failure(exc):
                raise
            raise CompileFailed(
                f"compile_decode: compiling {type(self.model).__name__} for decoding failed "
                f"({type(exc).__name__}: {first_line(exc, 300)}); decode eagerly with "
                "agentrl train --rollout_compile 0 (or TorchEngine(compile_decode=False))"
            ) from exc
        self.stats["compiled_decode_steps"] += 1
        return out

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
            extra = prefix_kwargs(fixed) if grouped else None
            positions = attn.sum(-1, keepdim=True)
            try:
                logits, _ = self.forward(ids, mask, positions, fixed, extra=extra)
            except torch.OutOfMemoryError as exc:
                logger.warning(
                    "compile_decode: the shared-prefix check ran out of memory (%s); "
                    "checking again at the next call",
                    first_line(exc, 300),
                )
                return None
            except (ValueError, TypeError, RuntimeError, AttributeError) as exc:
                logger.warning("compile_decode: shared-prefix attention failed (%s)", exc)
                return False
            steps.append(logits)
        full, split_logits = steps
        if not bool(torch.isfinite(full).all() and torch.isfinite(split_logits).all()):
            logger.warning(
                "compile_decode: the shared-prefix check gave logits that are not "
                "finite; checking again at the next call"
            )
            return None
        agrees = bool((full - split_logits).abs().max() <= 1e-2 * (1 + full.abs().max()))
        if not agrees:
            logger.warning(
                "compile_decode: %s does not take the shared-prefix attention path; "
                "decoding uses its own attention over every row's whole cache",
                type(self.model).__name__,
            )
        return agrees


__all__ = ["CompileFailed", "CompiledDecoding", "is_compile_failure", "prefix_kwargs"]
