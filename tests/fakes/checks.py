"""Comparable forms of golden data, timings on a busy machine, and a stream that the user
interrupts."""

from __future__ import annotations

import io
import json
import math
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSONL file (blank lines skipped)."""
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def typed(value: Any, *, nonfinite_as_text: bool = False) -> Any:
    """A comparable form of JSON-like data (and tuples) that keeps types (``1``, ``1.0``
    and ``True`` differ) and dict key order, with NaN equal to itself.

    ``nonfinite_as_text``: NaN and the infinities compare equal to the strings "nan",
    "inf" and "-inf", as golden files write them.
    """
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        if nonfinite_as_text and not math.isfinite(value):
            return ("str", "nan" if math.isnan(value) else "inf" if value > 0 else "-inf")
        return ("float", "nan" if math.isnan(value) else value)
    if isinstance(value, str):
        return ("str", value)
    if value is None:
        return ("none", None)
    if isinstance(value, list | tuple):
        items = [typed(v, nonfinite_as_text=nonfinite_as_text) for v in value]
        return (type(value).__name__, items)
    if isinstance(value, dict):
        return (
            "dict",
            [(k, typed(v, nonfinite_as_text=nonfinite_as_text)) for k, v in value.items()],
        )
    raise TypeError(f"unexpected {type(value).__name__} in JSON-like data")


def same_float(a: float, b: float) -> bool:
    """Bit-level agreement: NaN equals NaN, and 0.0 differs from -0.0."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def fastest_seconds(run: Callable[[], Any], repeats: int = 3) -> float:
    """The best wall time of ``repeats`` calls (ignores scheduling noise on a busy machine)."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


class InterruptedReader(io.RawIOBase):
    """A byte stream during whose second read the user presses Ctrl-C (SIGINT)."""

    def __init__(self, data: bytes) -> None:
        self.data = io.BytesIO(data)
        self.calls = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        self.calls += 1
        if self.calls == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return self.data.read(size)
