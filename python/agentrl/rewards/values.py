"""What a reward function may return, checked in one place.

A reward function returns one value per completion: a finite number (``int``, ``float``,
``bool`` counts as 0/1, a numpy scalar or a one-element array/tensor), or ``None`` where
it does not apply; or ``None`` for the whole batch. Anything else is the function's
fault and a :class:`RewardValueError` naming it (exit 1), never a bug in agentrl: a NaN
(deliberately not read as "does not apply", as some GRPO trainers read it: a NaN is as
often a 0/0 as a choice, and ``None`` says it plainly; docs/compat.md) or an infinity,
a string (a numeric one such as ``"1.5"`` too: it is not a number, and passing it
silently would hide a function that returns text), a list of the wrong length, a single
value where a list was due.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from agentrl.errors import UserCodeError


class DetailedRewards(list):
    """A reward function's values (one per completion, a list as any other) with detail
    columns beside them: ``details[key]`` holds one number per completion (NaN where it
    does not apply). :class:`agentrl.rewards.CombinedReward` keeps them as
    ``<function>/<key>`` and the trainer reports their means, as it does the built-in
    tool-use reward's."""

    def __init__(self, values: Any, details: Mapping[str, Any]) -> None:
        super().__init__(values)
        self.details = {str(k): np.asarray(v, dtype=np.float64) for k, v in details.items()}
        for key, column in self.details.items():
            if column.shape != (len(self),):
                raise ValueError(
                    f"detail {key!r} holds {column.shape} values for {len(self)} completions"
                )


class RewardValueError(UserCodeError, ValueError):
    """A reward function returned something that is not a reward: its message names the
    function and the completion."""


def reward_value(name: str, value: Any, row: int) -> float | None:
    """One completion's reward as a float (None stays None); raises :class:`RewardValueError`."""
    if value is None:
        return None
    number: float | None = None
    if isinstance(value, numbers.Real) and not isinstance(value, str):
        number = float(value)
    elif getattr(value, "ndim", None) == 0 or getattr(value, "size", None) == 1:
        item = value.item() if hasattr(value, "item") else None  # numpy / torch scalars
        if isinstance(item, numbers.Real):
            number = float(item)
    if number is None:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise RewardValueError(
            f"reward function {name!r} returned {shown} ({type(value).__name__}) for "
            f"completion {row}: a reward must be a finite number or None"
        )
    if not math.isfinite(number):
        hint = " (None, not NaN, says it does not apply)" if math.isnan(number) else ""
        raise RewardValueError(
            f"reward function {name!r} returned {number} for completion {row}: a reward "
            f"must be a finite number or None{hint}"
        )
    return number


def reward_list(name: str, raw: Any, n: int) -> Any:
    """``raw`` itself when it is None or holds ``n`` entries; raises :class:`RewardValueError`
    for anything else (a single number, a string, a list of the wrong length)."""
    if raw is None:
        return raw
    if (
        isinstance(raw, str | bytes | Mapping)
        or not hasattr(raw, "__len__")
        or (getattr(raw, "ndim", 1) == 0)
    ):
        raise RewardValueError(
            f"reward function {name!r} returned {type(raw).__name__}, not a list with one "
            f"reward (or None) per completion ({n})"
        )
    if len(raw) != n:
        raise RewardValueError(
            f"reward function {name!r} returned {len(raw)} rewards for {n} completions: one "
            "reward (or None) per completion is due"
        )
    return raw


def reward_values(name: str, raw: Any, n: int) -> np.ndarray:
    """The ``n`` rewards ``raw`` holds as float64, NaN where None (a ``None`` batch: all)."""
    if reward_list(name, raw, n) is None:
        return np.full(n, np.nan)
    values = [reward_value(name, value, row) for row, value in enumerate(raw)]
    return np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)


__all__ = ["RewardValueError", "reward_list", "reward_value", "reward_values"]
