"""The learning-rate shape SFT and RL share: linear warm-up, a plateau, then cosine to a floor."""

from __future__ import annotations

import math


def lr_factor(
    step: int,
    total: int,
    warmup: int,
    min_ratio: float,
    progress: float = 0.0,
    decay_fraction: float = 1.0,
) -> float:
    """Linear warm-up to 1, hold, then cosine decay to `min_ratio` at the end of the run.

    The end is `total` steps, or earlier when `progress` (the share of a time budget
    already used) is ahead of the step count: a run cut by its budget still anneals.
    The decay spans the last `decay_fraction` of the steps after warm-up (1.0: all of
    them, plain cosine); before it the factor holds at 1. A long plateau lets a skill that
    appears suddenly (copying, for a small model) appear early and then settle.
    """
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    done = max((step - warmup) / max(1, total - warmup), progress)
    done = min(1.0, done)
    fraction = min(max(decay_fraction, 1e-9), 1.0)
    done = max(0.0, done - (1.0 - fraction)) / fraction
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * done))


__all__ = ["lr_factor"]
