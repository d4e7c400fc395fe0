"""The bundled examples train end to end from the command line (tiny model, two steps)."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentrl.cli import main as cli_main
from agentrl.observability import read_metrics

from tests.fakes.runs import example_train_args, write_example_data


@pytest.fixture(scope="module")
def model_dir(run_files: Path) -> Path:
    return run_files / "model"


@pytest.mark.slow
@pytest.mark.parametrize(("name", "env"), [("shop", "ShopEnv"), ("lookup", "LookupEnv")])
def test_example_trains_from_the_command_line(model_dir, tmp_path, monkeypatch, capsys, name, env):
    data = write_example_data(name, tmp_path / f"{name}.jsonl", monkeypatch)
    code = cli_main(
        [
            *example_train_args(model_dir, data, tmp_path),
            "--environment",
            f"examples.{name}:{env}",
            "--reward_funcs",
            f"examples.{name}:reward",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "finished: 2/2 steps" in out and f"reward: examples.{name}:reward x 1" in out
    train = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "train"]
    assert len(train) == 2
    assert "reward_fn/reward/mean" in train[0] and "reward_fn/reward/none_frac" in train[0]
    assert "tools/calls_per_episode" in train[0]


def _short_run(model_dir: Path, data: Path, out: Path) -> list[str]:
    return [*example_train_args(model_dir, data, out), "--eval_before_train", "0"]


@pytest.mark.slow
def test_the_judged_example_trains_with_a_tiny_local_judge(
    model_dir, tmp_path, monkeypatch, capsys
):
    import gzip
    import json

    data = tmp_path / "judged.jsonl"
    write_example_data("judged", data, monkeypatch)
    args = [
        *_short_run(model_dir, data, tmp_path),
        "--reward_funcs",
        "judge",
        "--judge_model",
        str(model_dir),
        "--judge_mode",
        "rank",
        "--judge_max_tokens",
        "4",
        "--judge_rubric",
        "@examples/judged_rubric.txt",
        "--dump_rollouts",
        "1",
        "--max_turns",
        "1",
    ]
    code = cli_main(args)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "finished: 2/2 steps" in out and "reward: judge x 1" in out
    train = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "train"]
    assert train[0]["reward_fn/judge/none_frac"] == 0.0  # a local judge always gives a score
    with gzip.open(tmp_path / "run" / "rollouts" / "step-000001.jsonl.gz", "rt") as handle:
        record = json.loads(handle.readline())
    assert record["notes"]["judge"]["mode"] == "rank"
    assert record["reward"] == pytest.approx(record["notes"]["judge"]["score"])


@pytest.mark.slow
def test_the_python_tool_example_trains_from_the_command_line(
    model_dir, tmp_path, monkeypatch, capsys
):
    data = tmp_path / "pycalc.jsonl"
    write_example_data("pycalc", data, monkeypatch)
    args = [
        *_short_run(model_dir, data, tmp_path),
        "--tools",
        "python",
        "--python_timeout",
        "3",
        "--reward_funcs",
        "examples.pycalc:reward",
    ]
    code = cli_main(args)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "finished: 2/2 steps" in out and "reward: examples.pycalc:reward x 1" in out
    train = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "train"]
    assert len(train) == 2 and "tools/calls_per_episode" in train[0]
