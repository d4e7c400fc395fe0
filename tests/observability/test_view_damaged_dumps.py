"""One damaged dump file of a run does not stop `agentrl view`: the page is written with the
other dumps, the damaged one is named and counted, and the exit code says so (1)."""

from __future__ import annotations

import gzip
from pathlib import Path

from agentrl.cli import main
from agentrl.errors import EXIT_DATA
from agentrl.observability.rollout_dump import dump_path, write_records


def test_a_damaged_dump_is_skipped_named_and_counted(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    for step, passed in ((1, True), (3, False)):
        write_records(dump_path(run, "step", step), [{"kind": "train", "step": step, "ok": passed}])
    truncated = dump_path(run, "step", 2)
    whole = gzip.compress(b'{"kind": "train", "step": 2}\n' * 50)
    truncated.write_bytes(whole[: len(whole) // 2])
    garbled = dump_path(run, "eval", 2)
    garbled.write_bytes(gzip.compress(b'{"kind": "eval"}\nnot json\n'))
    out = tmp_path / "view.html"
    assert main(["view", str(run), "-o", str(out)]) == EXIT_DATA
    captured = capsys.readouterr()
    assert "wrote " in captured.out and "(2 episodes" in captured.out
    page = out.read_text()
    assert '"step":1' in page and '"step":3' in page and '"step":2' not in page
    skipped = [line for line in captured.err.splitlines() if "skipped a damaged dump" in line]
    assert len(skipped) == 2
    assert f"{truncated}: not a readable gzip file" in skipped[0]
    assert f"{garbled}:2: not JSON" in skipped[1]
    assert "2 dump file(s) skipped" in captured.err and "Traceback" not in captured.err
