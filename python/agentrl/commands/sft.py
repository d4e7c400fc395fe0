"""`agentrl sft`: supervised warm start on tool-use demonstrations.

With no arguments: build the tiny preset, generate demonstrations and held-out tasks,
train, save to runs/tiny-sft/ (where `agentrl train` looks) and print held-out accuracy.
The pipeline itself is :func:`agentrl.sft.pipeline.run_sft`.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from agentrl.errors import UsageError
from agentrl.sft.pipeline import DEFAULT_EVAL_TASKS, DEFAULT_MAX_LEN, SFTRunOptions
from agentrl.sft.tasks import DEFAULT_DEMOS, DEFAULT_SHORTCUT_RATE
from agentrl.sft.train import SFTConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = SFTConfig()
    parser.add_argument("--model", default="tiny", help="tiny | HF model dir | MiniMind .pth")
    parser.add_argument("--tokenizer", default=None, help="tokenizer dir for a .pth checkpoint")
    parser.add_argument(
        "--chat_template",
        default="",
        help="chat template: the tokenizer's own (default), builtin, or a Jinja file",
    )
    parser.add_argument(
        "--tiny", default="", help="tiny preset overrides, e.g. hidden_size=192,num_layers=6"
    )
    parser.add_argument("--data", nargs="+", default=None, help="demonstration JSONL file(s)")
    parser.add_argument(
        "--num_demos",
        type=int,
        default=DEFAULT_DEMOS,
        help="generated demonstrations when --data is not given",
    )
    parser.add_argument(
        "--shortcut_rate",
        type=float,
        default=None,
        help="share of the expressions simple enough to do in one's head that the generated "
        f"demonstrations answer without calling the tool (default {DEFAULT_SHORTCUT_RATE}; "
        "0: perfect demonstrations)",
    )
    parser.add_argument("--eval_data", default=None, help="held-out prompt-pool JSONL")
    parser.add_argument(
        "--eval_tasks", type=int, default=DEFAULT_EVAL_TASKS, help="held-out tasks to score"
    )
    parser.add_argument("--output", default=d.output_dir, help="output directory")
    parser.add_argument("--steps", type=int, default=d.steps, help="optimizer steps")
    parser.add_argument("--lr", type=float, default=d.lr)
    parser.add_argument("--min_lr_ratio", type=float, default=d.min_lr_ratio)
    parser.add_argument("--warmup", type=int, default=d.warmup_steps, help="warm-up steps")
    parser.add_argument(
        "--decay_fraction",
        type=float,
        default=d.decay_fraction,
        help="share of the steps (after warm-up) the cosine decay spans; before it the "
        "learning rate holds (1.0: cosine over the whole run)",
    )
    parser.add_argument("--weight_decay", type=float, default=d.weight_decay)
    parser.add_argument(
        "--batch_tokens", type=int, default=d.batch_tokens, help="padded tokens per micro-batch"
    )
    parser.add_argument("--max_batch", type=int, default=d.max_batch, help="sequences per batch")
    parser.add_argument("--grad_accum", type=int, default=d.grad_accum)
    parser.add_argument("--clip", type=float, default=d.clip, help="gradient-norm clip")
    parser.add_argument(
        "--max_len", type=int, default=DEFAULT_MAX_LEN, help="longest training sequence"
    )
    parser.add_argument(
        "--eval_interval",
        type=int,
        default=d.eval_interval,
        help="steps between evaluations on --eval_subset tasks (0: end only)",
    )
    parser.add_argument("--eval_subset", type=int, default=d.eval_subset)
    parser.add_argument("--max_turns", type=int, default=d.max_turns)
    parser.add_argument("--max_new_tokens", type=int, default=d.max_new_tokens)
    parser.add_argument("--save_interval", type=int, default=d.save_interval)
    parser.add_argument("--keep_last", type=int, default=d.keep_last)
    parser.add_argument(
        "--max_time",
        type=float,
        default=d.max_time,
        help="training time budget in seconds; the schedule anneals within it (0: no limit)",
    )
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: auto)")
    parser.add_argument(
        "--num_threads",
        type=int,
        default=0,
        help="torch CPU threads (0: torch's default; at most the usable cores)",
    )
    parser.add_argument("--dtype", default=None, help="weight dtype (default float32)")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    parser.add_argument(
        "--compile",
        action="store_true",
        help="compile each decoder layer with torch.compile for the training steps (needs a "
        "C++ compiler on the CPU; the first steps wait for compilation; evaluations run eagerly)",
    )
    parser.add_argument("--no_progress", action="store_true", help="no progress bar")


def tiny_spec(text: str) -> Any:
    """``--tiny`` (``KEY=VALUE,...`` over :class:`TinySpec` fields) as a spec; '' is None."""
    from agentrl.models.tiny import TinySpec

    types = {f.name: f.type for f in dataclasses.fields(TinySpec)}
    values: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = part.partition("=")
        if not sep or key not in types:
            raise UsageError(f"--tiny: {part!r} is not KEY=VALUE with KEY in {sorted(types)}")
        kind = type(getattr(TinySpec(), key))
        try:
            values[key] = kind(raw)
        except ValueError:
            raise UsageError(f"--tiny: {key}={raw!r}: expected {kind.__name__}") from None
    return TinySpec(**values) if values else None


def options_from_args(args: argparse.Namespace) -> SFTRunOptions:
    """The parsed command line as the pipeline's options."""
    if args.shortcut_rate is not None and args.data:
        raise UsageError("--shortcut_rate shapes generated demonstrations; --data gives its own")
    shortcut_rate = DEFAULT_SHORTCUT_RATE if args.shortcut_rate is None else args.shortcut_rate
    if not 0.0 <= shortcut_rate <= 1.0:
        raise UsageError(f"--shortcut_rate {shortcut_rate}: expected a share in [0, 1]")
    if not 0.0 < args.decay_fraction <= 1.0:
        raise UsageError(f"--decay_fraction {args.decay_fraction}: expected a share in (0, 1]")
    return SFTRunOptions(
        model=args.model,
        tiny=tiny_spec(args.tiny),
        tokenizer=args.tokenizer,
        data=tuple(args.data or ()),
        num_demos=args.num_demos,
        shortcut_rate=shortcut_rate,
        eval_data=args.eval_data,
        eval_tasks=args.eval_tasks,
        max_len=args.max_len,
        device=args.device,
        dtype=args.dtype,
        num_threads=args.num_threads,
        chat_template=args.chat_template,
        train=SFTConfig(
            output_dir=args.output,
            steps=args.steps,
            batch_tokens=args.batch_tokens,
            max_batch=args.max_batch,
            grad_accum=args.grad_accum,
            lr=args.lr,
            min_lr_ratio=args.min_lr_ratio,
            warmup_steps=args.warmup,
            decay_fraction=args.decay_fraction,
            weight_decay=args.weight_decay,
            clip=args.clip,
            eval_interval=args.eval_interval,
            eval_subset=args.eval_subset,
            max_turns=args.max_turns,
            max_new_tokens=args.max_new_tokens,
            save_interval=args.save_interval,
            keep_last=args.keep_last,
            max_time=args.max_time,
            seed=args.seed,
            progress=not args.no_progress,
            resume=args.resume,
            compile=args.compile,
        ),
    )


def run(args: argparse.Namespace) -> int:
    from agentrl.errors import signal_exit_code
    from agentrl.sft.pipeline import run_sft
    from agentrl.training.signals import StopRequest

    options = options_from_args(args)
    # SIGINT/SIGTERM finish the step and save a checkpoint that `--resume` continues from.
    with StopRequest() as stop:
        result = run_sft(options, should_stop=lambda: stop.requested)
    training = result.training
    if training.stopped:
        print(
            f"stopped ({stop.reason}) at step {training.steps}; `agentrl sft --resume` "
            f"with the same options continues it from {result.output_dir}/checkpoints"
        )
        return signal_exit_code(stop.signum) if stop.signum is not None else 0
    print(
        f"held-out exact match: {result.exact_match:.3f} on {result.heldout_tasks} tasks "
        f"(greedy, tool loop); {training.steps} steps, training {training.seconds:.0f}s, "
        f"total {result.seconds:.0f}s; model saved to {result.output_dir}"
    )
    return 0
