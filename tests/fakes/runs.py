"""Runs to start: the files on disk, the run configs and the `agentrl` command lines of
a few small steps."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agentrl.models.tiny import build_model, save_preset

from tests.fakes.models import SMALL_SPEC, small_tokenizer
from tests.fakes.repo import REPO

# The few-step training run the trainer, LoRA, distributed and remote-engine tests start
# from: no evaluation, report, progress bar or periodic checkpoint.
SHORT_RUN: dict[str, Any] = dict(
    filter_mode="all",
    # One optimizer update per step (the preset makes four), so that tests can compare a
    # step's gradient with one computed another way; tests/rl/test_ppo_updates.py covers more.
    num_mini_batches=1,
    batch_size=2,
    num_generations=2,
    max_turns=1,
    max_context_len=384,
    max_total_len=448,
    async_workers=0,
    eval_before_train=0,
    eval_interval=0,
    eval_ratio=0.0,
    progress=0,
    report=0,
    save_interval=0,
    learning_rate=1e-3,
    accumulation_steps=1,
    use_wandb=False,
)


# A one-step `agentrl train` run from the command line: the options a command needs to get
# past loading and through one small step (the caller adds --model, --data, --save_dir).
ONE_STEP_RUN = [
    "--filter_mode",
    "all",
    "--total_steps",
    "1",
    "--batch_size",
    "1",
    "--num_generations",
    "2",
    "--max_turns",
    "1",
    "--max_gen_len",
    "8",
    "--eval_before_train",
    "0",
    "--progress",
    "0",
    "--report",
    "0",
    "--async_workers",
    "0",
]


def one_step_train_args(files: Path, save_dir: Path, *extra: str) -> list[str]:
    """`agentrl train` of `write_run_files` output for `ONE_STEP_RUN`, writing to
    ``save_dir/run``, then ``extra``."""
    return [
        "train",
        "--model",
        str(files / "model"),
        "--data",
        str(files / "prompts.jsonl"),
        "--save_dir",
        str(save_dir),
        "--save_weight",
        "run",
        *ONE_STEP_RUN,
        *extra,
    ]


def write_run_files(root: Path, *, prompt_seed: int = 3, prompts: int = 24) -> Path:
    """``root/model`` (a SMALL_SPEC preset) and ``root/prompts.jsonl``; returns ``root``."""
    from agentrl.data.synthetic import TaskGenerator, write_tasks

    tokenizer = small_tokenizer()
    save_preset(build_model(SMALL_SPEC, len(tokenizer)), tokenizer, root / "model")
    generator = TaskGenerator(seed=prompt_seed)
    tasks = list(generator.tasks(prompts))
    write_tasks(str(root / "prompts.jsonl"), tasks, generator.tools())
    return root


def short_run_config(files: Path, save_dir: Path, name: str, **overrides: Any) -> Any:
    """A `tiny`-preset TrainConfig over `write_run_files` output: SHORT_RUN, then
    ``overrides``; the run writes to ``save_dir/name``."""
    from agentrl.config import resolve

    values = dict(
        model=str(files / "model"),
        data_path=str(files / "prompts.jsonl"),
        save_dir=str(save_dir),
        run_name=name,
    )
    return resolve(preset="tiny", overrides={**values, **SHORT_RUN, **overrides})


def use_examples(monkeypatch: Any) -> None:
    """Make `examples.<name>` importable as `agentrl train` finds it: from the working
    directory (the checkout's root), not from a path entry the suite happened to add."""
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(REPO))])


def write_example_data(name: str, path: Path, monkeypatch: Any, n: int = 12) -> Path:
    """``n`` tasks of ``examples/<name>.py`` (its ``write_data``) at ``path``; see
    `use_examples`."""
    from agentrl.utils.imports import load_object

    use_examples(monkeypatch)
    load_object(f"examples.{name}:write_data")(str(path), n=n)
    return path


def example_train_args(
    model: Path, data: Path, out: Path, *, steps: int = 2, max_turns: int = 2
) -> list[str]:
    """`agentrl train` arguments for a short run of an example on the tiny model: ``steps``
    steps of 2 prompts x 2 generations, 8-token turns, a 20% held-out split evaluated on 2
    samples, nothing periodic; the run writes to ``out/run``. Callers add the example's
    own options after these (a later repeat of an option wins)."""
    return [
        "train",
        "--model",
        str(model),
        "--data",
        str(data),
        "--total_steps",
        str(steps),
        "--save_dir",
        str(out),
        "--save_weight",
        "run",
        "--batch_size",
        "2",
        "--num_generations",
        "2",
        "--max_turns",
        str(max_turns),
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


def eval_args(model: Path, data: Path, *, samples: int, max_gen_len: int) -> list[str]:
    """`agentrl eval` of ``model`` on ``samples`` prompts of ``data`` (every line kept), one
    turn of at most ``max_gen_len`` tokens each; callers add their own options after these."""
    return [
        "eval",
        "--model",
        str(model),
        "--data",
        str(data),
        "--filter_mode",
        "all",
        "--eval_samples",
        str(samples),
        "--max_turns",
        "1",
        "--eval_max_gen_len",
        str(max_gen_len),
    ]
