"""The bundled examples train end to end from the command line (tiny model, two steps)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from agentrl.cli import main as cli_main
from agentrl.models.tiny import TinySpec, build_tiny_preset, save_preset
from agentrl.observability import read_metrics
from agentrl.utils.imports import load_object

REPO = Path(__file__).resolve().parents[2]
SPEC = TinySpec(
    hidden_size=32,
    num_layers=2,
    num_heads=2,
    num_kv_heads=1,
    head_dim=16,
    intermediate_size=64,
    corpus_tasks=150,
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("examples")
    torch.set_num_threads(1)
    model, tokenizer = build_tiny_preset(SPEC)
    save_preset(model, tokenizer, root / "model")
    return root / "model"


@pytest.mark.slow
@pytest.mark.parametrize(("name", "env"), [("shop", "ShopEnv"), ("lookup", "LookupEnv")])
def test_example_trains_from_the_command_line(model_dir, tmp_path, monkeypatch, capsys, name, env):
    monkeypatch.chdir(REPO)  # `examples.<name>` imports from the working directory
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(REPO))])
    module = load_object(f"examples.{name}:write_data").__module__
    write_data = sys.modules[module].write_data
    data = tmp_path / f"{name}.jsonl"
    write_data(str(data), n=12)
    code = cli_main(
        [
            "train",
            "--model",
            str(model_dir),
            "--data",
            str(data),
            "--environment",
            f"examples.{name}:{env}",
            "--reward_funcs",
            f"examples.{name}:reward",
            "--total_steps",
            "2",
            "--save_dir",
            str(tmp_path),
            "--save_weight",
            "run",
            "--batch_size",
            "2",
            "--num_generations",
            "2",
            "--max_turns",
            "2",
            "--max_gen_len",
            "8",
            "--eval_ratio",
            "0.2",
            "--eval_samples",
            "2",
            "--eval_max_gen_len",
            "8",
            "--eval_interval",
            "0",
            "--progress",
            "0",
            "--report",
            "0",
            "--save_interval",
            "0",
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
    return [
        "train",
        "--model",
        str(model_dir),
        "--data",
        str(data),
        "--total_steps",
        "2",
        "--save_dir",
        str(out),
        "--save_weight",
        "run",
        "--batch_size",
        "2",
        "--num_generations",
        "2",
        "--max_turns",
        "2",
        "--max_gen_len",
        "8",
        "--eval_ratio",
        "0.2",
        "--eval_samples",
        "2",
        "--eval_max_gen_len",
        "8",
        "--eval_interval",
        "0",
        "--progress",
        "0",
        "--report",
        "0",
        "--save_interval",
        "0",
        "--eval_before_train",
        "0",
    ]


def _write(name: str, path: Path, monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(REPO))])
    module = load_object(f"examples.{name}:write_data").__module__
    sys.modules[module].write_data(str(path), n=12)


@pytest.mark.slow
def test_the_judged_example_trains_with_a_tiny_local_judge(
    model_dir, tmp_path, monkeypatch, capsys
):
    import gzip
    import json

    data = tmp_path / "judged.jsonl"
    _write("judged", data, monkeypatch)
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
    _write("pycalc", data, monkeypatch)
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
