"""`--fsdp 1` on CPU: `torchrun --nproc_per_node=2` with gloo against one process.

The launch (this file's ``__main__`` block, one scenario per rank) trains one step with
the policy and reference cut into FSDP2 shards and one process trains the same global
batch unsharded; then a short sharded run writes a `torch.distributed.checkpoint`
checkpoint, which the test process (one rank) resumes from.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.ranks import launch_torchrun, train_one_step

pytestmark = pytest.mark.slow  # two torchrun processes train: tens of seconds

TIMEOUT_S = 180
HERE = Path(__file__).resolve()
LR = 1e-3  # large enough that one step visibly moves every weight


def _launch(assets: Path, out: Path) -> tuple[int, str]:
    code, output, _ = launch_torchrun(HERE, [str(assets), str(out)], out, TIMEOUT_S)
    return code, output


# Reading a sharded checkpoint in one process is the point here; torch says it assumes so.
@pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")
def test_fsdp_matches_one_process_and_resumes_in_one_process(run_files, tmp_path):
    code, output = _launch(run_files, tmp_path)
    assert code == 0, output[-6000:]
    r0 = json.loads((tmp_path / "rank0.json").read_text())
    r1 = json.loads((tmp_path / "rank1.json").read_text())
    assert r0["placement"] == "fsdp" and r0["sharded"]
    # Each rank holds half of the parameters.
    assert r0["local_numel"] < r0["global_numel"] and r1["local_numel"] < r1["global_numel"]
    # Step 1: rank-averaged loss = the one-process loss on the union of the batches ...
    assert r0["loss_dist"] == pytest.approx(r0["loss_single"], rel=1e-5, abs=1e-7)
    assert r1["loss_dist"] == r0["loss_dist"]
    # ... and the updated weights are the one-process update (float32 on gloo).
    assert r0["moved_max"] > 1e-5  # the step changed the weights
    assert r0["weight_max_diff"] < 1e-6, r0
    # A whole sharded run: both ranks trained, rank 0 logged, the checkpoint is DCP.
    assert r0["run_steps"] == r1["run_steps"] == 2, (r0["stopped"], r0["total_steps"])
    assert r0["checkpoint"] == r1["checkpoint"]
    assert (Path(r0["checkpoint"]) / "dcp" / ".metadata").is_file()
    assert r0["fsdp_metric"] == 1.0
    # Resumed on 2 ranks from its own sharded checkpoint: continues at step 3.
    assert r0["resumed_steps"] == r1["resumed_steps"] == 3
    assert (Path(r0["run_dir"]) / "policy" / "config.json").is_file()  # exported whole

    # Resume the 2-rank checkpoint in this (one) process: same weights, continues at step 3.
    from agentrl.trainer import Trainer

    from tests.fakes.runs import short_run_config

    # (a copy: the 2-rank resume above already wrote step 3 next to it)
    step_2 = Path(r0["checkpoint"])
    shutil.copytree(step_2, tmp_path / "solo" / "checkpoints" / step_2.name)
    cfg = short_run_config(
        run_files,
        tmp_path,
        "solo",
        total_steps=3,
        from_resume=1,
        bc_coef=0.0,
        seed=11,
        learning_rate=LR,
    )
    trainer = Trainer(cfg)
    trainer.build()
    trainer._resume_if_asked()
    assert trainer.resumed_from == tmp_path / "solo" / "checkpoints" / step_2.name
    assert trainer.counters.step == 2
    assert _checksum(trainer.models.policy) == pytest.approx(r0["final_checksum"], rel=1e-9)
    assert trainer.optimization.opt_step == r0["opt_step"] > 0
    assert trainer.optimization.optimizer.state  # the Adam moments came back
    result = Trainer(cfg).run()
    assert result.steps_done == 3


# ---------------------------------------------------------------- the rank side


def _config(assets: Path, out: Path, name: str, **overrides: Any) -> Any:
    from tests.fakes.runs import short_run_config

    values = dict(
        total_steps=2,
        scale_total_steps_by_world_size=True,
        max_gen_len=8,
        bc_coef=0.0,
        seed=11,
        multi_gpu_mode="ddp",
        learning_rate=LR,
        accumulation_steps=1,
        fsdp=1,
    )
    return short_run_config(assets, out, name, **{**values, **overrides})


def _checksum(model: Any) -> float:
    import torch

    with torch.no_grad():
        state = model.state_dict()
        return float(sum(v.double().sum() * (i + 1) for i, v in enumerate(state.values())))


def _full(model: Any) -> dict[str, Any]:
    from agentrl.placement.fsdp import full_state_dict, is_sharded

    if is_sharded(model):
        return full_state_dict(model)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _groups(trainer: Any, n: int) -> list[Any]:
    """``n`` rollout groups every rank computes identically (from the unsharded rollout copy)."""
    import random

    from agentrl.assembly.prompts import load_prompts
    from agentrl.models import frozen_copy
    from agentrl.rollout import run_episodes
    from agentrl.rollout.engine import TorchEngine

    m = trainer.models
    engine = TorchEngine(frozen_copy(m.rollout), m.tokenizer, device=m.device, seed=123)
    pool, _ = load_prompts(trainer.config, trainer.tools, lambda message: None)  # unsharded
    return run_episodes(
        engine,
        [pool[i] for i in range(n)],
        trainer.tools,
        num_generations=2,
        config=trainer.episode,
        rng=random.Random(0),
    )


def _ranks(ctx: Any, assets: Path, out: Path) -> dict[str, Any]:
    from agentrl.placement import FullyShardedDataParallel, placement_for
    from agentrl.trainer import Trainer

    result: dict[str, Any] = {}
    cfg = _config(assets, out, "step")
    placement = placement_for(cfg, ctx)
    assert isinstance(placement, FullyShardedDataParallel)
    result["placement"] = placement.name
    sharded = Trainer(cfg, placement=placement)
    sharded.build()
    policy = sharded.models.policy
    result["sharded"] = type(policy).__name__.startswith("FSDP")
    result["local_numel"] = sum(p.to_local().numel() for p in policy.parameters())
    result["global_numel"] = sum(p.numel() for p in policy.parameters())
    before = _full(policy)
    groups = _groups(sharded, 4)
    outcome = train_one_step(sharded, groups[ctx.rank :: ctx.world_size])
    assert outcome.report is not None and outcome.report.stepped, outcome.metrics
    (result["loss_dist"],) = ctx.mean([outcome.metrics["loss/total"]])
    after = _full(policy)
    if ctx.rank == 0:
        single = Trainer(_config(assets, out, "single", fsdp=0, multi_gpu_mode="ddp"))
        single.build()
        ref = train_one_step(single, groups)
        result["loss_single"] = ref.metrics["loss/total"]
        expected = single.models.policy.state_dict()
        result["moved_max"] = max(float((after[k] - before[k]).abs().max()) for k in after)
        result["weight_max_diff"] = max(float((after[k] - expected[k]).abs().max()) for k in after)
    run_trainer = Trainer(_config(assets, out, "run", total_steps=4), placement=placement)
    run = run_trainer.run()
    result["run_steps"] = run.steps_done
    result["stopped"] = run.stopped
    result["total_steps"] = run.total_steps
    result["checkpoint"] = str(run.checkpoint) if run.checkpoint else None
    result["run_dir"] = str(run.run_dir)
    result["opt_step"] = run_trainer.optimization.opt_step
    full = _full(run_trainer.models.policy)
    result["final_checksum"] = float(
        sum(v.double().sum() * (i + 1) for i, v in enumerate(full.values()))
    )
    resumed = Trainer(
        _config(assets, out, "run", total_steps=6, from_resume=1), placement=placement
    ).run()
    result["resumed_steps"] = resumed.steps_done
    if ctx.rank == 0:
        from agentrl.observability import read_metrics

        records = [r for r in read_metrics(run.run_dir / "metrics.jsonl") if r["kind"] == "train"]
        result["fsdp_metric"] = records[-1].get("dist/fsdp")
    return result


def main(argv: list[str]) -> int:
    import torch
    from agentrl.placement import init_distributed, shutdown

    assets, out = Path(argv[0]), Path(argv[1])
    torch.set_num_threads(1)
    ctx = init_distributed("gloo", 60.0)
    assert ctx is not None and ctx.world_size == 2
    try:
        result = _ranks(ctx, assets, out)
        (out / f"rank{ctx.rank}.json").write_text(json.dumps(result))
    finally:
        shutdown(ctx)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
