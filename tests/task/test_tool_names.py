"""A user's tool named like a built-in replaces it for the run and says so; two of the
user's tools with one name are refused in one line naming both; never an internal error."""

from __future__ import annotations

import sys
import textwrap

import pytest
from agentrl.cli import main
from agentrl.envs.parts import TaskParts, task_tools
from agentrl.errors import EXIT_DATA, UsageError
from agentrl.tools import builtin_registry, tool

from tests.fakes.runs import one_step_train_args


def calculate_math(expression: str) -> str:
    """My own calculator.

    Args:
        expression: what to compute
    """
    return "forty-two"


def test_a_tool_named_like_a_built_in_replaces_it_and_says_so():
    said: list[str] = []
    registry = task_tools(builtin_registry(), TaskParts(tools=[calculate_math]), said.append)
    assert registry.run("calculate_math", {"expression": "1+1"}) == "forty-two"
    assert said == [
        f"tool 'calculate_math': {__name__}.calculate_math replaces the built-in one for this run"
    ]
    specs = {s["function"]["name"]: s["function"] for s in registry.specs()}
    assert specs["calculate_math"]["description"] == "My own calculator."


def test_two_user_tools_with_one_name_are_refused_naming_both():
    other = tool(lambda expression: "x", name="calculate_math")
    with pytest.raises(UsageError, match=r"two tools are named 'calculate_math': .*calculate_ma"):
        task_tools(builtin_registry(), TaskParts(tools=[calculate_math, other]), print)


@pytest.mark.slow
def test_train_with_a_tool_named_like_a_built_in_runs_to_the_end(
    run_files, tmp_path, capsys, monkeypatch
):
    (tmp_path / "mytools.py").write_text(
        textwrap.dedent('''
        def calculate_math(expression: str) -> str:
            """Mine.

            Args:
                expression: arithmetic
            """
            return "7"
        ''')
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "mytools", raising=False)
    argv = one_step_train_args(run_files, tmp_path, "--tools", "mytools:calculate_math")
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "tool 'calculate_math': mytools.calculate_math replaces the built-in one" in (
        captured.out + captured.err
    )


@pytest.mark.slow
def test_train_with_a_reward_returning_nan_exits_1_naming_it(
    run_files, tmp_path, capsys, monkeypatch
):
    (tmp_path / "myrewards.py").write_text(
        "def broken(completions, **kwargs):\n    return [float('nan')] * len(completions)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "myrewards", raising=False)
    argv = one_step_train_args(run_files, tmp_path, "--reward_funcs", "myrewards:broken")
    code = main(argv)
    err = capsys.readouterr().err
    assert code == EXIT_DATA, err
    assert "Traceback" not in err
    assert "error: reward function 'broken' returned nan for completion 0" in err
