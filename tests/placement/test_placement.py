"""One trainer, placed: no subclass of `Trainer`, and what each placement answers.

The multi-process behaviour (two gloo ranks under torchrun) is in test_distributed.py,
which also checks that the single-process and data-parallel runs there are both a plain
`Trainer`. Here: the choices and answers that need no process group.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import pkgutil
from pathlib import Path

import pytest
import torch
from agentrl.assembly.settings import planned_total_steps, steps_text
from agentrl.config import resolve
from agentrl.observability import QuietObserver, RunObserver
from agentrl.placement import (
    DataParallel,
    DistContext,
    FullWeights,
    LoraAdapter,
    SingleProcess,
    TrainerRolloutSplit,
    adapter_for,
    placement_for,
)
from agentrl.trainer import Trainer
from agentrl.training.signals import StopRequest
from agentrl.training.step import StepOutcome

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "agentrl"


def _ctx(rank: int = 0, world_size: int = 2) -> DistContext:
    """A rank's place in a group that is never joined: enough for choices, no collectives."""
    return DistContext(rank, world_size, rank, "gloo", 30.0, torch.device("cpu"))


def _base_names(node: ast.ClassDef) -> list[str]:
    names = []
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.append(base.id)
        elif isinstance(base, ast.Attribute):
            names.append(base.attr)
    return names


def test_no_class_in_the_package_subclasses_the_trainer():
    subclasses = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and "Trainer" in _base_names(node):
                subclasses.append(f"{path.relative_to(PACKAGE)}:{node.name}")
    assert subclasses == []
    # And at run time, with every module that drives training imported.
    for module in pkgutil.walk_packages([str(PACKAGE / "placement")], "agentrl.placement."):
        importlib.import_module(module.name)
    importlib.import_module("agentrl.commands.train")
    assert Trainer.__subclasses__() == []


def test_one_trainer_class_takes_each_placement(tmp_path):
    config = resolve(preset="tiny", overrides={"save_dir": str(tmp_path)})
    for placement in (SingleProcess(), DataParallel(_ctx()), TrainerRolloutSplit(_ctx())):
        trainer = Trainer(config, placement=placement)
        assert type(trainer) is Trainer and trainer.placement is placement
    assert isinstance(Trainer(config).placement, SingleProcess)


def test_outside_torchrun_the_run_is_one_process(monkeypatch, tmp_path):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    config = resolve(preset="tiny", overrides={"save_dir": str(tmp_path)})
    assert isinstance(placement_for(config), SingleProcess)


def test_the_layout_follows_multi_gpu_mode_and_the_rank():
    ddp = resolve(preset="tiny", overrides={"multi_gpu_mode": "ddp"})
    split = resolve(preset="tiny", overrides={"multi_gpu_mode": "trainer_rollout"})
    assert isinstance(placement_for(ddp, _ctx(1)), DataParallel)
    rank_0, rank_1 = placement_for(split, _ctx(0)), placement_for(split, _ctx(1))
    assert isinstance(rank_0, TrainerRolloutSplit) and isinstance(rank_1, TrainerRolloutSplit)
    assert (rank_0.is_main, rank_0.is_rollout_rank) == (True, False)
    assert (rank_1.is_main, rank_1.is_rollout_rank) == (False, True)
    assert placement_for(ddp, _ctx(1)).is_main is False
    assert placement_for(ddp, _ctx(0, world_size=1)).name == "single"  # a group of one


def test_placements_refuse_engines_they_cannot_feed():
    server = resolve(preset="tiny", overrides={"multi_gpu_mode": "ddp", "rollout_engine": "sglang"})
    with pytest.raises(ValueError, match="SGLang engine is one server"):
        placement_for(server, _ctx())
    in_process = resolve(preset="tiny", overrides={"rollout_engine": "vllm"})  # split by default
    with pytest.raises(ValueError, match=r"torch engine on ranks 1\.\.N-1"):
        placement_for(in_process, _ctx())
    with pytest.raises(ValueError, match="at least 2 ranks"):
        TrainerRolloutSplit(_ctx(world_size=1))


def test_a_single_process_answers_every_question_locally():
    place = SingleProcess()
    assert (place.is_main, place.is_rollout_rank, place.data_shards) == (True, False, 1)
    assert place.gather(3, "agree on the batch") == [3]

    def never(*_: object) -> bool:
        raise AssertionError("one process does not pre-check packing")

    assert place.ranks_able_to_train(never) == [True]
    metrics = {"loss/total": 1.5}
    gathered = place.gather_metrics(metrics)
    assert gathered == metrics and gathered is not metrics
    outcome = StepOutcome({"reward/baseline": 0.25}, None, None, None, 0.25)
    place.batch_reward_baseline(outcome, before=0.0, decay=0.9)
    assert outcome.reward_baseline == 0.25  # the step's own baseline stands
    stop = StopRequest()
    assert place.agree_on_stop(stop) is False
    stop.request("asked")
    assert place.agree_on_stop(stop) is True and stop.reason == "asked"
    with pytest.raises(RuntimeError, match="no rollout worker"):
        place.rollout_worker(resolve(preset="tiny"))


def test_total_steps_are_divided_among_data_parallel_ranks_only_when_asked():
    config = resolve(preset="tiny", overrides={"total_steps": 10, "batch_size": 4})
    assert planned_total_steps(config, 100) == 10
    assert planned_total_steps(config, 100, data_shards=3) == 10  # the run's steps
    assert steps_text(config, 10, 3) == (
        "10 steps per rank x 3 data-parallel ranks (--total_steps 10, the run's steps)"
    )
    compat = resolve(preset="compat", overrides={"total_steps": 10, "batch_size": 4})
    assert compat.scale_total_steps_by_world_size  # the reference's scaling
    assert planned_total_steps(compat, 100, data_shards=3) == 4  # ceil(10 / 3)
    assert steps_text(compat, 4, 3) == (
        "4 steps per rank x 3 data-parallel ranks (--total_steps 10 divided among the "
        "ranks (scale_total_steps_by_world_size))"
    )
    assert steps_text(config, 10, 1) == "10 steps"
    by_epochs = dataclasses.replace(config, total_steps=0, epochs=2)
    assert planned_total_steps(by_epochs, 10) == 6  # 2 x ceil(10 / 4)
    assert planned_total_steps(by_epochs, 5, data_shards=2) == 4  # this rank's shard of 5


def test_the_quiet_observer_has_every_method_of_the_run_observer():
    public = {n for n in vars(RunObserver) if not n.startswith("_")}
    assert public <= set(vars(QuietObserver))
    quiet = QuietObserver()
    quiet.log("not shown")
    quiet.train_step(1, {"loss/total": 1.0})
    assert quiet.history() == [] and quiet.close() is None


def test_the_adapter_follows_the_lora_options():
    assert isinstance(adapter_for(resolve(preset="tiny")), FullWeights)
    options = {"lora_rank": 4, "lora_alpha": 8, "lora_target_modules": "q_proj"}
    lora = adapter_for(resolve(preset="tiny", overrides=options))
    assert isinstance(lora, LoraAdapter)
    assert (lora.settings.rank, lora.settings.alpha, lora.settings.target_modules) == (
        4,
        8,
        ("q_proj",),
    )
    with pytest.raises(ValueError, match="ref_from_rl_checkpoint"):
        adapter_for(resolve(preset="tiny", overrides={"lora_rank": 4, "ref_from_rl_checkpoint": 1}))
