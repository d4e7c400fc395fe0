"""Bad input: malformed lines are skipped, counted and reported by reason and line number;
good lines around them all load; strict mode stops at the first bad line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentrl.data import MALFORMED_REASONS, PromptPool, PromptPoolError

# Ten malformed lines, one per failure kind, with the reason each must be reported under.
MALFORMED: list[tuple[bytes, str]] = [
    (b'{"prompt": "1+1", "gt": ["2"]', "bad_json"),
    (b"[1, 2, 3]", "not_object"),
    (b'{"conversations": [], "gt": ["1"]}', "no_messages"),
    (b'{"messages": "just a string", "gt": ["1"]}', "bad_messages"),
    (b'{"messages": [{"role": "wizard", "content": "hi"}], "gt": ["1"]}', "unknown_role"),
    (b'{"prompt": "q", "gt": ["1"], "tools": "[{\\"name\\": \\"f\\""}', "bad_tools"),
    (b'{"messages": [42], "gt": ["1"]}', "bad_message"),
    (b'{"prompt": "q", "gt": [{"nested": 1}]}', "bad_gt"),
    (b'{"prompt": "\xff\xfe broken utf-8", "gt": ["1"]}', "bad_encoding"),
    (b'{"prompt": "' + b"9" * 300_000 + b'", "gt": ["1"]}', "line_too_long"),
]


def _good(i: int) -> bytes:
    record = {"messages": [{"role": "user", "content": f"计算{i}+{i + 1}"}], "gt": [str(2 * i + 1)]}
    return json.dumps(record, ensure_ascii=False).encode("utf-8")


def _mixed_file(tmp_path: Path) -> tuple[str, dict[int, str]]:
    """100 good lines with the 10 malformed ones spread among them; line -> reason."""
    lines: list[bytes] = []
    expected: dict[int, str] = {}
    bad = iter(MALFORMED)
    for i in range(100):
        lines.append(_good(i))
        if i % 10 == 4:
            raw, reason = next(bad)
            lines.append(raw)
            expected[len(lines)] = reason
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return str(path), expected


def test_hundred_good_lines_kept_and_ten_bad_ones_reported(tmp_path) -> None:
    path, expected = _mixed_file(tmp_path)
    pool = PromptPool(path, max_line_bytes=100_000)
    assert len(pool) == 100
    assert [s.gt[0] for s in pool] == [str(2 * i + 1) for i in range(100)]
    assert {s.line: s.reason for s in pool.skipped} == expected
    assert pool.stats["loaded"] == 110 and pool.stats["kept"] == 100
    for reason in expected.values():
        assert pool.stats[reason] == 1, reason
    assert pool.stats["bad_json"] + pool.stats["dropped"] == 10
    assert all(str(s).startswith(f"{path}:{s.line}: {s.reason}") for s in pool.skipped)
    assert "kept 100 of 110 lines" in pool.summary()
    assert set(expected.values()) <= set(MALFORMED_REASONS)


def test_strict_mode_names_the_file_and_line_of_the_first_bad_line(tmp_path) -> None:
    path, expected = _mixed_file(tmp_path)
    first = min(expected)
    with pytest.raises(PromptPoolError) as info:
        PromptPool(path, strict=True)
    assert str(info.value).startswith(f"{path}:{first}: bad_json")


def test_strict_mode_does_not_treat_policy_filters_as_errors(tmp_path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "no gt"}\n{"prompt": "q", "gt": "1"}\n', encoding="utf-8")
    pool = PromptPool(str(path), strict=True)
    assert len(pool) == 1 and pool.stats["skip_no_gt"] == 1


def test_deeply_nested_json_is_a_bad_line_not_a_crash(tmp_path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text("[" * 200_000 + "\n" + '{"prompt": "q", "gt": "1"}\n', encoding="utf-8")
    pool = PromptPool(str(path))
    assert len(pool) == 1 and pool.skipped[0].reason == "bad_json"


def test_gigantic_line_is_skipped_without_reading_it_whole(tmp_path) -> None:
    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as handle:
        handle.write(b'{"prompt": "' + b"x" * (3 << 20) + b'", "gt": "1"}\n')
        handle.write(b'{"prompt": "q", "gt": "1"}\n')
    pool = PromptPool(str(path), max_line_bytes=1 << 20)
    assert len(pool) == 1 and pool[0].line == 2
    assert pool.skipped[0].reason == "line_too_long" and pool.skipped[0].line == 1


def test_reported_list_is_capped_but_counters_are_complete(tmp_path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("{\n" * 50 + '{"prompt": "q", "gt": "1"}\n', encoding="utf-8")
    pool = PromptPool(str(path), max_reported=5)
    assert pool.stats["bad_json"] == 50 and len(pool.skipped) == 5


@pytest.mark.parametrize(
    "line",
    [
        '{"conversations": [{"role": "assistant", "content": ""}], "gt": "1"}',
        '{"conversations": {"role": "user"}, "gt": "1"}',
        '{"prompt": {"text": "q"}, "gt": "1"}',
        '{"messages": [{"role": "assistant", "content": "", "tool_calls": "{oops"}], "gt": "1"}',
        '{"messages": [{"role": "user", "content": "q"}], "gt": "1", "tools": 5}',
        '"a string"',
        "null",
        "123",
    ],
)
def test_other_wrong_types_never_crash(tmp_path, line) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    pool = PromptPool(str(path), allow_empty=True)
    assert len(pool) == 0 and len(pool.skipped) == 1
    assert pool.skipped[0].reason in MALFORMED_REASONS
