"""`torchrun --nproc_per_node=2` on CPU (gloo): data parallel, the trainer/rollout split,
and ranks that die or hang. The same `Trainer` class runs everywhere; only its placement
(`agentrl.placement`) differs.

Each test launches this file under torchrun (the ``__main__`` block at the bottom runs one
scenario per rank and writes what it saw to ``<out>/rank<N>.json``); the test then reads
those files and torchrun's exit status. Everything uses a tiny random Qwen3 and a handful
of generated prompts, so each launch takes seconds.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.ranks import launch_torchrun, train_one_step

# Every test here launches two processes under torchrun and trains: tens of seconds each.
pytestmark = pytest.mark.slow

# A launch (two processes importing torch, a tiny model, a few steps) takes 15-30 s on a
# busy 2-core machine; the limit only catches a launch that never ends.
TIMEOUT_S = 120
HANG_TIMEOUT_S = 10.0  # the collective timeout of the failure scenarios
HERE = Path(__file__).resolve()


# ---------------------------------------------------------------- the launcher side


def _launch(
    scenario: str, assets: Path, out: Path, timeout: float = TIMEOUT_S
) -> tuple[int, str, float]:
    # A killed rank: rank 0 must see its peer vanish (and write what it saw) before torchrun,
    # polling every 0.1 s by default, kills it too; on a loaded box it sometimes did not.
    interval = 5.0 if scenario == "kill" else None
    return launch_torchrun(HERE, [scenario, str(assets), str(out)], out, timeout, interval)


def _result(out: Path, rank: int) -> dict[str, Any]:
    return json.loads((out / f"rank{rank}.json").read_text())


def test_ddp_matches_one_process_and_keeps_replicas_identical(run_files, tmp_path):
    code, output, _ = _launch("ddp", run_files, tmp_path)
    assert code == 0, output[-4000:]
    r0, r1 = _result(tmp_path, 0), _result(tmp_path, 1)
    # One trainer class: the single-process reference and the data-parallel run are both
    # a plain `Trainer`, told apart only by their placement.
    assert r0["trainers"] == {"single": "Trainer", "ddp": "Trainer"}
    assert r1["trainers"] == {"ddp": "Trainer"}
    # Step 1: the rank-averaged loss and gradient equal one process on the global batch.
    assert r0["loss_dist"] == pytest.approx(r0["loss_single"], rel=1e-5, abs=1e-7)
    assert r0["grad_max_diff"] < 1e-6 * max(r0["grad_max_abs"], 1.0)
    assert r0["grad_max_abs"] > 0  # the comparison compared something
    assert r1["loss_dist"] == r0["loss_dist"]
    # A whole run: both ranks trained the same steps and hold the same weights.
    assert r0["run_steps"] == r1["run_steps"] == 2
    assert r0["checksums"][0] == r0["checksums"][1]
    assert r0["train_records"] == 2 and r0["world_size_metric"] == 2.0
    assert r0["checkpoint"] and r1["checkpoint"] is None  # only rank 0 writes
    # Resume from the multi-rank checkpoint: continues at step 3 on both ranks.
    assert r0["resumed_steps"] == r1["resumed_steps"] == 3
    assert r0["resumed_checksums"][0] == r0["resumed_checksums"][1]


def test_trainer_rollout_trains_on_groups_from_rank_1(run_files, tmp_path):
    code, output, _ = _launch("split", run_files, tmp_path)
    assert code == 0, output[-4000:]
    trainer, roller = _result(tmp_path, 0), _result(tmp_path, 1)
    assert trainer["steps_done"] == 3
    assert trainer["gathered"] >= 3 * 2  # batch_size groups per step, all from rank 1
    assert roller["groups_sent"] == trainer["gathered"]
    # The version advanced with every sync and both ranks agree on it.
    assert trainer["versions"] == [1, 2, 3]
    assert roller["policy_version"] == trainer["final_version"] == 3
    assert roller["syncs"] == 1 + 3  # the starting weights, then one per optimizer step
    assert roller["checksum"] == trainer["checksum"]  # rank 1 holds exactly the trained policy


def test_a_killed_rank_fails_the_run_quickly(run_files, tmp_path):
    code, output, _ = _launch("kill", run_files, tmp_path)
    assert code != 0
    # Rank 0 saw its peer vanish and stopped with a clear error, well within the timeout.
    seen = _result(tmp_path, 0)
    assert "rank 0 of 2" in seen["error"] and "another rank died" in seen["error"]
    assert seen["waited_s"] < HANG_TIMEOUT_S + 10
    assert "exitcode" in output and ("-9" in output or "SIGKILL" in output), output[-4000:]


def test_a_hung_rank_fails_the_run_with_a_clear_error(run_files, tmp_path):
    code, output, _ = _launch("hang", run_files, tmp_path)
    assert code != 0
    seen = _result(tmp_path, 0)
    assert f"did not answer within the {HANG_TIMEOUT_S:.0f}s" in seen["error"]
    # Bounded: rank 0 gave up after about the collective timeout, not never.
    assert HANG_TIMEOUT_S - 1 <= seen["waited_s"] < HANG_TIMEOUT_S + 10
    assert "DistributedError" in output, output[-4000:]


# ---------------------------------------------------------------- the rank side


def _config(assets: Path, out: Path, name: str, **overrides: Any) -> Any:
    from tests.fakes.runs import short_run_config

    values = dict(
        total_steps=4,
        scale_total_steps_by_world_size=True,
        max_gen_len=8,
        bc_coef=0.0,
        seed=11,
        multi_gpu_mode="ddp",
    )
    return short_run_config(assets, out, name, **{**values, **overrides})


def _checksum(model: Any) -> float:
    import torch

    with torch.no_grad():
        return float(sum(p.double().sum() * (i + 1) for i, p in enumerate(model.parameters())))


def _groups(trainer: Any, n: int) -> list[Any]:
    """``n`` rollout groups every rank computes identically (same weights, prompts, seed)."""
    import random

    from agentrl.assembly.prompts import load_prompts
    from agentrl.models import frozen_copy
    from agentrl.rollout import run_episodes
    from agentrl.rollout.engine import TorchEngine

    m = trainer.models
    engine = TorchEngine(frozen_copy(m.policy), m.tokenizer, device=m.device, seed=123)
    pool, _ = load_prompts(trainer.config, trainer.tools, lambda message: None)  # unsharded
    prompts = [pool[i] for i in range(n)]
    return run_episodes(
        engine,
        prompts,
        trainer.tools,
        num_generations=2,
        config=trainer.episode,
        rng=random.Random(0),
    )


def _ddp(ctx: Any, assets: Path, out: Path) -> dict[str, Any]:
    from agentrl.observability import read_metrics
    from agentrl.placement import DataParallel, SingleProcess
    from agentrl.trainer import Trainer, run_training

    result: dict[str, Any] = {}
    # -- step 1 against one process on the same global batch (gradient kept: accumulation 2)
    cfg = _config(assets, out, "step", accumulation_steps=2)
    dist_tr = Trainer(cfg, placement=DataParallel(ctx))
    result["trainers"] = {dist_tr.placement.name: type(dist_tr).__name__}
    dist_tr.build()
    groups = _groups(dist_tr, 4)
    mine = groups[ctx.rank :: ctx.world_size]
    outcome = train_one_step(dist_tr, mine)
    (result["loss_dist"],) = ctx.mean([outcome.metrics["loss/total"]])
    grads = [p.grad.detach().clone() for p in dist_tr.optimization.params]
    if ctx.rank == 0:
        single = Trainer(_config(assets, out, "single", accumulation_steps=2))
        assert isinstance(single.placement, SingleProcess)
        result["trainers"][single.placement.name] = type(single).__name__
        single.build()
        ref = train_one_step(single, groups)
        ref_grads = [p.grad for p in single.optimization.params]
        result["loss_single"] = ref.metrics["loss/total"]
        result["grad_max_abs"] = max(float(g.abs().max()) for g in ref_grads)
        result["grad_max_diff"] = max(
            float((a - b).abs().max()) for a, b in zip(grads, ref_grads, strict=True)
        )
    # -- a whole run, then a resume from its checkpoint
    trainer = Trainer(_config(assets, out, "run"), placement=DataParallel(ctx))
    run = trainer.run()
    result["run_steps"] = run.steps_done
    result["checksums"] = ctx.all_gather_objects(_checksum(trainer.models.policy))
    result["checkpoint"] = str(run.checkpoint) if run.checkpoint else None
    if ctx.rank == 0:
        records = [r for r in read_metrics(run.run_dir / "metrics.jsonl") if r["kind"] == "train"]
        result["train_records"] = len(records)
        result["world_size_metric"] = records[-1].get("dist/world_size")
    resumed_cfg = _config(assets, out, "run", total_steps=6, from_resume=1)
    resumed = run_training(resumed_cfg, [_keep_trainer], placement=DataParallel(ctx))
    result["resumed_steps"] = resumed.steps_done
    result["resumed_checksums"] = ctx.all_gather_objects(_checksum(_kept[-1].models.policy))
    return result


_kept: list[Any] = []


def _keep_trainer(trainer: Any, step: int, outcome: Any) -> None:
    _kept.append(trainer)


def _split(ctx: Any, assets: Path, out: Path) -> dict[str, Any]:
    from agentrl.placement import TrainerRolloutSplit, placement_for
    from agentrl.trainer import Trainer

    cfg = _config(
        assets,
        out,
        "split",
        multi_gpu_mode="trainer_rollout",
        total_steps=3,
        async_workers=1,
        fetch_timeout_sec=30.0,
    )
    versions: list[int] = []

    def record(trainer: Any, step: int, outcome: Any) -> None:
        versions.append(trainer.source.version.get())

    placement = placement_for(cfg, ctx)
    assert isinstance(placement, TrainerRolloutSplit)
    if placement.is_rollout_rank:
        worker = placement.rollout_worker(cfg)
        summary = worker.run()
        # The weights rank 1 rolled out with at the end, for rank 0 to compare.
        return {**summary, "checksum": _checksum(worker.engine.model)}
    runner = Trainer(cfg, [record], placement=placement)
    result = runner.run()
    stats = runner.source.stats()
    return {
        "steps_done": result.steps_done,
        "gathered": stats["gathered"],
        "versions": versions,
        "final_version": runner.source.version.get(),
        "checksum": _checksum(runner.models.policy),
    }


def _failing(ctx: Any, assets: Path, out: Path, how: str) -> dict[str, Any]:
    from agentrl.placement import DistributedError, placement_for
    from agentrl.trainer import run_training

    marks: dict[str, float] = {}

    def misbehave(trainer: Any, step: int, outcome: Any) -> None:
        if step != 1:
            return
        marks["step_1_done"] = time.monotonic()
        if ctx.rank == 1:
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # let torchrun reap the hung rank
            time.sleep(120)

    cfg = _config(assets, out, how, total_steps=6)
    try:
        run_training(cfg, [misbehave], placement=placement_for(cfg, ctx))
    except DistributedError as exc:
        waited = time.monotonic() - marks.get("step_1_done", time.monotonic())
        seen = {"error": str(exc), "waited_s": waited}
        (out / f"rank{ctx.rank}.json").write_text(json.dumps(seen))
        raise
    return {}


def main(argv: list[str]) -> int:
    import torch
    from agentrl.placement import init_distributed, shutdown

    scenario, assets, out = argv[0], Path(argv[1]), Path(argv[2])
    torch.set_num_threads(1)
    timeout = HANG_TIMEOUT_S if scenario in ("kill", "hang") else 30.0
    ctx = init_distributed("gloo", timeout)
    assert ctx is not None and ctx.world_size == 2
    try:
        if scenario == "ddp":
            result = _ddp(ctx, assets, out)
        elif scenario == "split":
            result = _split(ctx, assets, out)
        else:
            _failing(ctx, assets, out, scenario)
            return 1  # a failure scenario that did not fail
        (out / f"rank{ctx.rank}.json").write_text(json.dumps(result))
    finally:
        shutdown(ctx)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
