"""The RL trainer loop: exact resume, NaN skip, clean stop on SIGINT, the CLI commands.

Everything runs on the CPU with a tiny random Qwen3 built locally (nothing downloaded) and
a handful of generated prompts, so each run takes seconds.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import torch
from agentrl.cli import main as cli_main
from agentrl.observability import read_metrics
from agentrl.trainer import Trainer
from agentrl.training import step as step_module
from agentrl.training.checkpoint import latest_checkpoint
from agentrl.training.sources import step_prompt_indices
from safetensors.torch import load_file

from tests.fakes.runs import one_step_train_args, short_run_config

# Metrics that must match bit for bit between an uninterrupted and a resumed run.
COMPARED = (
    "reward/mean",
    "loss/total",
    "loss/policy",
    "policy/kl_ref",
    "policy/entropy",
    "train/lr",
    "train/beta",
    "train/beta_ema",
    "reward/baseline",
    "bc/loss",
    "policy/version",
    "train/opt_step",
    "train/trained_tokens",  # cumulative: carried across the resume
)


def _config(files: Path, run_dir: Path, **overrides):
    values = dict(
        total_steps=3,
        max_turns=2,
        max_gen_len=12,
        accumulation_steps=2,
        bc_coef=0.05,
        bc_max_examples=2,
        bc_max_len=256,
        seed=7,
    )
    return short_run_config(files, run_dir.parent, run_dir.name, **{**values, **overrides})


def _train_records(run_dir: Path) -> dict[int, dict]:
    return {r["step"]: r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "train"}


def test_prompts_of_a_step_depend_only_on_seed_and_step():
    first = [step_prompt_indices(10, 3, step, seed=1) for step in range(1, 5)]
    again = [step_prompt_indices(10, 3, step, seed=1) for step in range(1, 5)]
    assert first == again
    seen = [i for batch in first for i in batch][:10]
    assert sorted(seen) == list(range(10))  # one full pass before any prompt repeats


@pytest.mark.slow
def test_stopped_then_resumed_run_reproduces_the_uninterrupted_run(run_files, tmp_path):
    whole = Trainer(_config(run_files, tmp_path / "whole")).run()
    assert whole.steps_done == 3 and whole.stopped is None

    def interrupt(trainer, step, outcome):
        if step == 1:
            os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C: finish the step, save, exit

    # Whatever handler the process had (a background job's SIGINT is ignored) comes back.
    before = signal.getsignal(signal.SIGINT)
    part = Trainer(_config(run_files, tmp_path / "split"), callbacks=[interrupt]).run()
    assert part.steps_done == 1 and "SIGINT" in (part.stopped or "")
    assert latest_checkpoint(tmp_path / "split" / "checkpoints").name == "step-0000001"
    assert signal.getsignal(signal.SIGINT) is before

    resumed = Trainer(_config(run_files, tmp_path / "split", from_resume=1)).run()
    assert resumed.steps_done == 3
    a, b = _train_records(tmp_path / "whole"), _train_records(tmp_path / "split")
    assert sorted(b) == [1, 2, 3]  # one history, no duplicated step
    for step in (2, 3):
        for key in COMPARED:
            assert a[step][key] == b[step][key], (step, key)
    assert a[2]["train/optimizer_stepped"] == 1.0  # step 2 used step 1's saved gradient
    wa = torch.load(whole.checkpoint / "model.pt", weights_only=True)
    wb = torch.load(resumed.checkpoint / "model.pt", weights_only=True)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.slow
def test_resume_continues_the_counters_and_the_eval_history(run_files, tmp_path):
    """A SIGINT-stopped run exits 130; resumed, its rollout/* counters go on from where they
    were and it writes no second evaluation at the resume step: one history, as if whole."""
    evals = dict(
        eval_before_train=1,
        eval_interval=2,
        eval_ratio=0.25,
        eval_samples=2,
        eval_max_gen_len=8,
        total_steps=2,
    )
    whole = Trainer(_config(run_files, tmp_path / "whole", **evals)).run()
    assert whole.exit_code == 0

    def interrupt(trainer, step, outcome):
        if step == 1:
            os.kill(os.getpid(), signal.SIGINT)

    part = Trainer(_config(run_files, tmp_path / "split", **evals), callbacks=[interrupt]).run()
    assert part.signal == signal.SIGINT and part.exit_code == 130
    Trainer(_config(run_files, tmp_path / "split", from_resume=1, **evals)).run()
    histories = [read_metrics(tmp_path / name / "metrics.jsonl") for name in ("whole", "split")]
    for history in histories:
        assert [(r["step"], r["kind"]) for r in history] == [
            (0, "eval"),
            (1, "train"),
            (2, "train"),
            (2, "eval"),
        ]
    a, b = (history[2] for history in histories)  # step 2, after the resume in "split"
    counters = [k for k in a if k.startswith("rollout/")]
    assert "rollout/sequences" in counters and a["rollout/sequences"] > 0
    assert {k: a[k] for k in counters} == {k: b[k] for k in counters}


@pytest.mark.slow
def test_dynamic_sampling_logs_its_rounds_and_stays_reproducible(run_files, tmp_path):
    runs = []
    for name in ("a", "b"):
        config = _config(
            run_files, tmp_path / name, total_steps=2, dynamic_sampling_rounds=2, bc_coef=0.0
        )
        assert Trainer(config).run().steps_done == 2
        runs.append(_train_records(tmp_path / name))
    for step in (1, 2):
        record = runs[0][step]
        rounds = record["dynamic/extra_rounds"]
        assert 0 <= rounds <= 2
        assert record["dynamic/groups_rolled"] == 2 * (rounds + 1)  # batch_size per round
        assert record["pack/rows"] == 4  # still batch_size groups of G = 2
        for key in ("reward/mean", "loss/total", "dynamic/groups_rolled"):
            assert runs[1][step][key] == record[key], (step, key)


@pytest.mark.slow
def test_nan_loss_skips_the_update_and_leaves_the_weights(run_files, tmp_path, monkeypatch):
    real = step_module.policy_loss

    def poisoned(*args, **kwargs):
        result = real(*args, **kwargs)
        result.numerator = result.numerator * float("nan")
        return result

    monkeypatch.setattr(step_module, "policy_loss", poisoned)
    config = _config(run_files, tmp_path / "nan", total_steps=2, accumulation_steps=1)
    result = Trainer(config).run()
    records = _train_records(tmp_path / "nan")
    assert [records[s]["train/skipped"] for s in (1, 2)] == [1.0, 1.0]
    assert records[2]["train/opt_step"] == 0.0
    start = load_file(str(Path(config.model) / "model.safetensors"))
    saved = torch.load(result.checkpoint / "model.pt", weights_only=True)
    assert all(torch.equal(start[k], saved[k]) for k in start)
    state = torch.load(result.checkpoint / "state.pt", weights_only=False)
    assert state["optimization"]["optimizer"]["state"] == {}  # Adam moments never touched


@pytest.mark.slow
def test_cli_train_and_eval_run_and_report(run_files, tmp_path, capsys):
    prompts = run_files / "prompts.jsonl"
    run_dir = tmp_path / "run"
    code = cli_main(
        one_step_train_args(
            run_files,
            tmp_path,
            *("--eval_ratio", "0.5", "--eval_samples", "2", "--eval_max_gen_len", "8"),
            *("--eval_before_train", "1", "--report", "1"),
            *("--async_workers", "1", "--accumulation_steps", "1"),
        )
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "finished: 1/1 steps" in out and "on 2 tasks" in out
    assert (run_dir / "report.png").read_bytes().startswith(b"\x89PNG")
    kinds = [r["kind"] for r in read_metrics(run_dir / "metrics.jsonl")]
    assert kinds == ["eval", "train", "eval"]  # before training, the step, the last step
    out_json = tmp_path / "eval.json"
    code = cli_main(
        [
            "eval",
            "--model",
            str(run_dir / "policy"),
            "--data",
            str(prompts),
            "--filter_mode",
            "all",
            "--eval_samples",
            "3",
            "--max_turns",
            "1",
            "--eval_max_gen_len",
            "8",
            "--metrics_output",
            str(out_json),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "on 3 prompts" in out and "eval/tool_success_rate" in out
    assert json.loads(out_json.read_text())["eval/tasks"] == 3.0


def test_cli_rejects_bad_options_with_a_clear_message(capsys):
    assert cli_main(["train", "--batch_size", "0"]) == 2
    assert "batch_size=0: expected at least 1" in capsys.readouterr().err
    assert cli_main(["train", "--print_config", "--preset", "compat"]) == 0
    assert 'run_name = "agentic_async_rl_tooluse_v5_fix"' in capsys.readouterr().out
