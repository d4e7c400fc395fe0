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
    GT_REWARDS,
    TaskParts,
    load_environment,
    load_tools,
    reward_plan,
    rewards_read_gt,
    task_parts,
    task_tools,
    tool_items,
)
from agentrl.envs.python_env import PythonEnvironment, python_environment

__all__ = [
    "GT_REWARDS",
    "EnvironmentContractError",
    "EnvironmentFactory",
    "EnvironmentTools",
    "OpenEpisode",
    "PythonEnvironment",
    "TaskParts",
    "close_environment",
    "environment_tools",
    "load_environment",
    "load_tools",
    "observation_text",
    "python_environment",
    "reward_plan",
    "rewards_read_gt",
    "task_parts",
    "task_tools",
    "tool_items",
]
