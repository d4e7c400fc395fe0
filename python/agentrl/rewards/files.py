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
from typing import IO, TYPE_CHECKING, Any

from agentrl import _core
from agentrl.rewards.config import RewardConfig
from agentrl.rewards.scoring import TERM_KEYS, config_dict

if TYPE_CHECKING:
    import numpy as np

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
class RewardHistogram:
    """The finite rewards of a file at a glance: what `agentrl score` prints."""

    # How many rewards were finite; the other fields describe only these.
    finite: int
    mean: float
    min: float
    max: float
    # ``len(counts) + 1`` edges from ``min`` to ``max``; one bin when all rewards are equal.
    edges: list[float]
    # Rewards per bin as ``numpy.histogram`` counts them (the last bin includes ``max``).
    counts: list[int]


@dataclass(frozen=True)
class FileScoreSummary:
    """What scoring a file found."""

    # Lines read, blank and skipped ones included.
    lines: int
    # The reward of each scored line, in input order, as float64 bytes (see ``rewards``).
    reward_bytes: bytearray
    # ``(line number, reason)`` of the skipped lines (the first 10,000 when there are more).
    skipped: list[tuple[int, str]]
    # Every skipped line, listed or not.
    skipped_count: int
    # Mean contribution of each term over the scored lines (empty when none was scored).
    term_means: dict[str, float]
    # Each scored line's terms (only with ``explain=True``).
    explanations: list[LineExplanation]

    @property
    def rewards(self) -> np.ndarray:
        """The reward of each scored line, in input order (a float64 view, no copy)."""
        import numpy as np  # on first use: the command line's summary does without it

        return np.frombuffer(self.reward_bytes, dtype=np.float64)

    @property
    def scored(self) -> int:
        return len(self.reward_bytes) // 8

    def histogram(self, bins: int = 12) -> RewardHistogram:
        """Count, mean, range and ``bins`` equal-width bins of the finite rewards."""
        if bins < 1:
            raise ValueError(f"bins must be at least 1, got {bins}")
        raw = _core.reward_histogram(bytes(self.reward_bytes), bins)
        return RewardHistogram(
            finite=int(raw["finite"]),
            mean=float(raw["mean"]),
            min=float(raw["min"]),
            max=float(raw["max"]),
            edges=[float(e) for e in raw["edges"]],
            counts=[int(c) for c in raw["counts"]],
        )


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
    reward_bytes = raw["rewards"]
    n = len(reward_bytes) // 8
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
        reward_bytes=reward_bytes,
        skipped=[(int(line), str(reason)) for line, reason in raw["skipped"]],
        skipped_count=int(raw["skipped_count"]),
        term_means=term_means,
        explanations=explanations,
    )
