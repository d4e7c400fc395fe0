"""A user's task: their tools, reward functions and episode environment, in one place.

The trainer takes these as Python objects (``Trainer(config, tools=..., reward_funcs=...,
environment=...)``) or, on the command line and in TOML, as ``pkg.module:attribute``
import paths; :func:`task_parts` merges both, and :func:`task_tools` builds the tool
registry episodes run with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentrl.data.options import DataConfig
from agentrl.data.reasoning_gym import is_reasoning_gym
from agentrl.envs.environment import EnvironmentFactory, EnvironmentTools
from agentrl.envs.openenv import is_openenv, openenv_environment
from agentrl.envs.python_env import python_environment
from agentrl.errors import UsageError
from agentrl.rewards.functions import BUILTIN_REWARDS
from agentrl.rewards.judge import JUDGE, JudgeReward, judge_settings
from agentrl.rewards.reasoning_gym import NAME as REASONING_GYM
from agentrl.tools import Tool, ToolRegistry
from agentrl.tools.python_sandbox import PYTHON_TOOL, checked_limits, python_tool
from agentrl.utils.imports import load_object, split_list
from agentrl.utils.options import part


@dataclass
class TaskParts:
    """What a user brings. Empty parts mean the built-in arithmetic task's."""

    tools: list[Any] = field(default_factory=list)  # Tools, functions, ToolRegistry objects
    reward_funcs: list[Any] = field(default_factory=list)  # names, import paths, callables
    reward_weights: list[float] | None = None
    environment: EnvironmentFactory | None = None

    @property
    def empty(self) -> bool:
        return not (self.tools or self.reward_funcs or self.environment is not None)


def tool_items(value: Any) -> list[Any]:
    """Tools from one object: a Tool or function, a ToolRegistry, or a list of those."""
    if isinstance(value, ToolRegistry):
        return [value.get(name) for name in value]
    if isinstance(value, list | tuple):
        return [item for one in value for item in tool_items(one)]
    if isinstance(value, Tool) or callable(value):
        return [value]
    raise TypeError(f"{value!r} is neither a tool, a function, a ToolRegistry nor a list")


def load_tools(paths: str | Iterable[str]) -> list[Any]:
    """The tools named by ``pkg.module:attribute`` paths (comma-separated when a string)."""
    items = split_list(paths) if isinstance(paths, str) else list(paths)
    out: list[Any] = []
    for path in items:
        try:
            out.extend(tool_items(load_object(path)))
        except TypeError as exc:
            raise ValueError(f"--tools {path!r}: {exc}") from None
    return out


def load_environment(path: str) -> EnvironmentFactory:
    """The environment factory at ``pkg.module:Factory``, or of an environment of another
    standard: ``openenv:URL`` or ``openenv:pkg.module:Environment`` (`agentrl.envs.openenv`)."""
    if is_openenv(path):
        return openenv_environment(path)
    factory = load_object(path)
    if not callable(factory):
        raise ValueError(f"--environment {path!r}: {factory!r} is not callable")
    return factory


def task_parts(
    *,
    config_tools: str = "",
    config_reward_funcs: str = "",
    config_reward_weights: str = "",
    config_environment: str = "",
    tools: Sequence[Any] | Any = (),
    reward_funcs: Sequence[Any] | None = None,
    reward_weights: Sequence[float] | None = None,
    environment: EnvironmentFactory | None = None,
    options: Any = None,
) -> TaskParts:
    """The run's parts from the configuration's import paths and the Python arguments.

    Tools from both are used together. Reward functions, their weights and the
    environment come from one side only: both given is an error. With prompts of a
    reasoning-gym generator (``--data reasoning_gym:NAME``) and no reward functions given,
    the reward is the generator's own scorer (``reasoning_gym``). ``options`` (the run's
    config) configures the built-in ``python`` tool and ``judge`` reward when named.
    """
    if reward_funcs and config_reward_funcs:
        raise ValueError("reward functions given both in the config and as arguments")
    if reward_weights is not None and config_reward_weights:
        raise ValueError("reward weights given both in the config and as arguments")
    if environment is not None and config_environment:
        raise ValueError("an environment given both in the config and as an argument")
    parts = TaskParts()
    paths = split_list(config_tools)
    python = PYTHON_TOOL in paths
    paths = [p for p in paths if p != PYTHON_TOOL]
    parts.tools = load_tools(paths) + tool_items(list(tools) if tools else [])
    parts.reward_funcs = list(reward_funcs) if reward_funcs else split_list(config_reward_funcs)
    section = part(DataConfig, options)  # the data options, their defaults if unset
    if not parts.reward_funcs and is_reasoning_gym(section.data_path):
        parts.reward_funcs = [REASONING_GYM]  # a reasoning-gym generator's own scorer
    if JUDGE in parts.reward_funcs:
        parts.reward_funcs = [
            JudgeReward(judge_settings(options)) if f == JUDGE else f for f in parts.reward_funcs
        ]
    if reward_weights is not None:
        parts.reward_weights = [float(w) for w in reward_weights]
    elif config_reward_weights:
        from agentrl.rewards import reward_weights as parse_weights

        parts.reward_weights = parse_weights(config_reward_weights)
    parts.environment = environment
    if config_environment:
        parts.environment = load_environment(config_environment)
    if python:
        limits = checked_limits(section)
        if section.python_keep_state:
            parts.environment = python_environment(limits, parts.environment)
        else:
            parts.tools.append(python_tool(limits))
    return parts


def _origin(item: Any) -> str:
    """Where a tool comes from, for messages: ``module.function`` (an MCP server's tools
    say which server in their own name)."""
    fn = item.fn if isinstance(item, Tool) else item
    fn = getattr(fn, "__func__", fn)
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    module = getattr(fn, "__module__", None)
    return f"{module}.{name}" if module else name


def task_tools(
    base: ToolRegistry, parts: TaskParts, log: Callable[[str], None] = print
) -> ToolRegistry:
    """``base`` (the built-in tools) with the user's tools and environment added.

    A user (or MCP) tool named like a built-in replaces the built-in for this run, and
    ``log`` says so; two of the user's tools with one name are a :class:`UsageError`
    naming both.
    """
    if not parts.tools and parts.environment is None:
        return base
    registry = base.copy()
    given: dict[str, Any] = {}
    for item in parts.tools:
        try:
            made = ToolRegistry().register(item)
        except TypeError as exc:  # a signature no JSON object of arguments can call
            raise ValueError(str(exc)) from None
        if made.name in given:
            raise UsageError(
                f"two tools are named {made.name!r}: {_origin(given[made.name])} and "
                f"{_origin(item)}; rename one (tool names must be unique)"
            )
        if made.name in registry:
            log(f"tool {made.name!r}: {_origin(item)} replaces the built-in one for this run")
        given[made.name] = item
        registry.register(made, replace=True)
    if parts.environment is not None:
        return EnvironmentTools(registry, parts.environment)
    return registry


def reward_plan(
    parts: TaskParts, has_environment_reward: bool
) -> tuple[list[Any], list[float] | None, str]:
    """(reward functions, weights, a sentence for the log) of a run.

    No reward functions given: the environment's reward when it has one, else the
    built-in ``tool_use``. An environment reward beside given functions joins them as
    ``environment`` (weight 1.0 unless the weights name it) unless they list it already.
    """
    functions: list[Any] = list(parts.reward_funcs)
    weights = None if parts.reward_weights is None else list(parts.reward_weights)
    if not functions:
        functions = ["environment"] if has_environment_reward else ["tool_use"]
    elif has_environment_reward and "environment" not in functions:
        functions.append("environment")
        if weights is not None and len(weights) == len(functions) - 1:
            weights.append(1.0)
    names = [f if isinstance(f, str) else getattr(f, "__name__", repr(f)) for f in functions]
    shown = ", ".join(
        f"{n} x {w:g}" for n, w in zip(names, weights or [1.0] * len(names), strict=False)
    )
    return functions, weights, f"reward: {shown}"


# The built-in rewards that score against the ground truth (a prompt without it has
# nothing for them to score).
GT_REWARDS = ("tool_use", "math_tool")


def rewards_read_gt(parts: TaskParts, has_environment_reward: bool) -> bool:
    """Whether the run's reward (:func:`reward_plan`) includes a built-in that needs the
    prompts' ground truth; the user's own functions and an environment's reward decide
    for themselves (they return None where they do not apply)."""
    functions, _, _ = reward_plan(parts, has_environment_reward)
    needing = [BUILTIN_REWARDS[name] for name in GT_REWARDS]
    return any(f in GT_REWARDS or any(f is n for n in needing) for f in functions)


__all__ = [
    "GT_REWARDS",
    "TaskParts",
    "load_environment",
    "load_tools",
    "reward_plan",
    "rewards_read_gt",
    "task_parts",
    "task_tools",
    "tool_items",
]
