"""`agentrl score`: reproduces the golden rewards, reports bad lines, reads stdin, explains."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from contextlib import redirect_stderr
from pathlib import Path

import pytest
from agentrl.cli import main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.checks import InterruptedReader

GOLDEN = Path(__file__).parents[1] / "data" / "reward_parity.jsonl"


def _read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def test_scoring_the_golden_file_reproduces_its_reward_column(tmp_path: Path) -> None:
    out = tmp_path / "scored.jsonl"
    assert main(["score", str(GOLDEN), "-o", str(out), "--threads", "2"]) == 0
    golden, scored = _read_jsonl(GOLDEN), _read_jsonl(out)
    assert len(scored) == len(golden)
    for want, got in zip(golden, scored, strict=True):
        assert got["reward"] == pytest.approx(want["reward"], abs=1e-9)
        assert got["details"].keys() == want["details"].keys()
        assert got["messages"] == want["messages"]  # the input line is kept


def test_malformed_lines_are_reported_and_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = GOLDEN.read_text(encoding="utf-8").splitlines()[:2]
    src = tmp_path / "in.jsonl"
    src.write_text(
        "\n".join([good[0], "{not json", "[1, 2]", '{"completion": 5}', "", good[1]]) + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "line 2" in err and "invalid JSON" in err
    assert "line 3" in err and "JSON object" in err
    assert "line 4" in err and "completion" in err
    assert "scored 2 trajectories" in err and "3 lines skipped" in err
    assert [r["messages"] for r in _read_jsonl(out)] == [json.loads(g)["messages"] for g in good]


def test_reads_stdin_and_writes_stdout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = {"task": "Compute 7*8", "gt": ["56"], "completion": "<answer>56</answer>"}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(line) + "\n"))
    assert main(["score", "-"]) == 0
    captured = capsys.readouterr()
    (scored,) = [json.loads(x) for x in captured.out.splitlines()]
    assert scored["task"] == line["task"]
    # Exact answer, but no tool call on a math task (-1.5):
    # -0.1 + 9 + 9 - 1.5 + 0.9 + 0.8 + 0.1 + 0.1 = 18.3, clipped to 12.
    assert scored["reward"] == 12.0
    assert scored["details"]["raw_reward"] == pytest.approx(18.3)
    assert "reward mean" in captured.err


def test_explain_prints_each_term(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = {"task": "hi", "gt": ["1"], "completion": "<answer>2</answer>"}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(line) + "\n"))
    assert main(["score", "-", "--explain"]) == 0
    err = capsys.readouterr().err
    assert "line 1: reward" in err
    assert "base" in err and "-0.1000" in err
    assert "zero_answer_cov_cap" in err  # the wrong answer is capped at 0


def test_config_file_and_set_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "reward.toml"
    config.write_text("[reward]\nreward_answer_cov_weight = 1.0\nreward_base = 5.0\n")
    line = {"task": "hi", "gt": ["1"], "completion": "<answer>1</answer>"}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(line) + "\n"))
    args = ["score", "-", "--config", str(config), "--set", "reward_exact_match_weight=1"]
    assert main(args) == 0
    scored = json.loads(capsys.readouterr().out)
    # 5 + 1 + 1 + tags 0.9 + 0.8 + 0.1 + 0.1
    assert scored["reward"] == pytest.approx(8.9)


def test_bad_settings_exit_with_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["score", str(GOLDEN), "--set", "reward_bsae=1"]) == 2
    assert "valid settings are" in capsys.readouterr().err
    assert main(["score", str(tmp_path / "missing.jsonl")]) == 2
    assert main(["score", str(GOLDEN), "--threads", "0"]) == 2


# Bad lines of every kind (issue 20): each is reported with its line number and what was
# expected, and skipped while the other lines are scored; the exit code is then 1.
BAD_LINES = [
    (b"\xff\xfe not utf-8 \x80", "not valid UTF-8"),
    (b"[" * 100_000, "nesting deeper than"),
    (b'{"task": "x", "gt": {"a": 1}, "completion": ""}', 'field "gt": expected a list'),
    (b'{"gt": ["1"], "completion": ""}', 'field "messages": missing'),
    (b'{"task": "x", "gt": [NaN], "completion": ""}', "item 0 is nan, not finite"),
    (b'{"task": "x", "gt": ["1", Infinity], "completion": ""}', "item 1 is inf"),
    (b'{"task": "x", "completion": ""}', 'field "gt": missing'),
    (b'{"task": "x", "gt": [], "completion": null}', "expected a string, got NoneType"),
    (b'{"task": "x", "gt": [], "completion": "", "tool_events": [1]}', "expected an object"),
    (b'{"task": "x", "gt": [], "completion": "", "config": {"reward_bsae": 1}}', "reward_bsae"),
]


@pytest.mark.parametrize(("bad", "reason"), BAD_LINES)
def test_each_bad_line_is_reported_and_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: bytes, reason: str
) -> None:
    good = GOLDEN.read_bytes().splitlines()[:2]
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join([good[0], bad, good[1]]) + b"\n")
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "line 2:" in err and reason in err, err
    assert "Traceback" not in err
    assert "scored 2 trajectories" in err and "1 lines skipped" in err
    assert len(_read_jsonl(out)) == 2


def test_unreadable_input_or_unwritable_output_leaves_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    assert main(["score", str(tmp_path), "-o", str(out)]) == 2  # a directory as input
    assert main(["score", str(GOLDEN), "-o", str(tmp_path / "missing" / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "cannot read" in err and "cannot write" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_gzip_input(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl.gz"
    src.write_bytes(gzip.compress(GOLDEN.read_bytes()[:200_000].rsplit(b"\n", 1)[0]))
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), "-o", str(out)]) == 0
    assert len(_read_jsonl(out)) > 10


_GOOD_LINES = GOLDEN.read_bytes().splitlines()[:20]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pieces=st.lists(
        st.one_of(st.binary(max_size=200), st.sampled_from(range(len(_GOOD_LINES)))),
        max_size=12,
    )
)
def test_fuzz_random_bytes_never_crash(
    tmp_path_factory: pytest.TempPathFactory, pieces: list[bytes | int]
) -> None:
    # Random byte lines between good lines: no traceback, exit code 0 or 1, and exactly the
    # good lines come out scored.
    folder = tmp_path_factory.mktemp("fuzz")
    good = sum(isinstance(p, int) for p in pieces)
    data = b"\n".join(_GOOD_LINES[p] if isinstance(p, int) else p for p in pieces)
    src, out = folder / "in.jsonl", folder / "out.jsonl"
    src.write_bytes(data)
    stderr = io.StringIO()
    with redirect_stderr(stderr):
        code = main(["score", str(src), "-o", str(out)])
    skipped = "lines skipped" in stderr.getvalue() and "(0 lines skipped)" not in stderr.getvalue()
    assert code == (1 if skipped else 0)
    assert len(out.read_bytes().splitlines()) == good
    assert sorted(p.name for p in folder.iterdir()) == ["in.jsonl", "out.jsonl"]


@pytest.mark.usefixtures("ctrl_c_raises")
def test_ctrl_c_exits_130_without_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", InterruptedReader(GOLDEN.read_bytes()))
    out = tmp_path / "out.jsonl"
    assert main(["score", "-", "-o", str(out)]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_real_pipe_in_and_out(tmp_path: Path) -> None:
    # As a user runs it: gzip JSONL on stdin, scored JSONL on stdout, summary on stderr.
    lines = GOLDEN.read_bytes().splitlines()[:30]
    done = subprocess.run(
        [sys.executable, "-m", "agentrl.cli", "score", "-", "--threads", "2"],
        input=gzip.compress(b"\n".join([*lines, b"{bad"]) + b"\n"),
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    scored = [json.loads(line) for line in done.stdout.splitlines()]
    want = [json.loads(g)["reward"] for g in lines]
    assert [s["reward"] for s in scored] == pytest.approx(want, abs=1e-9)
    assert b"line 31:" in done.stderr and b"Traceback" not in done.stderr


def test_score_command_runs_without_numpy(tmp_path: Path) -> None:
    """`agentrl score` starts light: numpy (a tenth of a second to import) is not loaded."""
    out = tmp_path / "scored.jsonl"
    code = (
        "import sys; from agentrl.cli import main; "
        f"status = main(['score', {str(GOLDEN)!r}, '-o', {str(out)!r}]); "
        "assert 'numpy' not in sys.modules, 'numpy was imported'; sys.exit(status)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "reward mean" in done.stderr and "│" in done.stderr
    assert len(_read_jsonl(out)) == len(_read_jsonl(GOLDEN))
