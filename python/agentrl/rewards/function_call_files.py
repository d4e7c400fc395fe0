"""Scoring a JSONL file with the ``function_call`` reward: what ``agentrl score --reward
function_call`` runs.

Each line holds ``tools``, ``ground_truth`` and ``completion`` (the model's text); the
output repeats it with ``reward`` and ``details`` (every term, ``valid`` among them, and
``calls``, ``no_call_expected``) added, as ``json.dumps(record, ensure_ascii=False)``
writes it. Lines are read a chunk at a time and each chunk is decoded, checked and scored
in Rust with the GIL released, so memory stays bounded. A line that cannot be scored (not
UTF-8, not JSON, a field missing or malformed) is skipped and reported with its line number
and the reason. The input may be gzip-compressed; an output path is written to a temporary
file beside it and renamed when complete.
"""

from __future__ import annotations

import gzip
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from agentrl.rewards.config import RewardConfig
from agentrl.rewards.files import FileScoreSummary, LineExplanation
from agentrl.rewards.function_call import TERM_KEYS, WEIGHT_SETTINGS, score_function_call_lines
from agentrl.utils.atomic import follow_umask

PathOrStream = str | os.PathLike[str] | IO[bytes] | IO[str]

# Lines scored per Rust call.
CHUNK_LINES = 8192
# Skipped lines listed one by one (the others are only counted), as the tool-use path does.
MAX_LISTED_SKIPS = 10_000


def _binary_lines(stream: IO[Any]) -> Iterator[bytes]:
    """The stream's lines as bytes (gzip recognised by its magic bytes), without endings."""
    raw = getattr(stream, "buffer", stream)
    if not hasattr(raw, "peek"):
        for line in raw:
            yield (line.encode("utf-8") if isinstance(line, str) else line).rstrip(b"\r\n")
        return
    if raw.peek(2)[:2] == b"\x1f\x8b":
        raw = gzip.GzipFile(fileobj=raw)
    for line in raw:
        yield line.rstrip(b"\r\n")


def _chunks(lines: Iterator[bytes]) -> Iterator[list[bytes]]:
    chunk: list[bytes] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == CHUNK_LINES:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def score_function_call_file(
    src: PathOrStream,
    dst: PathOrStream,
    config: RewardConfig | Mapping[str, Any] | None = None,
    *,
    tool_format: str = "auto",
    threads: int | None = None,
    explain: bool = False,
) -> FileScoreSummary:
    """Scores the JSONL ``src`` into ``dst`` (see the module docstring); the summary is
    `agentrl score`'s, with each term's mean weighted contribution."""
    settings = config if isinstance(config, RewardConfig) else RewardConfig.from_dict(config or {})
    weights = np.asarray([getattr(settings, WEIGHT_SETTINGS[t]) for t in TERM_KEYS])
    source_is_path = isinstance(src, str | os.PathLike)
    source = open(src, "rb") if source_is_path else src  # noqa: SIM115 (closed below)
    sink, temp = _open_sink(dst)
    rewards: list[np.ndarray] = []
    skipped: list[tuple[int, str]] = []
    skipped_count = 0
    term_sums = np.zeros(len(TERM_KEYS))
    explanations: list[LineExplanation] = []
    lines = 0
    try:
        for chunk in _chunks(_binary_lines(source)):
            scored = score_function_call_lines(
                chunk, settings, tool_format=tool_format, threads=threads
            )
            terms = np.stack([scored.scores.details[t] for t in TERM_KEYS], axis=1) * weights
            term_sums += terms.sum(axis=0)
            rewards.append(scored.scores.rewards)
            for index, reason in scored.skipped:
                skipped_count += 1
                if len(skipped) < MAX_LISTED_SKIPS:
                    skipped.append((lines + index + 1, reason))
            written = [text for text in scored.outputs if text is not None]
            if explain:
                numbers = [lines + i + 1 for i, t in enumerate(scored.outputs) if t is not None]
                for number, reward, row in zip(numbers, scored.scores.rewards, terms, strict=True):
                    shown = [(k, float(v)) for k, v in zip(TERM_KEYS, row, strict=True) if v]
                    explanations.append(
                        LineExplanation(number, float(reward), float(reward), shown)
                    )
            _write(sink, "".join(text + "\n" for text in written))
            lines += len(chunk)
        if temp is not None:
            sink.close()
            follow_umask(Path(temp))  # mkstemp made it 0600; its siblings follow the umask
            os.replace(temp, os.fspath(dst))  # type: ignore[arg-type]
            temp = None
    finally:
        if source_is_path:
            source.close()
        if temp is not None:
            sink.close()
            Path(temp).unlink(missing_ok=True)
    all_rewards = np.concatenate(rewards) if rewards else np.zeros(0)
    n = len(all_rewards)
    return FileScoreSummary(
        lines=lines,
        reward_bytes=bytearray(all_rewards.astype(np.float64).tobytes()),
        skipped=skipped,
        skipped_count=skipped_count,
        term_means=dict(zip(TERM_KEYS, (term_sums / n).tolist(), strict=True)) if n else {},
        explanations=explanations,
    )


def _open_sink(dst: PathOrStream) -> tuple[Any, str | None]:
    """(a writable stream, the temporary path to rename when done, or None for a stream)."""
    if not isinstance(dst, str | os.PathLike):
        return dst, None
    target = Path(dst)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    return os.fdopen(fd, "wb"), temp


def _write(sink: Any, text: str) -> None:
    if not text:
        return
    try:
        sink.write(text.encode("utf-8"))
    except TypeError:  # a text stream
        sink.write(text)


__all__ = ["score_function_call_file"]
