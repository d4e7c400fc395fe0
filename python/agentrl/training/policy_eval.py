"""The trainer's held-out evaluation of one policy, outside a training run.

`agentrl eval` is this function plus printing: the same prompts, episode limits, tools and
reward details as the evaluations inside `agentrl train`, so its numbers are comparable
with a run's ``eval/...`` metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentrl.config import TrainConfig
from agentrl.training.setup import Log


@dataclass(frozen=True)
class PolicyEvaluation:
    """Which policy was scored and its ``eval/...`` metrics."""

    spec: str
    metrics: dict[str, float]
    records: list[dict[str, Any]] = field(default_factory=list)  # one dump record per episode


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
    from agentrl.chat import apply_chat_template, template_name, template_traits
    from agentrl.data import PromptPool
    from agentrl.data.dataset_files import ColumnMap
    from agentrl.models import load_policy
    from agentrl.rollout.engine import TorchEngine
    from agentrl.tool_formats import tool_format_of
    from agentrl.training.evaluation import Evaluator, eval_episode_config
    from agentrl.training.setup import (
        autocast_factory,
        build_tools,
        check_data_files,
        configure_threads,
        ensure_warm_start,
        episode_config,
        generated_heldout_samples,
        model_spec,
    )

    check_data_files(config)
    spec = model_spec(config)
    configure_threads(config)
    ensure_warm_start(spec, log)
    device = None if config.device == "auto" else config.device
    model, tokenizer = load_policy(
        spec, config.dtype, device, tokenizer=config.tokenizer or None,
        chat_template=config.chat_template,
        tool_format=config.tool_format,
    )  # fmt: skip
    tools = build_tools(config)
    if config.data_path:
        pool = PromptPool(
            config.data_path,
            require_gt=bool(config.require_gt),
            filter_mode=config.filter_mode,
            allowed_tools=tools.supported_names(),
            inject_answer_instruction=bool(config.inject_answer_instruction),
            default_tools=tools.specs(),
            split=config.data_split,
            columns=ColumnMap(config.prompt_column, config.answer_column, config.tools_column),
        )
    else:
        pool = PromptPool.from_samples(generated_heldout_samples(config.eval_samples))
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
        sample = pool[evaluator.indices[0]]
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
    autocast = autocast_factory(next(model.parameters()).device, config.dtype)
    engine = TorchEngine(model, tokenizer, autocast=autocast, seed=config.seed)
    if config.agent:  # the user's agent plays the prompts (`agentrl.agents`)
        from agentrl.agents.source import evaluate_agent

        metrics, records = evaluate_agent(config, spec, pool, evaluator, engine)
        return PolicyEvaluation(spec, metrics, records)
    metrics = evaluator.run(engine)
    return PolicyEvaluation(spec, metrics, evaluator.records(step=0))


__all__ = ["PolicyEvaluation", "evaluate_policy"]
