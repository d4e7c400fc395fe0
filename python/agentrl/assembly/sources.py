"""The run's rollout source, from its config: rollout in this process (inline or in
background threads), or the user's agent playing the episodes (``--agent``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentrl.agents.endpoint import AgentFn, load_agent
from agentrl.assembly.models import model_spec
from agentrl.config import TrainConfig
from agentrl.rollout import AsyncRollout, EpisodeConfig, PolicyVersion
from agentrl.tools import ToolRegistry
from agentrl.training.agent_source import AgentSource, describe, model_name
from agentrl.training.sources import BackgroundSource, GroupSource, InlineSource


def group_shape(config: Any, seed: int) -> dict[str, Any]:
    """The keywords every rollout source takes from the run: episodes per group, groups
    per step, and the seed its prompts and sampling follow."""
    return {
        "num_generations": config.num_generations,
        "batch_size": config.batch_size,
        "seed": seed,
    }


def local_source(
    engine: Any,
    prompts: Sequence[Any],
    tools: ToolRegistry,
    episode: EpisodeConfig,
    config: TrainConfig,
    *,
    seed: int,
) -> GroupSource:
    """Rollout in this process: inline when ``async_workers`` is 0, else background threads."""
    version = PolicyVersion(0)
    if config.async_workers == 0:
        return InlineSource(
            engine, prompts, tools, episode, version=version, **group_shape(config, seed)
        )
    rollout = AsyncRollout(
        engine,
        prompts,
        tools,
        version=version,
        config=episode,
        max_version_gap=config.effective_max_version_gap,
        max_queue_groups=config.effective_max_queue_groups,
        num_workers=config.async_workers,
        **group_shape(config, seed),
    )
    return BackgroundSource(rollout, config.fetch_timeout_sec)


def run_agent(config_agent: str, agent: AgentFn | str | None) -> AgentFn | None:
    """The run's agent: ``Trainer(agent=...)`` or ``--agent`` (not both), loaded."""
    if agent is not None and config_agent:
        raise ValueError("an agent given both in the config (--agent) and as an argument")
    chosen = agent if agent is not None else (config_agent or None)
    return None if chosen is None else load_agent(chosen)


def agent_source(
    agent: AgentFn,
    engine: Any,
    prompts: Sequence[Any],
    episode: EpisodeConfig,
    config: Any,
    *,
    seed: int,
    log: Callable[[str], None] = print,
) -> AgentSource:
    """The rollout source of an agent run (its episodes run in the trainer's loop)."""
    if config.async_workers > 0:
        log(
            f"--agent: the agent's episodes run in the trainer loop, all of a step at once; "
            f"async_workers={config.async_workers} starts no rollout threads"
        )
    log(describe(agent, config.agent_timeout))
    return AgentSource(
        agent,
        engine,
        prompts,
        episode,
        timeout=config.agent_timeout,
        refill_rounds=config.dynamic_sampling_rounds,
        model=model_name(model_spec(config)),
        **group_shape(config, seed),
    )


__all__ = ["agent_source", "group_shape", "local_source", "run_agent"]
