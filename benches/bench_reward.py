"""Reward scoring throughput: ``score_batch`` (Rust) against the reference per-trajectory loop.

The corpus is the golden reward file (tests/data/reward_parity.jsonl) repeated to at least
20,000 rows, scored with the compatible default settings and finished schedules. Repetition puts
each task into several rows, as a GRPO batch does (num_generations completions per prompt);
``--distinct-tasks`` makes every row's task text unique instead (an invisible suffix that
changes no arithmetic), which is the worst case for ``score_batch``'s per-task caching.

In the same run, the reference implementation's ``score_one_trajectory`` (loaded from
../shared/seeds/ by ``reference_baseline.load_reference``) scores the same rows in a Python
loop, one trajectory per call, and the script prints trajectories per second for the
reference, for ``score_batch`` on one thread
and on all threads, and the ratios. It also checks that both give the same rewards.

Run: ``.venv/bin/python benches/bench_reward.py [--rows N] [--repeat R] [--distinct-tasks]``.
Not a test: nothing is asserted except reward agreement.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agentrl.rewards import resolved_threads, score_batch
from reference_baseline import absent_message, load_reference, trajectory_scorer

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "data" / "reward_parity.jsonl"
ROW_KEYS = ("messages", "gt", "completion", "tool_events", "unfinished")


def build_corpus(rows: int, distinct_tasks: bool) -> list[dict[str, Any]]:
    """The golden rows (without their per-line settings), each repeated in a run of
    consecutive rows (a group) so that there are ``rows`` rows in all."""
    with open(GOLDEN, encoding="utf-8") as handle:
        golden = [json.loads(line) for line in handle]
    group = -(-rows // len(golden))
    corpus = []
    for i in range(rows):
        record = {key: golden[i // group][key] for key in ROW_KEYS}
        if distinct_tasks:
            record = copy.deepcopy(record)
            # Zero-width spaces are neither digits, operators nor whitespace to the reward.
            record["messages"][0]["content"] += "\u200b" * (i % group + 1)
        corpus.append(record)
    return corpus


def time_reference(
    reference: dict[str, Any], corpus: list[dict[str, Any]]
) -> tuple[float, list[float]]:
    """CPU seconds of the reference per-trajectory loop over ``corpus``, and its rewards."""
    score = trajectory_scorer(reference)
    start = time.process_time()
    rewards = [score(r)[0] for r in corpus]
    return time.process_time() - start, rewards


def time_ours(corpus: list[dict[str, Any]], threads: int, clock: Any) -> tuple[float, list]:
    start = clock()
    rewards = score_batch(corpus, threads=threads).rewards.tolist()
    return clock() - start, rewards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=21_000)
    parser.add_argument("--repeat", type=int, default=3, help="rounds of timings (median)")
    parser.add_argument("--distinct-tasks", action="store_true")
    args = parser.parse_args()

    corpus = build_corpus(args.rows, args.distinct_tasks)
    cores = resolved_threads()
    print(f"corpus: {len(corpus)} rows from {GOLDEN.name} in groups of consecutive rows", end="")
    print(", every task text distinct" if args.distinct_tasks else " sharing their task")

    reference = load_reference()
    if reference is None:
        print(absent_message())
    score_batch(corpus[:64], threads=1)  # build lookup tables and the thread pool
    # The machine may be shared: reference and score_batch timings alternate (the reference on one
    # slice of the corpus each round) and score_batch is reported by its median round.
    ref_seconds, ref_rewards = 0.0, []
    one_cpu, one_wall, all_wall = [], [], []
    bounds = [len(corpus) * k // args.repeat for k in range(args.repeat + 1)]
    for k in range(args.repeat):
        if reference is not None:
            seconds, rewards = time_reference(reference, corpus[bounds[k] : bounds[k + 1]])
            ref_seconds += seconds
            ref_rewards += rewards
        seconds, ours = time_ours(corpus, 1, time.process_time)
        one_cpu.append(seconds)
        one_wall.append(time_ours(corpus, 1, time.perf_counter)[0])
        all_wall.append(time_ours(corpus, cores, time.perf_counter)[0])

    n = len(corpus)
    one, one_w, all_w = (statistics.median(t) for t in (one_cpu, one_wall, all_wall))
    print(f"{'CPU time, one thread':30} {'traj/s':>12} {'us/traj':>9} {'vs ref':>9}")
    rows = [("score_batch, 1 thread", one)]
    if reference is not None:
        rows.insert(0, ("reference loop (Python)", ref_seconds))
    for name, seconds in rows:
        ratio = f"{ref_seconds / seconds:8.1f}x" if reference is not None else "      -"
        print(f"{name:30} {n / seconds:12,.0f} {seconds / n * 1e6:9.2f} {ratio}")
    print(f"{'wall clock':30} {'traj/s':>12} {'us/traj':>9}")
    for name, seconds in (
        ("score_batch, 1 thread", one_w),
        (f"score_batch, {cores} threads", all_w),
    ):
        print(f"{name:30} {n / seconds:12,.0f} {seconds / n * 1e6:9.2f}")
    print(f"thread scaling: {one_w / all_w:.2f}x on {cores} threads")
    if reference is not None:
        mismatches = sum(abs(a - b) > 1e-9 for a, b in zip(ours, ref_rewards, strict=True))
        print(f"rewards equal to the reference's: {len(corpus) - mismatches}/{len(corpus)}")
        if mismatches:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
