"""Prompt records from Hugging Face ``datasets`` files: parquet, arrow, JSON arrays, dataset
directories (``save_to_disk`` output or a folder of data files).

JSONL stays with the line reader of :mod:`agentrl.data.jsonl_lines` (per-line error
reporting, bounded memory); this module turns a table into the same record dicts, one per
row, with optional column mapping onto the record keys the pool reads.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TABLE_SUFFIXES = {".parquet": "parquet", ".arrow": "arrow"}


class DatasetFileError(ValueError):
    """A dataset file or directory that cannot be read as asked (names the path)."""


@dataclass(frozen=True)
class ColumnMap:
    """Which columns hold the prompt, the ground truth and the tools ('' keeps the record's
    own keys: prompt/question/query/messages, gt/answer/answers/label, tools/functions)."""

    prompt: str = ""
    answer: str = ""
    tools: str = ""

    def apply(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The row as a record whose keys the prompt pool reads."""
        record = dict(row)
        if self.prompt:
            value = record.pop(self.prompt)
            record.pop("messages", None)
            record["messages" if isinstance(value, list) else "prompt"] = value
        if self.answer:
            record["gt"] = record.pop(self.answer)
        if self.tools:
            record["tools"] = record.pop(self.tools)
        return record

    def missing(self, record: Mapping[str, Any]) -> str:
        """The first mapped column the record lacks ('' when none)."""
        return next(
            (c for c in (self.prompt, self.answer, self.tools) if c and c not in record), ""
        )

    def check(self, columns: list[str], source: str) -> None:
        for kind, name in (("prompt", self.prompt), ("answer", self.answer), ("tools", self.tools)):
            if name and name not in columns:
                raise DatasetFileError(
                    f"{source}: no column {name!r} for --{kind}_column; columns: "
                    + ", ".join(columns)
                )


def _json_array(path: Path) -> bool:
    with path.open("rb") as handle:
        head = handle.read(4096).lstrip()
    return head.startswith(b"[")


def is_dataset_path(path: str | os.PathLike[str]) -> bool:
    """Read through ``datasets``: a directory, a parquet or arrow file, or a JSON array file
    (a ``.json`` file of one object per line is JSONL)."""
    p = Path(path)
    if p.is_dir():
        return True
    suffix = p.suffix.lower()
    if suffix in TABLE_SUFFIXES:
        return True
    return suffix == ".json" and p.is_file() and _json_array(p)


def _load(path: Path, split: str) -> Any:
    try:
        import datasets
    except ImportError:
        raise DatasetFileError(
            f"{path}: reading parquet/arrow/dataset directories needs the datasets package"
        ) from None
    if path.is_dir() and (
        (path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file()
    ):
        loaded = datasets.load_from_disk(str(path))
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise DatasetFileError(f"{path}: no split {split!r}; splits: {', '.join(loaded)}")
            return loaded[split]
        return loaded
    if path.is_dir():
        return datasets.load_dataset(str(path), split=split)
    builder = TABLE_SUFFIXES.get(path.suffix.lower(), "json")
    return datasets.load_dataset(builder, data_files=str(path), split=split)


def dataset_records(
    path: str | os.PathLike[str], split: str = "train", columns: ColumnMap | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number from 1, row as a dict) for every row of the table's ``split``; the
    mapped columns are checked against the table's (``ColumnMap.apply`` is the caller's).

    Raises ``ValueError`` for a table that cannot be read, a missing split or a mapped
    column that does not exist (errors of the whole file, not of one row).
    """
    p = Path(path)
    try:
        table = _load(p, split)
    except DatasetFileError:
        raise
    except Exception as exc:  # datasets raises many kinds for unreadable data
        detail = f"{type(exc).__name__}: {exc}"
        raise DatasetFileError(f"{p}: could not be read as a dataset ({detail})") from exc
    mapping = columns or ColumnMap()
    mapping.check(list(table.column_names), str(p))
    for index, row in enumerate(table):
        yield index + 1, dict(row)


__all__ = ["ColumnMap", "DatasetFileError", "dataset_records", "is_dataset_path"]
