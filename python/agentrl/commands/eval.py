"""`agentrl eval`: the trainer's held-out evaluation, on its own.

``agentrl eval --model SPEC --data prompts.jsonl`` plays every scored prompt once with
greedy decoding through the tool loop and prints the seed's eval metrics (exact match,
answer coverage, tool success, ...). Without ``--data`` it scores the built-in 200
held-out tasks; without ``--model`` the built-in warm start. Other trainer flags that
shape an episode (``--max_turns``, ``--eval_max_gen_len``, ``--eval_samples``,
``--tool_subset``, ...) apply as in training.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agentrl.config import add_config_arguments, config_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Evaluate a policy on held-out prompts (greedy, full tool loop)."
    add_config_arguments(parser)
    parser.add_argument("--output", default=None, help="also write the metrics as JSON here")


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except ValueError as exc:
        print(f"agentrl eval: {exc}", file=sys.stderr)
        return 2
    from agentrl.data import PromptPool
    from agentrl.models import load_policy
    from agentrl.models.errors import ModelLoadError
    from agentrl.rollout.engine import TorchEngine
    from agentrl.training.evaluation import Evaluator, eval_episode_config
    from agentrl.training.setup import (
        autocast_factory,
        build_tools,
        configure_threads,
        ensure_warm_start,
        episode_config,
        generated_heldout_samples,
        model_spec,
    )

    spec = model_spec(config)
    configure_threads(config)
    try:
        ensure_warm_start(spec, print)
        device = None if config.device == "auto" else config.device
        model, tokenizer = load_policy(spec, "float32", device, tokenizer=config.tokenizer or None)
        tools = build_tools(config)
        if config.data_path:
            pool = PromptPool(
                config.data_path,
                require_gt=bool(config.require_gt),
                filter_mode=config.filter_mode,
                allowed_tools=tools.supported_names(),
                inject_answer_instruction=bool(config.inject_answer_instruction),
                default_tools=tools.specs(),
            )
        else:
            pool = PromptPool.from_samples(generated_heldout_samples(config.eval_samples))
    except (ModelLoadError, ValueError, FileNotFoundError) as exc:
        print(f"agentrl eval: {exc}", file=sys.stderr)
        return 2
    episode = episode_config(config)
    evaluator = Evaluator(
        pool,
        tools,
        eval_episode_config(episode, config.eval_temperature, config.eval_max_gen_len),
        config.reward,
        samples=config.eval_samples or len(pool),
        seed=config.eval_seed,
        generations=config.eval_generations,
    )
    engine = TorchEngine(model, tokenizer, autocast=autocast_factory(
        next(model.parameters()).device, config.dtype), seed=config.seed)  # fmt: skip
    metrics = evaluator.run(engine)
    for key in sorted(k for k in metrics if k.startswith("eval/")):
        print(f"{key:32s} {metrics[key]:.4f}")
    k = config.eval_generations
    sampled = f" x {k} episodes, pass@{k} {100 * metrics['eval/pass_at_k']:.1f}%" if k > 1 else ""
    print(
        f"model {spec}: exact match {100 * metrics.get('eval/exact_match', 0):.1f}%"
        f" on {int(metrics.get('eval/tasks', 0))} prompts{sampled}"
    )
    if args.output:
        Path(args.output).write_text(json.dumps(metrics, indent=1, sort_keys=True))
    return 0
