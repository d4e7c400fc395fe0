"""Rollout inline or in a background thread, on the CPU: seconds per RL step.

`agentrl train --async_workers N` generates in N threads of the trainer's process while it
trains. On a GPU the two overlap; on a CPU they compute on the same cores, and with several
torch threads each side runs its own OpenMP team, whose idle threads then sleep and wake at
every operation (docs/tuning.md, 2026-12-02, commits 9ccb8a8 and a84c346). This benchmark
runs the same RL steps (the inputs of ``bench_vs_trl.py``: the tiny random Qwen3, two
prompts x G=8, 48 new tokens, eager decoding) four ways, each in a fresh process:
``async_workers`` 0 and 1, with the machine's usable cores as torch threads and with one
thread. It prints the mean and median step time of each after the warm-up and its ratio to
the inline run with all cores, measured in the same run.

Run: ``nice .venv/bin/python benches/bench_async_cpu.py [--steps 25] [--warmup 5]``
(about a minute on two cores; needs no extra package).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def child(spec: dict[str, Any]) -> None:
    """One configuration: train and print the wall time of each step as JSON."""
    import torch
    from agentrl.config import resolve
    from agentrl.trainer import Trainer

    torch.set_num_threads(spec["threads"])
    overrides = {**spec["overrides"], "num_threads": spec["threads"]}
    overrides["async_workers"] = spec["async_workers"]
    trainer = Trainer(resolve("tiny", overrides=overrides))
    stamps: list[float] = []
    trainer.callbacks.append(lambda *_: stamps.append(time.perf_counter()))
    trainer.run()
    print(json.dumps([b - a for a, b in itertools.pairwise(stamps)]))


def run_child(spec: dict[str, Any]) -> list[float]:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"configuration {spec['name']} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=25, help="measured steps per configuration")
    parser.add_argument("--warmup", type=int, default=5, help="steps dropped first")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return

    import bench_vs_trl
    from agentrl.utils.threads import usable_cores

    cores = usable_cores()
    with tempfile.TemporaryDirectory(prefix="bench-async-") as folder:
        inputs = bench_vs_trl.parse_args(["--rollout-compile", "0"])
        setup = bench_vs_trl.build_inputs(inputs, Path(folder))
        overrides = dict(setup.agentrl_overrides)
        # One step more than measured: the first step's time runs from the second stamp.
        overrides["total_steps"] = args.warmup + args.steps + 1
        configs = [(cores, 0), (cores, 1), (1, 0), (1, 1)] if cores > 1 else [(1, 0), (1, 1)]
        print(
            f"{cores} usable cores; {args.warmup} warm-up + {args.steps} measured steps each, "
            "each configuration in a fresh process"
        )
        print(
            f"{'torch threads':>13} {'async_workers':>13} {'mean s':>8} {'median s':>9} "
            f"{'vs inline':>9}"
        )
        baseline = None
        for threads, workers in configs:
            spec = {
                "name": f"{threads}t/{workers}w",
                "threads": threads,
                "async_workers": workers,
                "overrides": overrides,
            }
            steps = run_child(spec)[args.warmup :]
            mean = statistics.mean(steps)
            baseline = baseline or mean
            print(
                f"{threads:13d} {workers:13d} {mean:8.3f} {statistics.median(steps):9.3f} "
                f"{mean / baseline:8.2f}x"
            )
        print(
            "vs inline: mean step time over that of rollout inline with all cores as threads "
            "(above 1: slower)"
        )


if __name__ == "__main__":
    main()
