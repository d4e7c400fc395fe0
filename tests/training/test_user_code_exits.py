"""User code that exits is an error of that code, never a success: `SystemExit(0)`, a
`KeyboardInterrupt` it raises itself, `GeneratorExit` from a reward function, an
environment or an agent end `agentrl train` with one line naming the function and the line
that raised, exit 1, and nothing that claims work (no "finished" line, no step in
metrics.jsonl, no checkpoint, no exported policy). So does a reward function that gives
an episode no reward at all (`None`, or `[None] * n`)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from agentrl.cli import main
from agentrl.errors import EXIT_DATA
from agentrl.observability import read_metrics

from tests.fakes.runs import ONE_STEP_RUN

MODULE = """
def exits(completions, **kwargs):
    raise SystemExit(0)

def interrupts(completions, **kwargs):
    raise KeyboardInterrupt("my own")

def none_for_all(completions, **kwargs):
    return [None] * len(completions)

def none_instead_of_a_list(completions, **kwargs):
    return None

class ClosingEnv:
    def __init__(self):
        self.tools = []

    def reset(self, sample):
        raise GeneratorExit("closed")

def agent(endpoint, sample):
    raise SystemExit(0)
"""


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module of the user's own code, importable by a fresh name; returns the name."""
    name = f"user_code_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


# (options, the error line expected; {f} is the module's file)
CASES = {
    "reward SystemExit(0)": (
        ["--reward_funcs", "{m}:exits"],
        r"reward function 'exits' raised SystemExit at {f}:3: 0",
    ),
    "reward KeyboardInterrupt": (
        ["--reward_funcs", "{m}:interrupts"],
        r"reward function 'interrupts' raised KeyboardInterrupt at {f}:6: my own",
    ),
    "all rewards None": (
        ["--reward_funcs", "{m}:none_for_all"],
        r"no reward for 2 of 2 completions .* \('none_for_all'\) returned None",
    ),
    "reward None for the batch": (
        ["--reward_funcs", "{m}:none_instead_of_a_list"],
        r"every reward function \('none_instead_of_a_list'\) returned None",
    ),
    "environment reset GeneratorExit": (
        ["--environment", "{m}:ClosingEnv"],
        r"environment ClosingEnv.reset\(\) raised GeneratorExit at {f}:19: closed",
    ),
    "agent SystemExit(0)": (
        ["--agent", "{m}:agent"],
        r"every agent episode of step 1 was dropped: agent \S+ raised SystemExit at {f}:22: 0",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_user_code_that_exits_stops_the_run_in_one_line(
    case: str, user_module: str, run_files: Path, tmp_path: Path, capsys
) -> None:
    options, expected = CASES[case]
    source = str(tmp_path / f"{user_module}.py")
    argv = [
        "train",
        "--model",
        str(run_files / "model"),
        "--data",
        str(run_files / "prompts.jsonl"),
        "--save_dir",
        str(tmp_path / "runs"),
        "--save_weight",
        "run",
        *ONE_STEP_RUN,
        *(o.format(m=user_module) for o in options),
    ]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == EXIT_DATA, captured.err
    assert "Traceback" not in captured.err and "finished" not in captured.out
    (line,) = [x for x in captured.err.splitlines() if "agentrl train: error:" in x]
    assert re.search(expected.format(f=re.escape(source)), line), line
    run = tmp_path / "runs" / "run"
    written = {p.name for p in run.iterdir()} if run.exists() else set()
    assert written <= {"config.toml", "metrics.jsonl"}, written  # no checkpoint, no policy
    if "metrics.jsonl" in written:
        assert read_metrics(run / "metrics.jsonl") == []  # no step claimed
