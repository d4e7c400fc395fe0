"""What a run's config decides before the first step: its length, and the option objects
of its parts.

The trainer config is one flat set of options; the step, the optimizer and the KL
controller each take their own small dataclass (`agentrl.rl`'s names), built here.
"""

from __future__ import annotations

import math

from agentrl.config import TrainConfig
from agentrl.rl.kl_control import BetaConfig
from agentrl.rl.optim import OptimConfig
from agentrl.tools import ToolRegistry
from agentrl.training.step import StepSettings, config_sections


def planned_total_steps(config: TrainConfig, train_prompts: int, data_shards: int = 1) -> int:
    """The run's length: ``total_steps`` (divided among ``data_shards`` data-parallel ranks
    when ``scale_total_steps_by_world_size``), else ``epochs`` passes over the
    ``train_prompts`` this process trains on."""
    if config.total_steps > 0:
        if data_shards > 1 and config.scale_total_steps_by_world_size:
            return math.ceil(config.total_steps / data_shards)
        return config.total_steps
    return math.ceil(train_prompts / config.batch_size) * config.epochs


def step_settings(config: TrainConfig, tools: ToolRegistry) -> StepSettings:
    """What shapes every training step of the run."""
    loss, advantage, bc = config_sections(config.flat())
    return StepSettings(
        loss=loss,
        advantage=advantage,
        bc=bc,
        reward=config.reward,
        num_generations=config.num_generations,
        max_total_len=config.max_total_len,
        strict_group_packing=bool(config.strict_group_packing),
        stale_discount=config.async_stale_discount,
        micro_batch_size=config.micro_batch_size,
        ppo_epochs=config.ppo_epochs,
        num_mini_batches=config.num_mini_batches,
        default_tools=tools.specs(),
        logprob_temperature=config.logprob_divisor,
    )


def optim_config(config: TrainConfig) -> OptimConfig:
    """The optimizer, its schedule and gradient accumulation."""
    return OptimConfig(
        learning_rate=config.learning_rate,
        weight_decay=config.weight_decay,
        adam_beta1=config.adam_beta1,
        adam_beta2=config.adam_beta2,
        adam_epsilon=config.adam_epsilon,
        grad_clip=config.grad_clip,
        accumulation_steps=config.accumulation_steps,
        micro_batch_size=config.micro_batch_size,
        warmup_steps=config.warmup_steps,
    )


def beta_config(config: TrainConfig) -> BetaConfig:
    """The KL coefficient's start value and controller."""
    flat = config.flat()
    beta = BetaConfig(**{k: flat[k] for k in BetaConfig.__dataclass_fields__})
    beta.beta_auto_tune = bool(config.beta_auto_tune)
    return beta


__all__ = ["beta_config", "optim_config", "planned_total_steps", "step_settings"]
