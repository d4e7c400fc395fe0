"""`agentrl score`'s exit codes are the documented ones: a path that cannot be used as given
is 2; a full disk on ``-o`` and a damaged (truncated) gzip input are 1, in one line, with no
output file left behind."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from agentrl.cli import main
from agentrl.errors import EXIT_DATA, EXIT_USAGE

from tests.fakes.repo import REPO

GOLDEN = REPO / "tests" / "data" / "reward_parity.jsonl"


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    (line,) = [x for x in err.splitlines() if "agentrl score: error:" in x]
    return line


def test_a_truncated_gzip_input_is_exit_1_naming_it(tmp_path: Path, capsys) -> None:
    whole = gzip.compress(GOLDEN.read_bytes()[:100_000])
    src = tmp_path / "in.jsonl.gz"
    src.write_bytes(whole[: len(whole) // 2])
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), "-o", str(out)]) == EXIT_DATA
    line = _error_line(capsys)
    assert f"cannot read {src}" in line and "deflate" in line
    assert not out.exists()


def test_a_full_disk_on_the_output_is_exit_1_naming_it(small_disk: Path, capsys) -> None:
    out = small_disk / "out.jsonl"
    assert main(["score", str(GOLDEN), "-o", str(out)]) == EXIT_DATA  # 2 MiB hold no more
    line = _error_line(capsys)
    assert f"cannot write {out}" in line and "No space left on device" in line
    assert list(small_disk.iterdir()) == []  # no partial output, no temporary file


def test_a_missing_input_is_still_a_usage_error(tmp_path: Path, capsys) -> None:
    assert main(["score", str(tmp_path / "nothing.jsonl")]) == EXIT_USAGE
    assert "No such file or directory" in _error_line(capsys)
