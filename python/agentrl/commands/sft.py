"""`agentrl sft`: supervised warm start on tool-use demonstrations.

With no arguments: build the tiny preset, generate demonstrations and held-out tasks,
train, save to runs/tiny-sft/ (where `agentrl train` looks) and print held-out accuracy.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from typing import Any

from agentrl.sft.train import SFTConfig

DEFAULT_OUTPUT = "runs/tiny-sft"
DEFAULT_DEMOS = 12000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = SFTConfig()
    parser.add_argument("--model", default="tiny", help="tiny | HF model dir | MiniMind .pth")
    parser.add_argument("--tokenizer", default=None, help="tokenizer dir for a .pth checkpoint")
    parser.add_argument(
        "--tiny", default="", help="tiny preset overrides, e.g. hidden_size=192,num_layers=6"
    )
    parser.add_argument("--data", nargs="+", default=None, help="demonstration JSONL file(s)")
    parser.add_argument(
        "--num-demos",
        type=int,
        default=DEFAULT_DEMOS,
        help="generated demonstrations when --data is not given",
    )
    parser.add_argument("--eval-data", default=None, help="held-out prompt-pool JSONL")
    parser.add_argument("--eval-tasks", type=int, default=200, help="held-out tasks to score")
    parser.add_argument("--output", default=DEFAULT_OUTPUT, help="output directory")
    parser.add_argument("--steps", type=int, default=d.steps, help="optimizer steps")
    parser.add_argument("--lr", type=float, default=d.lr)
    parser.add_argument("--min-lr-ratio", type=float, default=d.min_lr_ratio)
    parser.add_argument("--warmup", type=int, default=d.warmup_steps, help="warm-up steps")
    parser.add_argument("--weight-decay", type=float, default=d.weight_decay)
    parser.add_argument(
        "--batch-tokens", type=int, default=d.batch_tokens, help="padded tokens per micro-batch"
    )
    parser.add_argument("--max-batch", type=int, default=d.max_batch, help="sequences per batch")
    parser.add_argument("--grad-accum", type=int, default=d.grad_accum)
    parser.add_argument("--clip", type=float, default=d.clip, help="gradient-norm clip")
    parser.add_argument("--max-len", type=int, default=1024, help="longest training sequence")
    parser.add_argument(
        "--eval-interval",
        type=int,
        default=d.eval_interval,
        help="steps between evaluations on --eval-subset tasks (0: end only)",
    )
    parser.add_argument("--eval-subset", type=int, default=d.eval_subset)
    parser.add_argument("--max-turns", type=int, default=d.max_turns)
    parser.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens)
    parser.add_argument("--save-interval", type=int, default=d.save_interval)
    parser.add_argument("--keep-last", type=int, default=d.keep_last)
    parser.add_argument(
        "--max-time",
        type=float,
        default=d.max_time,
        help="training time budget in seconds; the schedule anneals within it (0: no limit)",
    )
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: auto)")
    parser.add_argument(
        "--num-threads",
        type=int,
        default=0,
        help="torch CPU threads (0: torch's default; at most the usable cores)",
    )
    parser.add_argument("--dtype", default=None, help="weight dtype (default float32)")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _tiny_spec(text: str) -> Any:
    from agentrl.models.tiny import TinySpec

    fields = {f.name: f.type for f in dataclasses.fields(TinySpec)}
    values: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = part.partition("=")
        if not sep or key not in fields:
            raise ValueError(f"--tiny: {part!r} is not KEY=VALUE with KEY in {sorted(fields)}")
        default = getattr(TinySpec(), key)
        values[key] = type(default)(raw)
    return TinySpec(**values)


def run(args: argparse.Namespace) -> int:
    from agentrl.models import load_policy, resolve_device, resolve_dtype
    from agentrl.models.errors import ModelLoadError
    from agentrl.models.tiny import build_tiny_preset
    from agentrl.sft import tasks as sft_tasks
    from agentrl.sft.data import LoadStats, build_examples
    from agentrl.sft.train import train_sft
    from agentrl.utils.threads import set_cpu_threads

    began = time.perf_counter()
    set_cpu_threads(args.num_threads)
    try:
        if args.model == "tiny":
            model, tokenizer = build_tiny_preset(_tiny_spec(args.tiny))
            model = model.to(resolve_device(args.device), resolve_dtype(args.dtype))
        else:
            model, tokenizer = load_policy(
                args.model, args.dtype, args.device, tokenizer=args.tokenizer
            )
    except (ModelLoadError, ValueError) as exc:
        print(f"agentrl sft: {exc}", file=sys.stderr)
        return 2
    params = sum(p.numel() for p in model.parameters())
    if args.data:
        conversations, stats = sft_tasks.load_demos(args.data)
        print(f"demonstrations: {stats.as_dict()}")
    else:
        conversations = sft_tasks.generated_demos(args.num_demos)
    if args.eval_data:
        heldout = sft_tasks.load_heldout(args.eval_data, args.eval_tasks)
    else:
        heldout = sft_tasks.generated_heldout(args.eval_tasks, conversations)
    env = sft_tasks.tool_env(tokenizer)
    stats = LoadStats()
    examples = build_examples(conversations, tokenizer, env.render, args.max_len, stats)
    if not examples:
        print(f"agentrl sft: no usable training example ({stats.as_dict()})", file=sys.stderr)
        return 2
    tokens = sum(len(e) for e in examples)
    targets = sum(sum(e.loss_mask) for e in examples)
    print(
        f"model {args.model}: {params / 1e6:.2f}M parameters, vocab {len(tokenizer)}; "
        f"{len(examples)} examples, {tokens} tokens ({targets} trained); "
        f"{len(heldout)} held-out tasks; setup {time.perf_counter() - began:.1f}s"
    )
    cfg = SFTConfig(
        output_dir=args.output,
        steps=args.steps,
        batch_tokens=args.batch_tokens,
        max_batch=args.max_batch,
        grad_accum=args.grad_accum,
        lr=args.lr,
        min_lr_ratio=args.min_lr_ratio,
        warmup_steps=args.warmup,
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
    )
    result = train_sft(model, tokenizer, examples, heldout, env, cfg)
    total = time.perf_counter() - began
    exact = result.eval.get("eval/exact_match", float("nan"))
    print(
        f"held-out exact match: {exact:.3f} on {len(heldout)} tasks "
        f"(greedy, tool loop); {result.steps} steps, training {result.seconds:.0f}s, "
        f"total {total:.0f}s; model saved to {args.output}"
    )
    return 0
