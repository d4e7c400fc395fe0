"""`agentrl eval`: the trainer's held-out evaluation, on its own.

``agentrl eval --model SPEC --data prompts.jsonl`` plays every scored prompt with the
trainer's eval decoding (greedy unless ``--eval_temperature``) through the tool loop and
prints the eval metrics (exact match, answer coverage, tool success, ...); ``--output FILE``
also writes every episode as a rollout dump record (`agentrl view FILE` shows them). Without
``--data`` it scores the built-in 200 held-out tasks; without ``--model`` the built-in warm
start. It takes the options that shape an evaluation; a ``--config`` TOML may hold any
training option (one file can describe both). The work is
:func:`agentrl.training.evaluation.evaluate_policy`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from agentrl.config import add_config_arguments, config_from_args
from agentrl.config.help import common

# The training options an evaluation reads: the policy, the prompts and tools, the episode
# limits and the eval decoding.
EVAL_OPTIONS = (
    "model",
    "tokenizer",
    "chat_template",
    "tool_format",
    "device",
    "dtype",
    "num_threads",
    "seed",
    "data_path",
    "data_split",
    "prompt_column",
    "answer_column",
    "tools_column",
    "require_gt",
    "filter_mode",
    "inject_answer_instruction",
    "tool_subset",
    "time_mode",
    "augment_calculator_alias",
    "max_turns",
    "max_context_len",
    "max_gen_len",
    "top_p",
    "top_k",
    "repetition_penalty",
    "eval_samples",
    "eval_seed",
    "eval_temperature",
    "eval_generations",
    "eval_max_gen_len",
    "agent",
    "agent_timeout",
)


def eval_config(args: argparse.Namespace) -> Any:
    """The run config of an evaluation: ``--max_gen_len`` (the tokens of a turn, as in
    `agentrl train` and `agentrl sft`) sets the eval turns' length unless
    ``--eval_max_gen_len`` is given too."""
    if "max_gen_len" in vars(args) and "eval_max_gen_len" not in vars(args):
        args = argparse.Namespace(**{**vars(args), "eval_max_gen_len": args.max_gen_len})
    return config_from_args(args)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Evaluate a policy on held-out prompts (full tool loop)."
    add_config_arguments(parser, EVAL_OPTIONS)
    common(
        parser.add_argument(
            "--output",
            default=None,
            help="write one record per evaluated episode here (JSON lines, gzip when the name "
            "ends in .gz; the rollout dump record, for agentrl view)",
        )
    )
    common(
        parser.add_argument("--metrics_output", default=None, help="write the metrics as JSON here")
    )
    common(
        parser.add_argument(
            "--show_prompt",
            action="store_true",
            help="print the first prompt as rendered for the model (chat template and tools)",
        )
    )


def run(args: argparse.Namespace) -> int:
    from agentrl.assembly.evaluation import evaluate_policy
    from agentrl.utils.paths import check_writable_file

    config = eval_config(args)
    for option, path in (("--output", args.output), ("--metrics_output", args.metrics_output)):
        if path:  # found now, not after the evaluation
            check_writable_file(path, option)
    result = evaluate_policy(config, show_prompt=args.show_prompt)
    metrics = result.metrics
    for key in sorted(k for k in metrics if k.startswith("eval/")):
        print(f"{key:32s} {metrics[key]:.4f}")
    if config.agent:  # the agent's own reward, not the built-in task's exact match
        print(
            f"model {result.spec} with agent {config.agent}: reward "
            f"{metrics.get('eval/reward', float('nan')):.4f} on {int(metrics['eval/tasks'])} "
            f"prompts ({int(metrics['eval/dropped'])} episodes dropped)"
        )
    else:
        k = int(metrics.get("eval/generations", 1))
        pass_at_k = 100 * metrics.get("eval/pass_at_k", 0.0)
        sampled = f" x {k} episodes, pass@{k} {pass_at_k:.1f}%" if k > 1 else ""
        print(
            f"model {result.spec}: exact match {100 * metrics.get('eval/exact_match', 0):.1f}%"
            f" on {int(metrics.get('eval/tasks', 0))} prompts{sampled}"
        )
    if args.metrics_output:
        Path(args.metrics_output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.metrics_output).write_text(json.dumps(metrics, indent=1, sort_keys=True))
    if args.output:
        from agentrl.observability.rollout_dump import write_records

        print(f"episodes: {write_records(args.output, result.records)} (agentrl view)")
    return 0
