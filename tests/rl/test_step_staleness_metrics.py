"""A training step's staleness and generation-length figures reach its metrics (and so
metrics.jsonl, the console line and the report)."""

from __future__ import annotations

import pytest
from agentrl.assembly.settings import config_sections
from agentrl.config import resolve
from agentrl.models.tiny import build_model
from agentrl.observability.progress import format_step_line
from agentrl.observability.report import PANELS
from agentrl.rl.kl_control import BetaConfig, BetaController
from agentrl.rl.optim import OptimConfig, Optimization
from agentrl.training.step import StepSettings, train_on_groups

from tests.fakes.models import SMALL_SPEC, cpu_models, rolled_out_batch


@pytest.mark.slow
def test_staleness_and_generated_tokens_are_step_metrics(small_tokenizer) -> None:
    model = build_model(SMALL_SPEC, len(small_tokenizer))
    groups = rolled_out_batch(
        model, small_tokenizer, prompts=4, num_generations=2, max_new_tokens=6
    )
    config = resolve(preset="compat", overrides={"bc_coef": 0.0})
    loss, advantage, bc = config_sections(config)
    settings = StepSettings(
        loss,
        advantage,
        bc,
        config.reward,
        num_generations=2,
        max_total_len=512,
        strict_group_packing=True,
        stale_discount=1.0,
        micro_batch_size=0,
        ppo_epochs=1,
        num_mini_batches=1,
    )
    models = cpu_models(model, small_tokenizer)
    opt = Optimization(models.policy, OptimConfig(accumulation_steps=1, learning_rate=1e-3), 1)
    # Sampled at version 0, trained at version 2: every token and group is 2 behind.
    out = train_on_groups(
        groups,
        step=1,
        current_version=2,
        reward_baseline=0.0,
        settings=settings,
        models=models,
        optimization=opt,
        beta=BetaController(BetaConfig()),
    )
    m = out.metrics
    assert m["async/token_staleness_mean"] == 2.0 and m["async/token_staleness_p95"] == 2.0
    assert m["async/staleness_group_mean"] == 2.0 and m["async/staleness_group_max"] == 2.0
    lengths = [sum(t.response_mask) for g in groups for t in g.trajectories]
    assert m["gen/tokens_min"] == min(lengths) and m["gen/tokens_max"] == max(lengths)
    cut = [t.stats["length_stops"] > 0 for g in groups for t in g.trajectories]
    assert m["gen/hit_limit_frac"] == sum(cut) / len(cut)
    assert f"stale 2.00/2 gen {m['gen/tokens_mean']:.0f}" in format_step_line(1, 1, m)


def test_the_report_draws_staleness_and_generation_length() -> None:
    keys = {key for _, lines in PANELS for _, _, key in lines}
    assert {"async/token_staleness_mean", "async/staleness_group_max"} <= keys
    assert {"gen/tokens_min", "gen/tokens_max", "gen/hit_limit_frac"} <= keys
