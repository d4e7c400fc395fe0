"""A user's own task: tools, reward functions and per-episode environments for training."""

from agentrl.envs.environment import (
    EnvironmentContractError,
    EnvironmentFactory,
    EnvironmentTools,
    OpenEpisode,
    close_environment,
    environment_tools,
    observation_text,
)
from agentrl.envs.parts import (
    TaskParts,
    load_environment,
    load_tools,
    reward_plan,
    task_parts,
    task_tools,
    tool_items,
)

__all__ = [
    "EnvironmentContractError",
    "EnvironmentFactory",
    "EnvironmentTools",
    "OpenEpisode",
    "TaskParts",
    "close_environment",
    "environment_tools",
    "load_environment",
    "load_tools",
    "observation_text",
    "reward_plan",
    "task_parts",
    "task_tools",
    "tool_items",
]
