"""The run's task from its config: the tools (built-in, the user's, MCP servers'), the
user's reward functions and environment, and the episode limits and sampling of rollouts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from agentrl.config import TrainConfig
from agentrl.envs import EnvironmentTools, TaskParts, reward_plan, task_parts, task_tools
from agentrl.errors import UsageError
from agentrl.rollout import EpisodeConfig, SamplingParams
from agentrl.tools import ToolRegistry, builtin_registry
from agentrl.tools.mcp import MCPServer, mcp_tools
from agentrl.training.agent_source import agent_reward_plan
from agentrl.training.models import Log
from agentrl.training.scoring import reward_set
from agentrl.utils.imports import split_list

# Where an answer ends: ``stop_at_answer_end`` ends a turn there.
ANSWER_END = "</answer>"


def episode_config(config: TrainConfig) -> EpisodeConfig:
    """Episode limits and sampling of training rollouts."""
    sampling = SamplingParams(
        temperature=config.temperature,
        top_k=config.top_k,
        top_p=config.top_p,
        min_p=config.min_p,
        repetition_penalty=config.repetition_penalty,
        max_new_tokens=config.max_gen_len,
        stop=(ANSWER_END,) if config.stop_at_answer_end else (),
        logprob_temperature=config.logprob_divisor,
    )
    return EpisodeConfig(
        max_turns=config.max_turns,
        max_new_tokens=config.max_gen_len,
        max_context_len=config.max_context_len,
        thinking_ratio=config.thinking_ratio,
        sampling=sampling,
        tool_workers=config.tool_workers,
        call_parser=config.call_parser,  # type: ignore[arg-type]
        keep_eos=config.keep_eos,
        # "auto" left unresolved (no data seen, `resolve_call_mode`): calls run, as always.
        call_mode="execute" if config.call_mode == "auto" else config.call_mode,  # type: ignore[arg-type]
        # A generation budget per episode, as the GRPO reference's completion length.
        max_response_tokens=config.max_completion_length,
    )


def resolve_call_mode(config: TrainConfig, pool: Any, agent: Any, log: Log) -> TrainConfig:
    """The config with ``call_mode`` decided against the training prompts, and said in the
    log: ``auto`` is ``answer`` when the prompts are function-calling records (their
    functions have no implementation), else ``execute``. With an ``--agent``, the agent
    decides what the policy's calls do: ``answer`` is refused there."""
    formats = dict(getattr(pool, "data_formats", {}) or {})
    seen = ", ".join(f"{count} {name}" for name, count in sorted(formats.items()))
    if agent is not None:
        if config.call_mode == "answer":
            raise UsageError(
                "--call_mode answer is for the built-in episode loop: with --agent, your "
                "agent gets the policy's tool calls and decides what they do (end the "
                "episode after the first reply to make them the answer)"
            )
        if formats:
            log(f"function-calling data ({seen}) with --agent: the agent decides what calls do")
        return config
    if config.call_mode != "auto":
        if formats:
            log(f"call mode: {config.call_mode} (--call_mode) on function-calling data ({seen})")
        return config
    if not formats:
        return replace(config, call_mode="execute")
    log(
        f"call mode: answer, the data being function-calling records ({seen}): the first "
        "turn's calls are the answer, recorded and not run (--call_mode execute runs them)"
    )
    return replace(config, call_mode="answer")


def config_parts(config: TrainConfig, **given: Any) -> TaskParts:
    """The user's tools, reward functions and environment named in the config, with those
    ``given`` from Python (`task_parts`'s ``tools``, ``reward_funcs``, ``reward_weights``
    and ``environment``, as `agentrl.Trainer` takes them)."""
    return task_parts(
        config_tools=config.tools,
        config_reward_funcs=config.reward_funcs,
        config_reward_weights=config.reward_weights,
        config_environment=config.environment,
        options=config,
        **given,
    )


def start_mcp_servers(config: TrainConfig, log: Log = print) -> list[MCPServer]:
    """The MCP servers ``--mcp`` names, started (their stderr in the run directory)."""
    if not config.mcp:
        return []
    _, servers = mcp_tools(
        split_list(config.mcp, ";"),
        timeout=ToolRegistry().timeout,
        log_dir=config.run_dir,
        log=log,
        max_restarts=config.mcp_max_restarts,
    )
    return servers


def build_tools(
    config: TrainConfig,
    parts: TaskParts | None = None,
    log: Log = print,
    servers: Sequence[MCPServer] | None = None,
) -> ToolRegistry:
    """The built-in tools (active subset, time mode, alias switch), plus the user's.

    ``parts`` defaults to the ones the config names. With user tools or an environment,
    the built-ins are still accepted where a prompt lists them, but prompts that list no
    tools are offered the user's only. ``servers``: the run's MCP servers, already started
    (None: started here when ``--mcp`` names any).
    """
    names = [n.strip() for n in config.tool_subset.split(",") if n.strip()]
    builtin = builtin_registry(
        config.time_mode, names or None, bool(config.augment_calculator_alias)
    )
    parts = parts if parts is not None else config_parts(config)
    if servers is None:
        servers = start_mcp_servers(config, log)
    if servers:
        served = [tool for server in servers for tool in server.tools]
        parts = replace(parts, tools=[*parts.tools, *served])
    if parts.tools or parts.environment is not None:
        for name in builtin.supported_names():
            builtin.set_visibility(name, "hidden")
    return task_tools(builtin, parts, log)


def run_reward_set(task: TaskParts, tools: ToolRegistry, agent: Any, log: Log) -> Any:
    """The run's weighted reward functions (None: the built-in tool-use reward alone)."""
    if agent is not None:
        functions, weights, line = agent_reward_plan(task.reward_funcs, task.reward_weights)
        log(line)
        return reward_set(functions, weights)
    if task.empty:
        return None
    env_reward = isinstance(tools, EnvironmentTools) and tools.has_reward
    functions, weights, line = reward_plan(task, env_reward)
    log(line)
    return reward_set(functions, weights)
