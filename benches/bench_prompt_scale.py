"""Start-up cost of prompt data at scale: `agentrl train` from launch to its first rollout.

    python benches/bench_prompt_scale.py [--lines 1000 1000000 10000000] [--work DIR]
                                         [--profile N]

For each size, a JSONL file of arithmetic prompts (about 80 bytes a line, as generated
prompts are) is written once, and a fresh ``agentrl train`` process is started on it with
a small saved model; it is stopped when it asks for its first rollout, and reports the
CPU time (user + system) and peak RSS it took to get there. The costs of the larger files
are given against the first (smallest) one, measured the same way, so the model's and the
libraries' start-up cancel out. CPU time rather than wall time is the figure on a loaded
machine. ``--profile N`` also writes a cProfile of the start-up of N lines and prints its
top functions by cumulative time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Run inside the child: stop at the first rollout and report what the start-up cost.
CHILD = """
import cProfile, json, os, resource, sys, time
began = time.monotonic()
import agentrl.rollout as rollout
import agentrl.rollout.episodes as episodes

profile = cProfile.Profile() if os.environ.get("BENCH_PROFILE") else None


def first_rollout(*args, **kwargs):
    if profile is not None:
        profile.disable()
        profile.dump_stats(os.environ["BENCH_PROFILE"])
    usage = resource.getrusage(resource.RUSAGE_SELF)
    report = {"cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024,
              "wall_s": time.monotonic() - began}
    print("BENCH " + json.dumps(report), flush=True)
    os._exit(0)


rollout.run_episodes = episodes.run_episodes = first_rollout
from agentrl.cli import main

if profile is not None:
    profile.enable()
sys.exit(main(sys.argv[1:]))
"""


def write_prompts(path: Path, lines: int) -> None:
    """``lines`` arithmetic prompts, written in blocks (fast even at 10,000,000)."""
    template = '{{"messages":[{{"role":"user","content":"What is {a} + {b}?"}}],"gt":["{c}"]}}\n'
    with open(path, "w") as fh:
        for start in range(0, lines, 100_000):
            block = range(start, min(start + 100_000, lines))
            fh.write("".join(template.format(a=i, b=i % 97, c=i + i % 97) for i in block))


def write_model(directory: Path) -> None:
    from agentrl.models.tiny import TinySpec, build_model, build_tokenizer, demo_corpus, save_preset

    spec = TinySpec(
        vocab_size=1024,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        num_kv_heads=1,
        head_dim=16,
        intermediate_size=64,
        corpus_tasks=100,
    )
    tokenizer = build_tokenizer(spec, demo_corpus(spec.corpus_tasks, spec.corpus_seed))
    save_preset(build_model(spec, len(tokenizer)), tokenizer, directory)


def start_up(work: Path, data: Path, profile: Path | None = None) -> dict[str, float]:
    """One fresh ``agentrl train`` on ``data`` up to its first rollout."""
    options = (
        f"--model {work / 'model'} --data {data} --save_dir {work / 'runs'} "
        f"--run_name run-{data.stem} --total_steps 1 --batch_size 2 --num_generations 2 "
        "--max_gen_len 8 --eval_before_train 0 --eval_interval 0 --progress 0 --report 0 "
        "--async_workers 0"
    ).split()
    env = {**os.environ, "PYTHONPATH": str(REPO / "python"), "AGENTRL_DEBUG": ""}
    if profile is not None:
        env["BENCH_PROFILE"] = str(profile)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "train", *options],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
    )
    for line in done.stdout.splitlines():
        if line.startswith("BENCH "):
            return json.loads(line[len("BENCH ") :])
    raise SystemExit(f"the run did not reach its first rollout ({done.returncode}):\n{done.stderr}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[1000, 1_000_000, 10_000_000])
    parser.add_argument("--work", default=None, help="work directory (default: a temp dir)")
    parser.add_argument("--profile", type=int, default=0, help="profile this many lines too")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="agentrl-prompt-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "model" / "config.json").is_file():
        write_model(work / "model")
    base: dict[str, float] | None = None
    for lines in args.lines:
        data = work / f"prompts-{lines}.jsonl"
        if not data.is_file():
            began = time.monotonic()
            write_prompts(data, lines)
            print(
                f"wrote {data.name} ({data.stat().st_size / 1e6:.1f} MB) in "
                f"{time.monotonic() - began:.0f}s"
            )
        cost = start_up(work, data)
        line = (
            f"{lines:>10,} lines ({data.stat().st_size / 1e6:7.1f} MB): "
            f"{cost['cpu_s']:6.1f} CPU-s, peak RSS {cost['peak_rss_mb']:6.0f} MB, "
            f"wall {cost['wall_s']:6.1f}s"
        )
        if base is None:
            base = cost
        else:
            line += (
                f"; above {args.lines[0]:,} lines: +{cost['cpu_s'] - base['cpu_s']:.1f} CPU-s, "
                f"+{cost['peak_rss_mb'] - base['peak_rss_mb']:.0f} MB"
            )
        print(line, flush=True)
    if args.profile:
        import pstats

        data = work / f"prompts-{args.profile}.jsonl"
        if not data.is_file():
            write_prompts(data, args.profile)
        out = work / f"start-up-{args.profile}.prof"
        start_up(work, data, profile=out)
        pstats.Stats(str(out)).sort_stats("cumulative").print_stats(25)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
