"""Pieces every remote engine shares: expanding prompts into rows, token budgets, end ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentrl.rollout.engine import FINISH_LENGTH, Generation
from agentrl.rollout.sampling import SamplingParams


def expand_rows(prompts: Sequence[Sequence[int]], num_samples: int) -> list[list[int]]:
    """Each prompt ``num_samples`` times (prompt-major), as lists of ints; no empty prompt."""
    samples = max(1, int(num_samples))
    rows = [[int(t) for t in p] for p in prompts for _ in range(samples)]
    for i, ids in enumerate(rows):
        if not ids:
            raise ValueError(f"prompt {i // samples} is empty")
    return rows


def row_budgets(
    max_new_tokens: int | Sequence[int] | None,
    params: SamplingParams,
    n_rows: int,
    n_prompts: int,
) -> list[int]:
    """One new-token budget per output row (the `TorchEngine.generate` convention)."""
    if max_new_tokens is None:
        budgets = [params.max_new_tokens] * n_rows
    elif isinstance(max_new_tokens, int):
        budgets = [max_new_tokens] * n_rows
    else:
        budgets = [int(b) for b in max_new_tokens]
        if len(budgets) != n_rows:
            raise ValueError(
                f"{len(budgets)} token budgets for {n_rows} output rows ({n_prompts} prompts)"
            )
    return [max(0, b) for b in budgets]


def tokenizer_end_ids(tokenizer: Any) -> list[int]:
    """EOS and pad ids of a tokenizer (the torch engine's default end tokens)."""
    ids = []
    for name in ("eos_token_id", "pad_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            ids.append(value)
    return ids


def empty_generation(version: int, prompt_len: int) -> Generation:
    """What a row with a zero token budget produces."""
    return Generation([], [], [], "", FINISH_LENGTH, None, None, version, prompt_len)


__all__ = ["empty_generation", "expand_rows", "row_budgets", "tokenizer_end_ids"]
