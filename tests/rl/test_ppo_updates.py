"""Several optimizer updates per rollout batch: PPO epochs and mini-batches."""

from __future__ import annotations

import pytest
import torch
from agentrl.assembly.settings import config_sections
from agentrl.config import resolve
from agentrl.models.tiny import build_model
from agentrl.rl.kl_control import BetaConfig, BetaController
from agentrl.rl.optim import OptimConfig, Optimization
from agentrl.training.step import StepSettings, train_on_groups, update_plan

from tests.fakes.models import SMALL_SPEC, cpu_models, rolled_out_batch


def _settings(epochs: int, parts: int) -> StepSettings:
    config = resolve(preset="compat", overrides={"bc_coef": 0.0, "loss_reduction": "token"})
    loss, advantage, bc = config_sections(config)
    return StepSettings(
        loss,
        advantage,
        bc,
        config.reward,
        num_generations=3,
        max_total_len=512,
        strict_group_packing=True,
        stale_discount=0.65,
        micro_batch_size=0,
        ppo_epochs=epochs,
        num_mini_batches=parts,
    )


def test_each_pass_covers_every_row_once_in_a_reproducible_order():
    plan = update_plan(7, _settings(2, 3), step=5, device=torch.device("cpu"))
    assert len(plan) == 6
    for epoch in (plan[:3], plan[3:]):
        rows = sorted(r for part in epoch for r in part.tolist())
        assert rows == list(range(7))
        assert sorted(len(part) for part in epoch) == [2, 2, 3]
    again = update_plan(7, _settings(2, 3), step=5, device=torch.device("cpu"))
    assert [p.tolist() for p in plan] == [p.tolist() for p in again]
    other = update_plan(7, _settings(2, 3), step=6, device=torch.device("cpu"))
    assert [p.tolist() for p in plan] != [p.tolist() for p in other]
    assert update_plan(7, _settings(1, 1), step=5, device=torch.device("cpu")) == [None]
    # More parts than rows: one row each, no empty update.
    assert [len(p) for p in update_plan(2, _settings(1, 4), 1, torch.device("cpu"))] == [1, 1]


@pytest.fixture(scope="module")
def rolled_out(small_tokenizer):
    model = build_model(SMALL_SPEC, len(small_tokenizer))
    groups = rolled_out_batch(
        model, small_tokenizer, prompts=6, num_generations=3, max_new_tokens=10
    )
    return model, small_tokenizer, groups


def _train(rolled_out, epochs: int, parts: int):
    model, tokenizer, groups = rolled_out
    models = cpu_models(model, tokenizer)
    policy = models.policy
    opt = Optimization(policy, OptimConfig(accumulation_steps=1, learning_rate=1e-2), 8)
    out = train_on_groups(
        groups,
        step=1,
        current_version=0,
        reward_baseline=0.0,
        settings=_settings(epochs, parts),
        models=models,
        optimization=opt,
        beta=BetaController(BetaConfig()),
    )
    return out, policy


@pytest.mark.slow
def test_epochs_and_mini_batches_step_the_optimizer_once_per_part(rolled_out):
    single, single_policy = _train(rolled_out, 1, 1)
    several, several_policy = _train(rolled_out, 2, 3)
    assert single.report.opt_step == 1 and "train/updates" not in single.metrics
    assert several.report.opt_step == 6 and several.metrics["train/updates"] == 6.0
    assert several.metrics["train/opt_step"] == 6.0
    # Same batch, same rewards; the weights moved clearly further with six updates than with
    # one (not six times as far: AdamW steps partly cancel; 1.9x with this seed's rollout).
    assert several.metrics["reward/mean"] == single.metrics["reward/mean"]
    start = dict(rolled_out[0].named_parameters())
    moved_single = sum(
        float((p - start[n]).detach().abs().sum()) for n, p in single_policy.named_parameters()
    )
    moved_several = sum(
        float((p - start[n]).detach().abs().sum()) for n, p in several_policy.named_parameters()
    )
    assert moved_several > 1.5 * moved_single


@pytest.mark.parametrize("name", ["ppo_epochs", "num_mini_batches"])
def test_zero_updates_per_batch_is_a_configuration_error(name):
    with pytest.raises(ValueError, match=name):
        resolve(overrides={name: 0})
