"""``--dtype``: the weights of the policy and its copies in that dtype, for training and
evaluation on the CPU too; half-precision training keeps float32 master weights."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import torch
from agentrl.cli import main as cli_main
from agentrl.rl.optim import OptimConfig, Optimization

from tests.fakes.models import tiny_model
from tests.fakes.runs import eval_args, short_run_config


def test_load_models_holds_every_copy_in_the_asked_dtype(run_files: Path, tmp_path: Path):
    from agentrl.assembly.models import load_models

    cfg = short_run_config(run_files, tmp_path, "bf16", dtype="bfloat16", beta=0.03)
    models = load_models(cfg, lambda _m: None)
    for model in (models.policy, models.reference, models.rollout):
        assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    fp32 = load_models(short_run_config(run_files, tmp_path, "fp32"), lambda _m: None)
    assert {p.dtype for p in fp32.policy.parameters()} == {torch.float32}
    sharded = short_run_config(run_files, tmp_path, "fsdp", dtype="bfloat16", fsdp=1)
    from agentrl.assembly.models import weight_dtype

    assert weight_dtype(sharded) == "float32"  # FSDP casts its float32 shards itself


def test_half_weights_train_on_float32_masters():
    """An update far below bfloat16's rounding step still accumulates in the masters and
    reaches the weights once large enough; the masters survive a state round trip."""
    model = torch.nn.Linear(4, 1, bias=False).to(torch.bfloat16)
    with torch.no_grad():
        model.weight.fill_(1.0)
    config = OptimConfig(learning_rate=1e-3, weight_decay=0.0, grad_clip=0.0, accumulation_steps=1)
    opt = Optimization(model, config, total_steps=10_000)
    assert opt.masters is not None and opt.masters[0].dtype == torch.float32

    def step():
        opt.begin()
        assert opt.backward(model(torch.ones(1, 4, dtype=torch.bfloat16)).sum())
        return opt.finish()

    assert step().stepped
    master = opt.masters[0].detach().clone()
    assert float(master[0, 0]) == pytest.approx(1.0 - 1e-3, abs=1e-6)  # in float32
    assert float(model.weight.detach()[0, 0]) == 1.0  # 0.999 rounds back to 1.0 in bfloat16
    saved = copy.deepcopy(opt.state_dict())
    for _ in range(9):
        step()
    assert float(model.weight.detach()[0, 0]) < 1.0  # ten small steps did move the weight
    opt.load_state_dict(saved)
    torch.testing.assert_close(opt.masters[0], master)


def test_float32_weights_keep_no_master_copy():
    opt = Optimization(tiny_model(), OptimConfig(), total_steps=4)
    assert opt.masters is None
    assert opt.optimizer.param_groups[0]["params"][0] is opt.params[0]


@pytest.mark.slow
def test_train_and_eval_in_bfloat16_on_the_cpu(run_files: Path, tmp_path: Path, capsys):
    from agentrl.trainer import Trainer

    cfg = short_run_config(
        run_files, tmp_path, "bf16-run", dtype="bfloat16", total_steps=2, beta=0.03
    )
    trainer = Trainer(cfg)
    result = trainer.run()
    assert result.steps_done == 2 and result.stopped is None
    assert {p.dtype for p in trainer.models.policy.parameters()} == {torch.bfloat16}
    lines = (result.run_dir / "metrics.jsonl").read_text().splitlines()
    losses = [json.loads(line)["loss/total"] for line in lines if "loss/total" in line]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses)
    files = (run_files / "model", run_files / "prompts.jsonl")
    args = eval_args(*files, samples=2, max_gen_len=8)
    code = cli_main([*args, "--dtype", "bfloat16", "--device", "cpu"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "on 2 prompts" in out
