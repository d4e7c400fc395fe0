"""`score_file` and JSON-line `score_batch`: the Rust file scorer writes exactly what the
Python path (`json.loads`, `score_batch`, `json.dumps`) wrote, streams any input, and
leaves no file behind when it fails."""

from __future__ import annotations

import gzip
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from agentrl.rewards import DETAIL_KEYS, TERM_KEYS, score_batch, score_file
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.fakes.checks import InterruptedReader

GOLDEN = Path(__file__).parents[1] / "data" / "reward_parity.jsonl"
ROW_KEYS = ("messages", "gt", "completion", "tool_events", "unfinished", "config")


def _golden_lines(n: int | None = None) -> list[str]:
    lines = GOLDEN.read_text(encoding="utf-8").splitlines()
    return lines if n is None else lines[:n]


def _json_float(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def _python_scored(lines: list[str]) -> str:
    """What `agentrl score` wrote when it read and wrote JSON in Python."""
    records = [json.loads(line) for line in lines]
    out = []
    for record, detail in zip(records, score_batch(records).to_records(), strict=True):
        record["reward"] = _json_float(detail["reward"])
        record["details"] = {key: _json_float(value) for key, value in detail.items()}
        out.append(json.dumps(record, ensure_ascii=False) + "\n")
    return "".join(out)


def test_output_is_byte_identical_to_the_python_path(tmp_path: Path) -> None:
    lines = _golden_lines()
    # As given (reward and details replaced in place), and without them (appended).
    stripped = [
        json.dumps({k: v for k, v in json.loads(line).items() if k in ROW_KEYS})
        for line in lines[:500]
    ]
    for name, chunk in (("golden", lines), ("stripped", stripped)):
        src, dst = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.out.jsonl"
        src.write_text("\n".join(chunk) + "\n", encoding="utf-8")
        summary = score_file(src, dst, threads=2)
        assert dst.read_text(encoding="utf-8") == _python_scored(chunk), name
        assert summary.scored == len(chunk) and summary.skipped_count == 0


def test_summary_has_the_rewards_and_term_means(tmp_path: Path) -> None:
    lines = _golden_lines(300)
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines), encoding="utf-8")  # no final newline
    summary = score_file(src, tmp_path / "out.jsonl", threads=1)
    records = [json.loads(line) for line in lines]
    want = score_batch(records, explain=True)
    np.testing.assert_array_equal(summary.rewards, want.rewards)
    assert want.contributions is not None
    for key in TERM_KEYS:
        assert summary.term_means[key] == pytest.approx(want.contributions[key].mean(), abs=1e-9)
    assert summary.lines == 300 and summary.explanations == []


def test_gzip_input_and_text_and_binary_streams(tmp_path: Path) -> None:
    lines = _golden_lines(50)
    text = "\n".join(lines) + "\n"
    want = _python_scored(lines)
    packed = tmp_path / "in.jsonl.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    out = tmp_path / "out.jsonl"
    score_file(packed, out)
    assert out.read_text(encoding="utf-8") == want
    binary_out = io.BytesIO()
    score_file(io.BytesIO(text.encode()), binary_out, threads=2)
    assert binary_out.getvalue().decode() == want
    text_out = io.StringIO()
    score_file(io.StringIO(text), text_out, threads=1)
    assert text_out.getvalue() == want


def test_threads_give_identical_output(tmp_path: Path) -> None:
    lines = _golden_lines() * 3
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    outputs = []
    for threads in (1, 2, 4):
        dst = tmp_path / f"out{threads}.jsonl"
        score_file(src, dst, threads=threads)
        outputs.append(dst.read_bytes())
    assert outputs[0] == outputs[1] == outputs[2]


def test_line_numbers_follow_python_line_ends(tmp_path: Path) -> None:
    good = _golden_lines(1)[0]
    src = tmp_path / "in.jsonl"
    # A file opened by path ends lines at \n, \r\n and a lone \r, as Python's open() does.
    src.write_bytes(f"{good}\r\nbad\r{good}\rworse\n".encode())
    summary = score_file(src, tmp_path / "out.jsonl")
    assert summary.scored == 2
    assert [line for line, _ in summary.skipped] == [2, 4]


def test_failed_runs_leave_no_file(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with pytest.raises(OSError, match=r"missing\.jsonl"):
        score_file(tmp_path / "missing.jsonl", out)
    corrupt = tmp_path / "corrupt.jsonl.gz"
    packed = gzip.compress(("\n".join(_golden_lines()) + "\n").encode())
    corrupt.write_bytes(packed[: len(packed) // 2])  # cut off mid-stream
    with pytest.raises(OSError, match=r"corrupt\.jsonl\.gz"):
        score_file(corrupt, out)
    with pytest.raises(OSError, match="no_such_dir"):
        score_file(GOLDEN, tmp_path / "no_such_dir" / "out.jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corrupt.jsonl.gz"]


def test_a_failed_run_keeps_the_previous_output(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("previous\n")
    with pytest.raises(OSError):
        score_file(tmp_path / "missing.jsonl", out)
    assert out.read_text() == "previous\n"


def test_explain_gives_each_lines_terms(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("\n" + "\n".join(_golden_lines(3)) + "\n", encoding="utf-8")
    summary = score_file(src, tmp_path / "out.jsonl", explain=True)
    assert [e.line for e in summary.explanations] == [2, 3, 4]
    first = summary.explanations[0]
    assert first.reward == summary.rewards[0]
    assert sum(v for _, v in first.terms) == pytest.approx(first.reward, abs=1e-9)
    assert all(v != 0.0 for _, v in first.terms)


def test_json_lines_score_like_dicts() -> None:
    lines = _golden_lines(400)
    records = [json.loads(line) for line in lines]
    want = score_batch(records, explain=True)
    for batch in (lines, [line.encode() for line in lines]):
        got = score_batch(batch, threads=2, explain=True)
        for key in DETAIL_KEYS:
            np.testing.assert_array_equal(got.details[key], want.details[key])
        assert got.contributions is not None and want.contributions is not None
        np.testing.assert_array_equal(got.contributions["clip"], want.contributions["clip"])


def test_a_bad_json_line_names_its_record() -> None:
    lines = _golden_lines(3)
    with pytest.raises(ValueError, match=r"record 1: invalid JSON"):
        score_batch([lines[0], "{oops", lines[2]])
    with pytest.raises(ValueError, match=r"record 2: .*completion"):
        score_batch([lines[0], lines[1], '{"task": "x"}'])
    with pytest.raises(TypeError, match=r"record 1: expected a JSON line"):
        score_batch([lines[0], {"completion": ""}])  # type: ignore[list-item]


# Values whose JSON text Python and Rust must agree on, byte for byte.
_text = st.characters(exclude_categories=("Cs",))
_odd_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=_text, max_size=12),
)
_odd_values = st.recursive(
    _odd_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(alphabet=_text, max_size=5), inner)
    ),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(meta=_odd_values, key_first=st.booleans())
def test_any_extra_field_is_written_as_json_dumps_writes_it(meta: object, key_first: bool) -> None:
    base = {"task": "Compute 2*3", "gt": ["6"], "completion": "<answer>6</answer>"}
    record = {"meta": meta, **base} if key_first else {**base, "meta": meta}
    line = json.dumps(record, ensure_ascii=False)
    out = io.BytesIO()
    summary = score_file(io.BytesIO(line.encode()), out, threads=1)
    assert summary.scored == 1
    assert out.getvalue().decode() == _python_scored([line])


@pytest.mark.usefixtures("ctrl_c_raises")
def test_ctrl_c_stops_the_run_and_writes_no_file(tmp_path: Path) -> None:
    data = ("\n".join(_golden_lines()) + "\n").encode() * 4
    out = tmp_path / "out.jsonl"
    with pytest.raises(KeyboardInterrupt):
        score_file(InterruptedReader(data), out, threads=2)
    assert list(tmp_path.iterdir()) == []


def test_a_lone_surrogate_is_written_as_the_replacement_character() -> None:
    line = '{"task": "x\\ud800", "gt": ["1"], "completion": "1"}'
    out = io.BytesIO()
    assert score_file(io.BytesIO(line.encode()), out).scored == 1
    assert json.loads(out.getvalue())["task"] == "x\ufffd"


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.one_of(
            st.floats(min_value=-1e6, max_value=1e6),
            st.sampled_from([-5.4, 0.0, 0.1, 3.3, 12.0, math.nan, math.inf]),
        ),
        min_size=1,
        max_size=300,
    ),
    bins=st.integers(min_value=1, max_value=30),
)
def test_histogram_counts_as_numpy_does(values: list[float], bins: int) -> None:
    """The summary `agentrl score` prints (computed in Rust) bins like numpy.histogram."""
    from agentrl.rewards import FileScoreSummary

    array = np.asarray(values, dtype=np.float64)
    summary = FileScoreSummary(len(values), bytearray(array.tobytes()), [], 0, {}, [])
    histogram = summary.histogram(bins)
    finite = array[np.isfinite(array)]
    assert histogram.finite == finite.size
    assert sum(histogram.counts) == finite.size
    if finite.size == 0:
        assert histogram.counts == [] and math.isnan(histogram.mean)
        return
    assert (histogram.min, histogram.max) == (finite.min(), finite.max())
    assert histogram.mean == pytest.approx(finite.mean(), rel=1e-9, abs=1e-9)
    if finite.min() == finite.max():
        assert histogram.counts == [finite.size]
        return
    try:
        counts, edges = np.histogram(finite, bins=bins, range=(finite.min(), finite.max()))
    except ValueError:  # numpy cannot split a span of a few ulps (e.g. [0, 5e-324]) into bins
        assume(False)
    assert histogram.counts == counts.tolist()
    assert histogram.edges == edges.tolist()
    np.testing.assert_array_equal(summary.rewards, array)
