"""`agentrl eval`'s evaluation, from the config: one policy loaded outside a run and scored
on the held-out prompts by `agentrl.training.evaluation` (the one home of held-out
evaluation), so its numbers compare with a run's ``eval/...``; with ``--agent``, the
user's agent plays them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentrl.agents.endpoint import AgentFn
from agentrl.agents.server import EndpointServer, endpoint_capacity
from agentrl.assembly.engines import torch_engine
from agentrl.assembly.models import (
    check_data_files,
    configure_threads,
    ensure_warm_start,
    model_spec,
    run_dtype,
)
from agentrl.assembly.prompts import generated_heldout_samples
from agentrl.assembly.sources import run_agent
from agentrl.assembly.task import build_tools, episode_config, resolve_call_mode
from agentrl.chat import apply_chat_template, template_name, template_traits
from agentrl.config import TrainConfig
from agentrl.data import PromptPool
from agentrl.data.dataset_files import ColumnMap
from agentrl.models import load_configured_policy
from agentrl.models.precision import auto_dtype
from agentrl.tool_formats import tool_format_of
from agentrl.training.agent_source import AgentEvaluator, model_name
from agentrl.training.evaluation import Evaluator, eval_episode_config
from agentrl.training.models import Log


@dataclass(frozen=True)
class PolicyEvaluation:
    """Which policy was scored and its ``eval/...`` metrics."""

    spec: str
    metrics: dict[str, float]
    records: list[dict[str, Any]] = field(default_factory=list)  # one dump record per episode


@dataclass(frozen=True)
class EvalPolicy:
    """A policy loaded for evaluation: its spec, tokenizer, the run's tools and the
    rollout engine that plays it."""

    spec: str
    tokenizer: Any
    tools: Any
    engine: Any


def load_eval_policy(config: TrainConfig, log: Log = print) -> EvalPolicy:
    """Load the configured policy (training the built-in warm start if it is asked for and
    missing) on its rollout engine, with the run's tools."""
    spec, tokenizer, engine = load_policy_engine(config, log)
    return EvalPolicy(spec, tokenizer, build_tools(config), engine)


def load_policy_engine(config: TrainConfig, log: Log = print) -> tuple[str, Any, Any]:
    """(spec, tokenizer, rollout engine) of the configured policy, as `agentrl eval` and
    `agentrl serve` load it (training the built-in warm start if it is asked for and
    missing); the tokenizer carries the chat template and tool format in force."""
    spec = model_spec(config)
    configure_threads(config)
    ensure_warm_start(spec, log)
    device = None if config.device == "auto" else config.device
    if config.dtype == "auto":
        log(auto_dtype(device).describe())
    model, tokenizer = load_configured_policy(spec, run_dtype(config), device, config)
    return spec, tokenizer, torch_engine(config, model, tokenizer, seed=config.seed)


def log_prompt(tokenizer: Any, sample: Any, tools: Any, log: Log) -> None:
    """Log one prompt as the model sees it (template, tools and all), and how its tools and
    calls are laid out."""
    specs = sample.get("tools") or tools.specs()
    text = apply_chat_template(tokenizer, sample["messages"], specs, True, False)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    traits = template_traits(tokenizer) if tokenizer.chat_template else None
    where = traits.describe() if traits else "in the built-in layout (no chat template)"
    log(f"{template_name(tokenizer)}: tools are {where}")
    log(f"tool calls: {tool_format_of(tokenizer).describe()}")
    log(f"---- rendered prompt ({len(ids)} tokens) ----")
    log(text)
    log("---- end of prompt ----")


def evaluate_policy(
    config: TrainConfig, log: Log = print, *, show_prompt: bool = False
) -> PolicyEvaluation:
    """Load the configured policy (training the built-in warm start if it is asked for and
    missing) and score it on the held-out prompts: ``data_path``, or the generated tasks
    `agentrl sft` reports on. Raises a :class:`agentrl.errors.UserError` (a
    ``ModelLoadError``, a ``PromptPoolError``) for a policy or prompts that cannot be used;
    a missing prompt file is found before the policy loads. ``show_prompt``
    logs the first scored prompt as the model sees it (template, tools and all).
    """
    check_data_files(config)
    policy = load_eval_policy(config, log)
    spec, tokenizer, tools, engine = policy.spec, policy.tokenizer, policy.tools, policy.engine
    if config.data_path:
        pool = PromptPool(
            config.data_path,
            require_gt=bool(config.require_gt),
            filter_mode=config.filter_mode,
            allowed_tools=tools.supported_names(),
            inject_answer_instruction=bool(config.inject_answer_instruction),
            default_tools=tools.specs(),
            lenient=bool(config.lenient_prompts),
            split=config.data_split,
            columns=ColumnMap(config.prompt_column, config.answer_column, config.tools_column),
            data_format=config.data_format,
            possible_answer=config.possible_answer,
        )
    else:
        pool = PromptPool.from_samples(generated_heldout_samples(config.eval_samples))
    config = resolve_call_mode(config, pool, config.agent or None, log)
    evaluator = Evaluator(
        pool,
        tools,
        eval_episode_config(
            episode_config(config), config.eval_temperature, config.eval_max_gen_len
        ),
        config.reward,
        samples=config.eval_samples or len(pool),
        seed=config.eval_seed,
        generations=config.eval_generations,
    )
    if show_prompt and evaluator.indices:
        log_prompt(tokenizer, pool[evaluator.indices[0]], tools, log)
    if config.agent:  # the user's agent plays the prompts (`agentrl.agents`)
        metrics, records = evaluate_agent(config, spec, pool, evaluator, engine)
        return PolicyEvaluation(spec, metrics, records)
    metrics = evaluator.run(engine)
    return PolicyEvaluation(spec, metrics, evaluator.records(step=0))


def agent_evaluator(
    agent: AgentFn, pool: Any, evaluator: Any, source: Any, config: Any
) -> AgentEvaluator:
    """The evaluation of an agent run, with the built-in evaluator's prompts and decoding,
    served by the training source's endpoint."""
    server = getattr(source, "server", None)
    if server is None:
        raise ValueError(f"--agent needs the agent's rollout source, not {type(source).__name__}")
    return AgentEvaluator(
        agent,
        pool,
        evaluator.episode,
        samples=config.eval_samples,
        seed=config.eval_seed,
        generations=config.eval_generations,
        timeout=config.agent_timeout,
        server=server,
    )


def evaluate_agent(
    config: Any, spec: str, pool: Any, evaluator: Any, engine: Any
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """`agentrl eval --agent`: the held-out prompts played by the agent; (metrics, dump
    records), with the built-in evaluator's prompts and decoding."""
    agent = run_agent(config.agent, None)
    assert agent is not None
    episodes = len(evaluator.indices) * max(1, config.eval_generations)
    with EndpointServer(model_name(spec), capacity=endpoint_capacity(episodes)) as server:
        agents = AgentEvaluator(
            agent,
            pool,
            evaluator.episode,
            samples=len(evaluator.indices),
            seed=config.eval_seed,
            generations=config.eval_generations,
            timeout=config.agent_timeout,
            server=server,
        )
        agents.indices = list(evaluator.indices)
        return agents.run(engine), agents.records(step=0)


__all__ = [
    "EvalPolicy",
    "PolicyEvaluation",
    "agent_evaluator",
    "evaluate_agent",
    "evaluate_policy",
    "load_eval_policy",
    "load_policy_engine",
    "log_prompt",
]
