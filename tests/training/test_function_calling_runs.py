"""The tiny model trains 2 steps on function-calling data in each format, from the command
line: the format is detected, the calls are the answer and ``function_call`` scores them."""

from __future__ import annotations

import pytest
from agentrl.cli import main
from agentrl.observability.metrics_log import read_metrics

from tests.fakes.function_calls import FORMATS, write_function_call_data
from tests.fakes.runs import example_train_args


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_the_tiny_model_trains_two_steps_on_each_format(run_files, tmp_path, capsys, fmt) -> None:
    data = write_function_call_data(tmp_path / "data", fmt)
    args = example_train_args(run_files / "model", data, tmp_path, steps=2, max_turns=2)
    code = main([*args, "--reward_funcs", "function_call"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"call mode: answer, the data being function-calling records (8 {fmt})" in captured.out
    rows = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "train"]
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert 0.0 <= row["reward_fn/function_call/valid/mean"] <= 1.0
        assert row["turn/0/episodes"] == 4.0 and "turn/1/episodes" not in row  # one turn
        assert "answer/calls_per_episode" in row and row["tools/calls_per_episode"] == 0.0
