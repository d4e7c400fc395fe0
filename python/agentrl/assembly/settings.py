"""What a run's config decides before the first step: its length, and the option objects
of its parts.

The run's config is composed of the components' configs; the step, the optimizer and the
KL controller each get their own part of it, cut here.
"""

from __future__ import annotations

import math

from agentrl.config import TrainConfig
from agentrl.rl.advantages import AdvantageConfig
from agentrl.rl.bc import BCConfig
from agentrl.rl.kl_control import BetaConfig
from agentrl.rl.losses import LossConfig
from agentrl.rl.optim import OptimConfig
from agentrl.tools import ToolRegistry
from agentrl.training.step import StepSettings


def planned_total_steps(config: TrainConfig, train_prompts: int, data_shards: int = 1) -> int:
    """The run's length: ``total_steps`` (divided among ``data_shards`` data-parallel ranks
    when ``scale_total_steps_by_world_size``), else ``epochs`` passes over the
    ``train_prompts`` this process trains on."""
    if config.total_steps > 0:
        if data_shards > 1 and config.scale_total_steps_by_world_size:
            return math.ceil(config.total_steps / data_shards)
        return config.total_steps
    return math.ceil(train_prompts / config.batch_size) * config.epochs


def steps_text(config: TrainConfig, total: int, data_shards: int = 1) -> str:
    """The banner's words for the run's length: ``total`` steps, and under data parallel
    that this is the count each rank steps (all ranks step together) and why."""
    if data_shards <= 1:
        return f"{total} steps"
    if config.total_steps > 0 and config.scale_total_steps_by_world_size:
        why = (
            f"--total_steps {config.total_steps} divided among the ranks "
            "(scale_total_steps_by_world_size)"
        )
    elif config.total_steps > 0:
        why = f"--total_steps {config.total_steps}, the run's steps"
    else:
        why = f"{config.epochs} epoch(s) of this rank's prompts"
    return f"{total} steps per rank x {data_shards} data-parallel ranks ({why})"


def step_settings(config: TrainConfig, tools: ToolRegistry) -> StepSettings:
    """What shapes every training step of the run."""
    loss, advantage, bc = config_sections(config)
    return StepSettings(
        loss=loss,
        advantage=advantage,
        bc=bc,
        reward=config.reward,
        num_generations=config.num_generations,
        max_total_len=config.max_total_len,
        strict_group_packing=config.strict_group_packing,
        stale_discount=config.async_stale_discount,
        micro_batch_size=config.micro_batch_size,
        ppo_epochs=config.ppo_epochs,
        num_mini_batches=config.num_mini_batches,
        default_tools=tools.specs(),
        logprob_temperature=config.logprob_divisor,
    )


def optim_config(config: TrainConfig) -> OptimConfig:
    """The optimizer, its schedule and gradient accumulation."""
    return config.part(OptimConfig)


def beta_config(config: TrainConfig) -> BetaConfig:
    """The KL coefficient's start value and controller."""
    return config.part(BetaConfig)


def config_sections(config: TrainConfig) -> tuple[LossConfig, AdvantageConfig, BCConfig]:
    """The loss, advantage and BC parts of the run's config (a TrainConfig)."""
    length = config.max_completion_length or config.max_gen_len
    loss = config.part(LossConfig, max_completion_length=length)
    return loss, config.part(AdvantageConfig), config.part(BCConfig)


__all__ = [
    "beta_config",
    "config_sections",
    "optim_config",
    "planned_total_steps",
    "step_settings",
    "steps_text",
]
