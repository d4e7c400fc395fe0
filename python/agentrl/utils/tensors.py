"""Checks on weights that every writer of weights shares (checkpoints, exports, syncs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


def has_nonfinite(state: Mapping[str, Any]) -> bool:
    """True when any floating tensor of ``state`` holds a NaN or an infinity.

    Weights like that are never saved, exported or loaded into a rollout engine: they
    would only spread a failed update further.
    """
    return any(
        torch.is_tensor(t) and t.is_floating_point() and not bool(torch.isfinite(t).all())
        for t in state.values()
    )


__all__ = ["has_nonfinite"]
