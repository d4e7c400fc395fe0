"""The learning-rate shape SFT and RL share: linear warm-up, then cosine to a floor."""

from __future__ import annotations

import math


def lr_factor(step: int, total: int, warmup: int, min_ratio: float, progress: float = 0.0) -> float:
    """Linear warm-up to 1, then cosine decay to `min_ratio` at the end of the run.

    The end is `total` steps, or earlier when `progress` (the share of a time budget
    already used) is ahead of the step count: a run cut by its budget still anneals.
    """
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    done = max((step - warmup) / max(1, total - warmup), progress)
    done = min(1.0, done)
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * done))


__all__ = ["lr_factor"]
