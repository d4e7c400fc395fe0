"""`agentrl train`: reinforcement learning of tool use.

With no arguments it runs the built-in preset on the CPU: the warm-started tiny model
(trained first as `agentrl sft --compile` would when runs/tiny-sft is missing), generated
tasks, and evaluation on the 200 held-out tasks `agentrl sft` reports on, before and after
RL. Every option is a flag (docs/compat.md lists the compatible ones); ``--config run.toml``
holds any of them. Under ``torchrun`` each process runs its part of the run
(`agentrl.placement`); only rank 0 prints the summary.
"""

from __future__ import annotations

import argparse
from typing import Any

from agentrl.config import add_config_arguments, config_from_args
from agentrl.config.help import common
from agentrl.observability.progress import builtin_reward_in_use


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Train a policy to use tools with RL. Values: preset (default tiny, the built-in "
        "CPU run; 'compat' = the compatible defaults), then --config TOML, then flags."
    )
    parser.epilog = (
        "SIGINT (Ctrl-C) or SIGTERM stops the run after the current step: it saves a "
        "checkpoint (resume with --from_resume 1), then exits 130 (SIGINT) or 143 (SIGTERM); "
        "a second Ctrl-C stops at once, without saving. "
        f"{parser.epilog or ''}"
    )
    add_config_arguments(parser)
    common(
        parser.add_argument(
            "--print_config", action="store_true", help="print the resolved config and exit"
        )
    )


def _pct(metrics: dict[str, float], key: str) -> str:
    value = metrics.get(key)
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _num(metrics: dict[str, float], key: str) -> str:
    value = metrics.get(key)
    return "n/a" if value is None else f"{value:.3f}"


def summary_line(result: Any) -> str:
    """The run's last word: steps, RL time (a warm start it trained apart), before/after."""
    first, last = result.first_eval, result.last_eval
    tasks = int(last.get("eval/tasks", first.get("eval/tasks", 0)))
    status = f"stopped early ({result.stopped})" if result.stopped else "finished"
    warm = result.warm_start_seconds
    spent = f"{(result.wall_seconds - warm) / 60:.1f} min"
    if warm > 0:
        spent += f" (after a {warm / 60:.1f} min warm start with `agentrl sft`)"
    head = f"{status}: {result.steps_done}/{result.total_steps} steps in {spent}; "
    if not builtin_reward_in_use(last or first, "eval/"):  # a task of one's own
        names = [
            k[len("eval/reward_fn/") : -len("/mean")]
            for k in (last or first)
            if k.startswith("eval/reward_fn/") and k.endswith("/mean")
        ]
        parts = [f"held-out reward {_num(first, 'eval/reward')} -> {_num(last, 'eval/reward')}"]
        parts += [
            f"{n} {_num(first, f'eval/reward_fn/{n}/mean')} -> "
            f"{_num(last, f'eval/reward_fn/{n}/mean')}"
            for n in names
        ]
        return head + ", ".join(parts) + f" on {tasks} tasks (greedy)"
    return (
        head + f"held-out exact match "
        f"{_pct(first, 'eval/exact_match')} -> {_pct(last, 'eval/exact_match')} "
        f"on {tasks} tasks (greedy); tool success {_pct(first, 'eval/tool_success_rate')} -> "
        f"{_pct(last, 'eval/tool_success_rate')}"
    )


def run(args: argparse.Namespace) -> int:
    """Train; the exit code is 0, or 130/143 when SIGINT/SIGTERM stopped the run (saved)."""
    config = config_from_args(args)
    if args.print_config:
        print(config.to_toml(), end="")
        return 0
    from agentrl.trainer import run_training

    result = run_training(config)
    if not result.is_main:
        return result.exit_code
    print(summary_line(result))
    if result.run_dir.is_dir():  # a run stopped before it wrote anything left none
        print(f"run directory: {result.run_dir} (metrics.jsonl, config.toml, checkpoints/)")
    if result.report is not None:
        print(f"report: {result.report}")
    if result.policy_export is not None:
        print(
            f"trained policy: {result.policy_export} (agentrl eval --model {result.policy_export})"
        )
    return result.exit_code
