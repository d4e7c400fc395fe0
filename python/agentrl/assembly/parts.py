"""A run's parts, built once: models, tools, prompts, rewards, optimizer, rollout source,
evaluator.

:func:`build_run_parts` assembles them in one place, in the order they depend on each
other, into a frozen :class:`RunParts` that the trainer's loop only reads. Where each part
lives (one process, data parallel, a trainer/rollout split) is the placement's answer; the
builder asks it at the same named points the trainer used to (``preparing``,
``load_prompts``, ``share_weights``, ``optimization``, ``beta_controller``, and the rollout
source through ``make_source``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from agentrl.assembly.evaluation import agent_evaluator
from agentrl.assembly.models import load_models
from agentrl.assembly.prompts import prompt_config
from agentrl.assembly.settings import beta_config, optim_config, planned_total_steps, step_settings
from agentrl.assembly.task import (
    build_tools,
    episode_config,
    resolve_call_mode,
    run_reward_set,
    start_mcp_servers,
)
from agentrl.config import TrainConfig
from agentrl.data import PromptPool
from agentrl.envs import TaskParts
from agentrl.rl.kl_control import BetaController
from agentrl.rl.optim import Optimization
from agentrl.rollout import EpisodeConfig
from agentrl.tools import ToolRegistry
from agentrl.training.evaluation import Evaluator, eval_episode_config
from agentrl.training.models import Models
from agentrl.training.sources import GroupSource
from agentrl.training.step import StepSettings

Log = Callable[[str], None]
# The rollout source of the run, from what it samples with (the placement's choice).
SourceFactory = Callable[[Models, PromptPool, ToolRegistry, EpisodeConfig], GroupSource]


@dataclass(frozen=True)
class RunParts:
    """Everything the training loop runs over, built before its first step."""

    tools: ToolRegistry
    train_pool: PromptPool
    eval_pool: PromptPool
    rewards: Any  # the weighted reward functions (None: the built-in tool-use reward alone)
    models: Models
    total_steps: int
    settings: StepSettings
    optimization: Optimization
    beta: BetaController
    episode: EpisodeConfig
    source: GroupSource
    evaluator: Any  # an `Evaluator`, or an agent run's own


def build_run_parts(
    config: TrainConfig,
    task: TaskParts,
    *,
    placement: Any,
    adapter: Any,
    agent: Any,
    make_source: SourceFactory,
    log: Log,
    should_stop: Callable[[], bool],
) -> RunParts:
    """Load and build the run's parts (see module doc); ``should_stop`` is handed to a warm
    start that has to be trained first."""
    cfg, place = config, placement
    with place.preparing():  # files shared by every process are made once, first
        loaded = load_models(cfg, log, should_stop)
        servers = start_mcp_servers(cfg, log)
        tools = build_tools(cfg, task, log, servers)
        train_pool, eval_pool = place.load_prompts(prompt_config(cfg, task, tools, log), tools, log)
    cfg = resolve_call_mode(cfg, train_pool, agent, log)
    rewards = run_reward_set(task, tools, agent, log)
    models: Models = adapter.apply(loaded, cfg)
    place.share_weights(models)
    total_steps = planned_total_steps(cfg, len(train_pool), place.data_shards)
    settings = replace(
        step_settings(cfg, tools),
        rewards=rewards,
        user_tools=bool(cfg.tools or cfg.mcp),  # their tools/* metrics
        tool_servers=tuple(servers),
    )
    updates = total_steps * cfg.ppo_epochs * cfg.num_mini_batches
    optimization = place.optimization(models.policy, optim_config(cfg), updates)
    beta = place.beta_controller(beta_config(cfg))
    episode = episode_config(cfg)
    source = make_source(models, train_pool, tools, episode)
    evaluator: Any = Evaluator(
        eval_pool,
        tools,
        eval_episode_config(episode, cfg.eval_temperature, cfg.eval_max_gen_len),
        cfg.reward,
        samples=cfg.eval_samples,
        seed=cfg.eval_seed,
        generations=cfg.eval_generations,
        rewards=rewards,
    )
    if agent is not None:
        evaluator = agent_evaluator(agent, eval_pool, evaluator, source, cfg)
    return RunParts(
        tools=tools,
        train_pool=train_pool,
        eval_pool=eval_pool,
        rewards=rewards,
        models=models,
        total_steps=total_steps,
        settings=settings,
        optimization=optimization,
        beta=beta,
        episode=episode,
        source=source,
        evaluator=evaluator,
    )


__all__ = ["RunParts", "SourceFactory", "build_run_parts"]
