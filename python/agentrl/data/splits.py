"""Eval split, fixed eval indices and per-rank shards of a prompt pool (the compatible rules).

The split and the eval indices use their own seeded ``random.Random``, so the same data
and seeds give the same held-out prompts on every run and every machine.
"""

from __future__ import annotations

import random

from agentrl.data.prompt_pool import PromptPool


def split_prompt_pool(
    pool: PromptPool, eval_ratio: float, eval_max_samples: int, seed: int = 42
) -> tuple[PromptPool, PromptPool]:
    """``(train, eval)``: a seeded random ``eval_ratio`` of the prompts, at most
    ``eval_max_samples`` and never all of them; both keep the original order.

    With ``eval_ratio <= 0`` or fewer than 10 prompts, everything is training data.
    """
    if eval_ratio <= 0 or len(pool) < 10:
        return pool, PromptPool.from_samples([])
    order = list(range(len(pool)))
    random.Random(seed).shuffle(order)
    eval_n = min(max(1, int(len(pool) * eval_ratio)), int(eval_max_samples), len(pool) - 1)
    held_out = set(order[:eval_n])
    train = (i for i in range(len(pool)) if i not in held_out)
    return pool.subset(train, pool.stats), pool.subset(sorted(held_out))


def build_fixed_eval_indices(
    eval_pool: PromptPool, eval_samples: int, seed: int = 1234
) -> list[int]:
    """The indices of the eval prompts scored at every evaluation (same set each time);
    ``eval_samples`` -1 scores every prompt of the pool."""
    n = len(eval_pool) if int(eval_samples) < 0 else min(int(eval_samples), len(eval_pool))
    if n <= 0:
        return []
    order = list(range(len(eval_pool)))
    random.Random(seed).shuffle(order)
    return order[:n]


def shard_prompt_pool(pool: PromptPool, world_size: int, rank: int) -> PromptPool:
    """Every ``world_size``-th prompt starting at ``rank``; a rank left empty gets one."""
    if world_size <= 1 or len(pool) == 0:
        return pool
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside 0..{world_size - 1}")
    indices = range(rank, len(pool), world_size)
    return pool.subset(indices if len(indices) else [rank % len(pool)])


__all__ = ["build_fixed_eval_indices", "shard_prompt_pool", "split_prompt_pool"]
