"""Scoring a JSONL file of trajectories end to end in Rust: :func:`score_file`.

Each line is a record in the golden reward file's schema; the output repeats it with
``reward`` and ``details`` added, byte for byte as ``json.dumps(record, ensure_ascii=False)``
writes it (non-finite values as the strings ``"nan"``, ``"inf"``, ``"-inf"``). Reading,
decoding, checking, scoring and writing all run in Rust on worker threads with the GIL
released, a chunk of lines at a time, so memory stays bounded however large the file.

Lines are checked strictly (see ``rust/src/scorefile/schema.rs``): a line that is not valid
UTF-8, not valid JSON, nested too deeply, or whose fields have the wrong type (``gt`` not a
list of strings or finite numbers, ``messages`` missing, ...) is skipped and reported with
its line number and what was expected; the other lines are scored. An output path is
written to a temporary file beside it and renamed when complete, so a failed run leaves no
file behind. A file opened by path ends lines at ``\\n``, ``\\r\\n`` or ``\\r`` as Python's
``open()`` does, a stream at ``\\n`` as ``sys.stdin`` does, so line numbers match
``enumerate(file, 1)``. A lone surrogate escape (``"\\ud800"``), which no UTF-8 file can
hold, is written as U+FFFD.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from agentrl import _core
from agentrl.rewards.config import RewardConfig
from agentrl.rewards.scoring import TERM_KEYS, config_dict

PathOrStream = str | os.PathLike[str] | IO[bytes] | IO[str]


@dataclass(frozen=True)
class LineExplanation:
    """One scored line's reward as the sum of its terms."""

    line: int
    reward: float
    raw_reward: float
    # The terms that moved the reward, with their signed contributions, in term order.
    terms: list[tuple[str, float]]


@dataclass(frozen=True)
class FileScoreSummary:
    """What scoring a file found."""

    # Lines read, blank and skipped ones included.
    lines: int
    # The reward of each scored line, in input order.
    rewards: np.ndarray
    # ``(line number, reason)`` of the skipped lines (the first 10,000 when there are more).
    skipped: list[tuple[int, str]]
    # Every skipped line, listed or not.
    skipped_count: int
    # Mean contribution of each term over the scored lines (empty when none was scored).
    term_means: dict[str, float]
    # Each scored line's terms (only with ``explain=True``).
    explanations: list[LineExplanation]

    @property
    def scored(self) -> int:
        return int(self.rewards.size)


def _endpoint(target: PathOrStream) -> Any:
    """A path as ``str`` (Rust opens it); a file object as it is."""
    return os.fspath(target) if isinstance(target, str | os.PathLike) else target


def score_file(
    src: PathOrStream,
    dst: PathOrStream,
    config: RewardConfig | dict[str, Any] | None = None,
    threads: int | None = None,
    *,
    explain: bool = False,
) -> FileScoreSummary:
    """Score the JSONL ``src`` (plain or gzip) into ``dst``; see the module docstring.

    ``src`` and ``dst`` are paths or file objects (binary or text); a path output appears
    only when complete. ``threads`` defaults to ``AGENTRL_NUM_THREADS``, else every core.
    Raises ``OSError`` naming the file when the input cannot be read or the output written.
    """
    if threads is not None and (isinstance(threads, bool) or threads < 1):
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    raw = _core.reward_score_file(
        _endpoint(src), _endpoint(dst), config_dict(config), threads, explain
    )
    rewards = np.frombuffer(raw["rewards"], dtype=np.float64)
    n = int(rewards.size)
    term_means = (
        {key: total / n for key, total in zip(TERM_KEYS, raw["term_sums"], strict=True)}
        if n
        else {}
    )
    explanations = [
        LineExplanation(
            line=line,
            reward=reward,
            raw_reward=raw_reward,
            terms=[(key, v) for key, v in zip(TERM_KEYS, terms, strict=True) if v != 0.0],
        )
        for line, reward, raw_reward, terms in raw["explained"]
    ]
    return FileScoreSummary(
        lines=int(raw["lines"]),
        rewards=rewards,
        skipped=[(int(line), str(reason)) for line, reason in raw["skipped"]],
        skipped_count=int(raw["skipped_count"]),
        term_means=term_means,
        explanations=explanations,
    )
