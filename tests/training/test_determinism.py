"""One seed, one run: training on the CPU uses torch's deterministic kernels unless
``--deterministic false`` asks for the fastest ones.

With two threads, some CPU backward kernels add in an order that varies between processes:
measured on the tiny preset (2-core Intel Xeon, 2026-12-07), two runs of the same command
gave weights differing in the last bits after the first optimizer step, and held-out
figures that drifted apart over a long run. These tests pin the switch that prevents it,
in training and in the warm start.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from agentrl.sft.pipeline import SFTRunOptions, run_sft
from agentrl.sft.train import SFTConfig
from agentrl.trainer import Trainer

from tests.fakes.runs import short_run_config


@pytest.fixture(autouse=True)
def _restore_the_global_switch():
    before = torch.are_deterministic_algorithms_enabled()
    yield
    torch.use_deterministic_algorithms(before)


@pytest.mark.parametrize("deterministic", [True, False])
def test_training_steps_run_with_the_kernels_asked_for(run_files, tmp_path, deterministic):
    seen: list[bool] = []
    torch.use_deterministic_algorithms(not deterministic)  # the run must set it itself
    config = short_run_config(
        run_files, tmp_path, "run", total_steps=1, deterministic=deterministic
    )
    Trainer(
        config,
        callbacks=[
            lambda trainer, step, outcome: seen.append(torch.are_deterministic_algorithms_enabled())
        ],
    ).run()
    assert seen == [deterministic]


def test_the_warm_start_runs_with_deterministic_kernels(tmp_path: Path):
    torch.use_deterministic_algorithms(False)
    options = SFTRunOptions(
        num_demos=8,
        eval_tasks=0,
        train=SFTConfig(output_dir=str(tmp_path / "sft"), steps=1, progress=False),
    )
    run_sft(options, log=lambda message: None)
    assert torch.are_deterministic_algorithms_enabled()
    assert SFTRunOptions().deterministic
