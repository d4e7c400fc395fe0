"""`--data` as a parquet/arrow/JSON-array file or a dataset directory, with column mapping
and the same per-record error reporting as JSONL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentrl.data import PromptPool
from agentrl.data.dataset_files import ColumnMap, is_dataset_path

pytest.importorskip("datasets")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

TOOL = {
    "type": "function",
    "function": {
        "name": "calculate_math",
        "description": "Evaluate an arithmetic expression",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
    },
}
ROWS = {
    "question_text": ["What is 12*3?", "What is 7+8?", "", "What is 2**5?"],
    "solution": ["36", "15", "1", "32"],
    "tool_json": [json.dumps([TOOL]), json.dumps([TOOL]), json.dumps([TOOL]), "not json"],
}
COLUMNS = ColumnMap(prompt="question_text", answer="solution", tools="tool_json")


def _check_pool(pool: PromptPool, source: str) -> None:
    assert len(pool) == 2
    assert pool[0]["messages"][-1] == {"role": "user", "content": "What is 12*3?"}
    assert pool[0]["gt"] == ["36"] and pool[1]["gt"] == ["15"]
    assert [t["function"]["name"] for t in pool[0]["tools"]] == ["calculate_math"]
    assert (pool[0].source, pool[0].line) == (source, 1)
    # Row 3 has no prompt, row 4 unreadable tools: counted and remembered by row number.
    reasons = {(s.line, s.reason) for s in pool.skipped}
    assert (4, "bad_tools") in reasons and any(line == 3 for line, _ in reasons)
    assert pool.stats["loaded"] == 4 and pool.stats["kept"] == 2


def _table(rows: dict[str, list[str]] = ROWS) -> pa.Table:
    return pa.table(rows)


def test_parquet_file_with_column_mapping(tmp_path: Path) -> None:
    path = tmp_path / "prompts.parquet"
    pq.write_table(_table(), path)
    assert is_dataset_path(path)
    _check_pool(PromptPool(str(path), columns=COLUMNS), str(path))


def test_dataset_directory_and_its_splits(tmp_path: Path) -> None:
    directory = tmp_path / "data"
    directory.mkdir()
    pq.write_table(_table(), directory / "train.parquet")
    pq.write_table(_table().slice(1, 1), directory / "test.parquet")
    _check_pool(PromptPool(str(directory), columns=COLUMNS), str(directory))
    test = PromptPool(str(directory), columns=COLUMNS, split="test")
    assert [s["gt"] for s in test] == [["15"]]
    with pytest.raises(ValueError, match=r"could not be read as a dataset.*dev"):
        PromptPool(str(directory), columns=COLUMNS, split="dev")


def test_arrow_and_json_array_files(tmp_path: Path) -> None:
    arrow = tmp_path / "prompts.arrow"
    table = _table()
    with pa.OSFile(str(arrow), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    _check_pool(PromptPool(str(arrow), columns=COLUMNS), str(arrow))
    array = tmp_path / "prompts.json"
    rows = [dict(zip(ROWS, values, strict=True)) for values in zip(*ROWS.values(), strict=True)]
    array.write_text(json.dumps(rows))
    assert is_dataset_path(array)
    _check_pool(PromptPool(str(array), columns=COLUMNS), str(array))


def test_a_missing_mapped_column_names_the_columns(tmp_path: Path) -> None:
    path = tmp_path / "prompts.parquet"
    pq.write_table(_table(), path)
    with pytest.raises(ValueError, match="no column 'query' for --prompt_column; columns: q"):
        PromptPool(str(path), columns=ColumnMap(prompt="query"))


def test_jsonl_takes_the_same_column_mapping_and_stays_line_by_line(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    rows = [dict(zip(ROWS, values, strict=True)) for values in zip(*ROWS.values(), strict=True)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert not is_dataset_path(path)
    _check_pool(PromptPool(str(path), columns=COLUMNS), str(path))
