"""The words: the README stays a user's page, figures carry a date and a commit (never a
work-period number), links resolve, and the command lines the README shows parse."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_MAX_LINES = 360

# "session 9", "Session-10", "sessions 11 and 12": a work period, not a date and a commit.
SESSION_LABEL = re.compile(r"\bsessions?[- ]?\d+", re.IGNORECASE)
LINK = re.compile(r"\]\(([^)\s]+)\)")
COMMAND = re.compile(r"\bagentrl(?:\.cli)? (train|sft|eval)\b(.*)")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9_-]*")


def prose_files() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "benches").glob("*.py"))]


def test_no_work_period_labels():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {match.group(0)!r}"
        for path in prose_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for match in SESSION_LABEL.finditer(line)
    ]
    assert not found, "label figures by (YYYY-MM-DD, commit abc1234) instead:\n" + "\n".join(found)


def test_session_label_pattern_catches_the_spellings():
    for text in ("session 9", "Session-10 code", "sessions 11 and 12", "(session12)"):
        assert SESSION_LABEL.search(text), text
    for text in ("a session of training", "(2026-12-02, commit af2711e)", "possession 4"):
        assert not SESSION_LABEL.search(text), text


def test_readme_is_short():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines < README_MAX_LINES, (
        f"README.md has {lines} lines (under {README_MAX_LINES}): move the detail to docs/"
    )


def heading_anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a page's headings (lower case, punctuation dropped)."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE)
    }


def test_relative_links_resolve():
    missing = []
    for path in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for target in LINK.findall(path.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            linked = path.parent / file if file else path
            if not linked.exists():
                missing.append(f"{path.relative_to(ROOT)}: {target}")
            elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked):
                missing.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    assert not missing, "links to missing files or headings:\n" + "\n".join(missing)


def readme_command_lines() -> list[tuple[str, str, list[str]]]:
    """(command, line, flags) of every `agentrl train|sft|eval` line in the README's code."""
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```(?:bash|sh)\n(.*?)```", text, re.DOTALL)
    found = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("#", 1)[0]
            match = COMMAND.search(line)
            if match:
                found.append((match.group(1), line.strip(), FLAG.findall(match.group(2))))
    return found


@pytest.mark.slow
def test_readme_command_lines_parse(capsys):
    """Every option the README's command lines give is one the command takes, with a value it
    takes (the parsers the CLI runs; nothing is loaded or trained)."""
    from agentrl.cli import command_parser

    lines = readme_command_lines()
    assert {command for command, _, _ in lines} == {"train", "sft", "eval"}
    parsers = {name: command_parser(name)[0] for name in ("train", "sft", "eval")}
    refused = []
    for command, line, _ in lines:
        try:
            parsers[command].parse_args(shlex.split(line.split(f" {command}", 1)[1]))
        except SystemExit:
            refused.append(f"{line}\n    {capsys.readouterr().err.strip()}")
    assert not refused, "README command lines the CLI refuses:\n" + "\n".join(refused)
