"""JSONL read line by line in binary, with a per-line size limit: a gigantic line costs
neither the memory of the whole file nor the memory of the line."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from typing import IO


def _open_binary(path: str) -> IO[bytes]:
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def iter_jsonl_lines(
    path: str, max_line_bytes: int = 0
) -> Iterator[tuple[int, str | None, str | None]]:
    """``(line_number, text, problem)`` for each non-blank line, read in bounded pieces.

    ``problem`` is ``"line_too_long"`` or ``"bad_encoding"`` (then ``text`` is None).
    A line over ``max_line_bytes`` (0: no limit) is skipped without being held in memory.
    """
    with _open_binary(path) as handle:
        number = 0
        while True:
            chunk = handle.readline(max_line_bytes + 1) if max_line_bytes > 0 else handle.readline()
            if not chunk:
                return
            number += 1
            if max_line_bytes > 0 and len(chunk) > max_line_bytes and not chunk.endswith(b"\n"):
                # Discard the rest of the line piece by piece.
                while chunk and not chunk.endswith(b"\n"):
                    chunk = handle.readline(1 << 20)
                yield number, None, "line_too_long"
                continue
            if number == 1 and chunk.startswith(b"\xef\xbb\xbf"):
                chunk = chunk[3:]
            try:
                text = chunk.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield number, None, f"bad_encoding:{exc.reason} at byte {exc.start}"
                continue
            text = text.strip()
            if text:
                yield number, text, None


__all__ = ["iter_jsonl_lines"]
