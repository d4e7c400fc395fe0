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

# The options that load a policy as `agentrl eval` and `agentrl serve` do: the model, its
# template and call format, where and how it runs.
POLICY_OPTIONS = (
    "model",
    "tokenizer",
    "chat_template",
    "tool_format",
    "device",
    "dtype",
    "num_threads",
    "seed",
)
# The training options an evaluation reads: the policy, the prompts and tools, the episode
# limits and the eval decoding.
EVAL_OPTIONS = (
    *POLICY_OPTIONS,
    "data_path",
    "data_split",
    "prompt_column",
    "answer_column",
    "tools_column",
    "data_format",
    "possible_answer",
    "call_mode",
    "require_gt",
    "lenient_prompts",
    "filter_mode",
    "inject_answer_instruction",
    "tool_subset",
    "time_mode",
    "augment_calculator_alias",
    "max_turns",
    "max_context_len",
    "rollout_batch_rows",
    "rollout_batch_tokens",
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
            "--benchmark",
            choices=("bfcl",),
            default=None,
            help="score the model on a public benchmark instead of --data: bfcl (BFCL v4's "
            "single-turn categories, scored by bfcl-eval's own checker; --output and "
            "--metrics_output default to runs/bfcl/<model>/)",
        )
    )
    parser.add_argument(
        "--bfcl_limit",
        type=int,
        metavar="N",
        default=None,
        help="with --benchmark bfcl: the first N records of each category only (a quick "
        "check; the output says it is a subset)",
    )
    parser.add_argument(
        "--bfcl_categories",
        metavar="NAMES",
        default="all",
        help="with --benchmark bfcl: the categories scored, comma-separated names and groups "
        "(all, non_live: the four non-live AST ones and irrelevance, live: the live ones); "
        "a summary is printed when all its categories are scored",
    )
    parser.add_argument(
        "--bfcl_venv",
        metavar="DIR",
        default=".venv-bfcl",
        help="with --benchmark bfcl: the virtual environment holding bfcl-eval "
        "(scripts/bfcl_venv.sh makes it)",
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

    if args.benchmark == "bfcl":
        return run_bfcl(args)
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


# What a BFCL evaluation reads unless the command line or a config file says otherwise:
# its prompts run to 6,812 tokens in SmolLM2's template (live_irrelevance; 46 live_multiple
# prompts pass 2,048), its parallel answers to a few hundred, and a category decoded as one
# batch would hold every row's KV cache at once. A pass holds at most 16 rows of the longest
# prompts' size in cache tokens (under 3 GB for SmolLM2), and up to 64 of the short ones.
# The dtype the hardware computes fastest (docs/function-calling.md has the speeds).
BFCL_DEFAULTS = {
    "max_context_len": 8192,
    "eval_max_gen_len": 256,
    "rollout_batch_rows": 64,
    "rollout_batch_tokens": 16 * (7168 + 256),
    "dtype": "auto",
}


def run_bfcl(args: argparse.Namespace) -> int:
    """`agentrl eval --benchmark bfcl`: the per-category table and summaries printed, the
    scores as JSON and every episode written."""
    from agentrl.assembly.bfcl import (
        default_output_dir,
        evaluate_bfcl,
        format_table,
        select_categories,
    )
    from agentrl.assembly.models import model_spec
    from agentrl.config import canonical_names, read_toml
    from agentrl.errors import UsageError
    from agentrl.observability.rollout_dump import write_records
    from agentrl.utils.paths import check_writable_file

    categories = select_categories(args.bfcl_categories)
    given = vars(args)
    if "max_gen_len" in given and "eval_max_gen_len" not in given:  # as eval_config reads it
        given = {**given, "eval_max_gen_len": given["max_gen_len"]}
    try:
        in_file = canonical_names(read_toml(args.config)) if getattr(args, "config", None) else {}
    except ValueError as exc:  # as config_from_args reports a bad file
        raise UsageError(str(exc)) from exc
    defaults = {k: v for k, v in BFCL_DEFAULTS.items() if k not in given and k not in in_file}
    config = eval_config(argparse.Namespace(**given, **defaults))
    if config.data_path:
        raise UsageError("--benchmark bfcl reads BFCL's own records: leave out --data")
    print(
        "bfcl: "
        + ", ".join(f"--{k} {getattr(config, k)}" for k in BFCL_DEFAULTS)
        + " (a command line or --config file sets them)"
    )
    folder = default_output_dir(model_spec(config))
    scores_path = args.metrics_output or str(folder / "bfcl_scores.json")
    episodes_path = args.output or str(folder / "episodes.jsonl.gz")
    for option, path in (("--metrics_output", scores_path), ("--output", episodes_path)):
        check_writable_file(path, option)
    result = evaluate_bfcl(
        config,
        venv=args.bfcl_venv,
        limit=args.bfcl_limit,
        categories=categories,
        show_prompt=args.show_prompt,
    )
    for line in format_table(result, config.max_context_len):
        print(line)
    Path(scores_path).parent.mkdir(parents=True, exist_ok=True)
    settings = {k: getattr(config, k) for k in (*BFCL_DEFAULTS, "tool_format", "dtype")}
    Path(scores_path).write_text(json.dumps({**result.to_json(), "settings": settings}, indent=1))
    print(f"scores: {scores_path}")
    print(f"episodes: {write_records(episodes_path, result.records)} (agentrl view)")
    return 0
