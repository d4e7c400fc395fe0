"""Metrics as JSON lines: one object per logged step or evaluation, flushed as written.

A line is ``{"step": N, "kind": "train" | "eval", "time": seconds, <metric>: value, ...}``.
Non-finite values are written as ``null`` (JSON has no NaN) so every line stays valid
JSON. A resumed run first drops the lines written after the step it resumes from, so the
file never holds two histories for the same step.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentrl.errors import SaveError
from agentrl.utils.atomic import saving, write_text_atomic


def _json_value(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item"):
        return _json_value(value.item())
    if isinstance(value, str):
        return value
    return None


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every well-formed record of a metrics file (a torn last line is ignored)."""
    records: list[dict[str, Any]] = []
    p = Path(path)
    if not p.is_file():
        return records
    with open(p, encoding="utf-8") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("step"), int):
                records.append(record)
    return records


class MetricsLog:
    """Append-only JSONL writer; ``resume_step`` trims records after that step first."""

    def __init__(self, path: str | os.PathLike[str], resume_step: int | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_step is None:
            self.path.write_text("", encoding="utf-8")
        else:
            kept = [r for r in read_metrics(self.path) if r["step"] <= resume_step]
            text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept)
            write_text_atomic(self.path, text)
        self._handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - long-lived

    def write(self, step: int, kind: str, metrics: Mapping[str, Any], **extra: Any) -> None:
        record: dict[str, Any] = {"step": int(step), "kind": kind}
        for key, value in {**extra, **metrics}.items():
            record[key] = _json_value(value)
        line = json.dumps(record, ensure_ascii=False) + "\n"
        start = self._handle.tell()
        try:
            with saving(self.path):
                self._handle.write(line)
                self._handle.flush()
        except SaveError:
            self._drop_partial(start)
            raise

    def _drop_partial(self, start: int) -> None:
        """Cut what a failed write left of its line, so the file stays whole lines."""
        with contextlib.suppress(OSError):  # its buffer holds the line: closing retries it
            self._handle.close()
        with contextlib.suppress(OSError):
            os.truncate(self.path, start)

    def close(self) -> None:
        if not self._handle.closed:
            self._handle.close()


__all__ = ["MetricsLog", "read_metrics"]
