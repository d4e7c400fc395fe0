"""`agentrl gen-data`: write synthetic tasks (prompt pool) or demonstrations (SFT): the built-in
tool-use tasks, or function-calling tasks (``--task function_calling``)."""

from __future__ import annotations

import argparse
import time

from agentrl.data.arith import ExprConfig
from agentrl.data.function_tasks import (
    CALL_KINDS,
    DEFAULT_CALL_MIX,
    CallTaskGenerator,
    write_call_tasks,
)
from agentrl.data.synthetic import (
    MIX_HELP,
    SHORTCUT_SCOPE_HELP,
    SHORTCUT_SCOPES,
    TaskConfig,
    format_mix,
    parse_mix,
)
from agentrl.errors import UsageError
from agentrl.sft.tasks import DEFAULT_SHORTCUT_RATE, shortcut_settings
from agentrl.utils.paths import check_writable_file

DEFAULT_TASKS_PATH = "runs/data/tasks.jsonl"
DEFAULT_DEMOS_PATH = "runs/data/demos.jsonl"
DEFAULT_CALLS_PATH = "runs/data/function_calls.jsonl"
DEFAULT_CALL_DEMOS_PATH = "runs/data/function_call_demos.jsonl"
TASKS = ("tool_use", "function_calling")
# The options that shape the tool-use tasks only.
_TOOL_USE_ONLY = (
    "min_exprs",
    "max_exprs",
    "digits",
    "min_ops",
    "max_ops",
    "operators",
    "functions",
    "paren_prob",
    "func_prob",
    "decimal_prob",
    "fullwidth_ratio",
    "shortcut_rate",
    "shortcut_scope",
)


# The generator's defaults: the flags' defaults are its configs' own.
_TASK = TaskConfig()
_EXPR = ExprConfig()


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--task",
        choices=TASKS,
        default="tool_use",
        help="tool_use: the built-in arithmetic, unit and time tasks; function_calling: "
        "requests, functions and the calls (or no call) that answer them, in OpenAI form "
        "(docs/function-calling.md)",
    )
    parser.add_argument("-n", "--num", type=int, default=2000, help="number of tasks")
    parser.add_argument(
        "-o",
        "--output",
        default=None,
        help=f"output JSONL (default {DEFAULT_TASKS_PATH}, or {DEFAULT_DEMOS_PATH} with --sft)",
    )
    parser.add_argument("--seed", type=int, default=0, help="stream seed (default 0)")
    parser.add_argument(
        "--start", type=int, default=0, help="index of the first task in the stream"
    )
    parser.add_argument(
        "--sft",
        action="store_true",
        help="write full demonstrations (conversations with tool calls, results and answer)",
    )
    parser.add_argument(
        "--shortcut_rate",
        type=float,
        default=None,
        help="with --sft: share of the expressions simple enough to do in one's head that "
        f"the demonstrations answer without calling the tool (default {DEFAULT_SHORTCUT_RATE}, "
        "as the built-in warm start; 0: perfect demonstrations)",
    )
    parser.add_argument(
        "--shortcut_scope",
        choices=SHORTCUT_SCOPES,
        default=None,
        help="with --sft: " + SHORTCUT_SCOPE_HELP,
    )
    parser.add_argument(
        "--min_exprs", type=int, default=_TASK.min_exprs, help="expressions per math task"
    )
    parser.add_argument(
        "--max_exprs", type=int, default=_TASK.max_exprs, help="expressions per math task"
    )
    parser.add_argument(
        "--digits", type=int, default=_EXPR.max_digits, help="largest operand digit count"
    )
    parser.add_argument(
        "--min_ops", type=int, default=_EXPR.min_ops, help="operators per expression"
    )
    parser.add_argument(
        "--max_ops", type=int, default=_EXPR.max_ops, help="operators per expression"
    )
    parser.add_argument(
        "--operators",
        default=",".join(_EXPR.operators),
        help="comma-separated binary operators",
    )
    parser.add_argument(
        "--functions",
        default=",".join(_EXPR.functions),
        help="comma-separated functions (sqrt abs round log exp sin cos tan), '' for none",
    )
    parser.add_argument("--paren_prob", type=float, default=_EXPR.paren_prob)
    parser.add_argument("--func_prob", type=float, default=_EXPR.func_prob)
    parser.add_argument("--decimal_prob", type=float, default=_EXPR.decimal_prob)
    parser.add_argument(
        "--mix",
        default="",
        help=f"{MIX_HELP}; with --task function_calling, over {', '.join(CALL_KINDS)}, "
        f"default {format_mix(DEFAULT_CALL_MIX)}",
    )
    parser.add_argument(
        "--zh_ratio", type=float, default=_TASK.zh_ratio, help="share of Chinese tasks"
    )
    parser.add_argument(
        "--fullwidth_ratio",
        type=float,
        default=_TASK.fullwidth_ratio,
        help="share written in full-width",
    )


def run_function_calling(args: argparse.Namespace, defaults: dict[str, object]) -> int:
    """``--task function_calling``: the function-calling generator's tasks or demonstrations."""
    changed = [f"--{name}" for name in _TOOL_USE_ONLY if getattr(args, name) != defaults[name]]
    if changed:
        raise UsageError(f"{', '.join(changed)} shape the tool_use tasks, not function_calling")
    if not 0.0 <= args.zh_ratio <= 1.0:
        raise UsageError("--zh_ratio must be in [0, 1]")
    output = args.output or (DEFAULT_CALL_DEMOS_PATH if args.sft else DEFAULT_CALLS_PATH)
    check_writable_file(output, "--output")
    began = time.perf_counter()
    try:
        mix = parse_mix(args.mix) if args.mix else DEFAULT_CALL_MIX
        generator = CallTaskGenerator(seed=args.seed, zh_ratio=args.zh_ratio, mix=mix)
    except ValueError as exc:  # the kinds' mix, checked by the generator
        raise UsageError(f"--mix: {exc}") from exc
    counts = write_call_tasks(output, generator.tasks(args.num, args.start), args.sft)
    what = "function-calling demonstrations" if args.sft else "function-calling tasks"
    detail = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"wrote {args.num} {what} to {output} in {time.perf_counter() - began:.2f}s ({detail})")
    return 0


def run(args: argparse.Namespace) -> int:
    from agentrl.data.synthetic import TaskGenerator, write_tasks

    if args.num < 0 or args.start < 0:
        raise UsageError("--num and --start must be >= 0")
    if args.task == "function_calling":
        defaults = vars(_defaults())
        return run_function_calling(args, defaults)
    try:
        config = TaskConfig(
            min_exprs=args.min_exprs,
            max_exprs=args.max_exprs,
            expr=ExprConfig(
                max_digits=args.digits,
                min_ops=args.min_ops,
                max_ops=args.max_ops,
                operators=_names(args.operators),
                functions=_names(args.functions),
                paren_prob=args.paren_prob,
                func_prob=args.func_prob,
                decimal_prob=args.decimal_prob,
            ),
            mix=parse_mix(args.mix) if args.mix else _TASK.mix,
            zh_ratio=args.zh_ratio,
            fullwidth_ratio=args.fullwidth_ratio,
        )
    except ValueError as exc:  # the task options, checked by the generator's config
        raise UsageError(str(exc)) from exc
    for flag in ("shortcut_rate", "shortcut_scope"):
        if getattr(args, flag) is not None and not args.sft:
            raise UsageError(f"--{flag} shapes demonstrations: it needs --sft")
    shortcut_rate, shortcut_scope = shortcut_settings(args.shortcut_rate, args.shortcut_scope)
    output = args.output or (DEFAULT_DEMOS_PATH if args.sft else DEFAULT_TASKS_PATH)
    check_writable_file(output, "--output")
    began = time.perf_counter()
    generator = TaskGenerator(config, seed=args.seed)
    tasks = generator.tasks(args.num, args.start)
    counts = write_tasks(
        output,
        tasks,
        generator.tools(),
        args.sft,
        shortcut_rate,
        shortcut_scope,
    )
    elapsed = time.perf_counter() - began
    what = "demonstrations" if args.sft else "tasks"
    detail = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"wrote {args.num} {what} to {output} in {elapsed:.2f}s ({detail})")
    return 0


def _defaults() -> argparse.Namespace:
    """The options' defaults, as parsing no argument gives them."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args([])
