"""Scoring a JSONL stream of trajectories: one scored line out per good line in.

Each input line is a JSON object in the golden reward file's schema; the output repeats it
with ``reward`` and ``details`` added. A line's own ``config`` object overrides the settings
for that line. A line that is not a JSON object, or that the scorer rejects, is recorded
with its line number and skipped. Lines are scored in chunks: one Rust call per chunk,
small enough to stream.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from agentrl.rewards.config import RewardConfig
from agentrl.rewards.scoring import TERM_KEYS, ScoreResult, score_batch

# Lines scored per Rust call: large enough to amortise the call, small enough to stream.
CHUNK_ROWS = 8192

# Called with each scored chunk: the input line numbers, in order, and their scores.
ChunkHook = Callable[[list[int], ScoreResult], None]


@dataclass
class ScoredStream:
    """Every finite-or-not reward in input order, each term's mean, the skipped lines."""

    rewards: np.ndarray
    term_means: dict[str, float]
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line number, why)


def read_records(handle: TextIO, errors: list[tuple[int, str]]) -> Iterator[tuple[int, dict]]:
    """``(line number, record)`` for each JSON-object line; bad lines go to ``errors``."""
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append((number, f"invalid JSON: {exc.msg} at column {exc.colno}"))
            continue
        if not isinstance(record, dict):
            errors.append((number, f"expected a JSON object, got {type(record).__name__}"))
            continue
        yield number, record


def _chunks(items: Iterator[tuple[int, dict]], size: int) -> Iterator[list[tuple[int, dict]]]:
    chunk: list[tuple[int, dict]] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _score_chunk(
    chunk: list[tuple[int, dict]],
    config: RewardConfig,
    threads: int | None,
    errors: list[tuple[int, str]],
) -> tuple[list[tuple[int, dict]], ScoreResult | None]:
    """Scores a chunk in one call; if the scorer rejects a record, finds and drops it."""
    records = [record for _, record in chunk]
    try:
        return chunk, score_batch(records, config, threads, explain=True)
    except (ValueError, TypeError):
        pass
    kept = []
    for number, record in chunk:
        try:
            score_batch([record], config, 1)
        except (ValueError, TypeError) as exc:
            errors.append((number, str(exc).removeprefix("record 0: ")))
            continue
        kept.append((number, record))
    if not kept:
        return kept, None
    return kept, score_batch([r for _, r in kept], config, threads, explain=True)


def _json_float(value: float) -> Any:
    return value if np.isfinite(value) else str(value)


def score_jsonl(
    source: TextIO,
    sink: TextIO,
    config: RewardConfig,
    threads: int | None = None,
    on_chunk: ChunkHook | None = None,
) -> ScoredStream:
    """Score every line of ``source`` and write the scored lines to ``sink``."""
    errors: list[tuple[int, str]] = []
    rewards: list[np.ndarray] = []
    terms: dict[str, list[np.ndarray]] = {key: [] for key in TERM_KEYS}
    for chunk in _chunks(read_records(source, errors), CHUNK_ROWS):
        kept, result = _score_chunk(chunk, config, threads, errors)
        if result is None:
            continue
        rows = result.to_records()
        for (_, record), detail in zip(kept, rows, strict=True):
            record["reward"] = _json_float(detail["reward"])
            record["details"] = {k: _json_float(v) for k, v in detail.items()}
            sink.write(json.dumps(record, ensure_ascii=False) + "\n")
        if on_chunk is not None:
            on_chunk([number for number, _ in kept], result)
        rewards.append(result.rewards.copy())
        for key, column in (result.contributions or {}).items():
            terms[key].append(column.copy())
    all_rewards = np.concatenate(rewards) if rewards else np.zeros(0)
    means = {key: float(np.concatenate(v).mean()) for key, v in terms.items() if v}
    return ScoredStream(all_rewards, means, sorted(errors))


__all__ = ["CHUNK_ROWS", "ScoredStream", "read_records", "score_jsonl"]
