"""``agentrl score``: score trajectories from a JSONL file with the tool-use reward.

Each input line is a JSON object in the golden reward file's schema; the output repeats it
with ``reward`` and ``details`` added (:func:`agentrl.rewards.stream.score_jsonl`). A line's
own ``config`` object overrides the settings (``--config``/``--set``) for that line, so the
golden file scores to its own rewards. Scored lines go to ``-o`` or, without it, to stdout;
the summary (and ``--explain``) goes to stderr so that stdout stays valid JSONL. A line that
is not a JSON object, or that the scorer rejects, is reported with its line number and
skipped, and the exit code is then 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import numpy as np

from agentrl.rewards import RewardConfig, ScoreResult
from agentrl.rewards.stream import score_jsonl

HISTOGRAM_BINS = 12
BAR_WIDTH = 40


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", help="JSONL file of trajectories, or - for stdin")
    parser.add_argument("-o", "--output", help="write scored JSONL here (default: stdout)")
    parser.add_argument("--config", help="TOML file of reward settings (top level or [reward])")
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override one reward setting (repeatable)",
    )
    parser.add_argument("--threads", type=int, help="scoring threads (default: all cores)")
    parser.add_argument(
        "--explain", action="store_true", help="print each line's reward term by term"
    )


@contextmanager
def _open_input(path: str) -> Iterator[TextIO]:
    if path == "-":
        yield sys.stdin
    else:
        with open(path, encoding="utf-8") as handle:
            yield handle


@contextmanager
def _open_output(path: str | None) -> Iterator[TextIO]:
    if path is None:
        yield sys.stdout
    else:
        with open(path, "w", encoding="utf-8") as handle:
            yield handle


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console(stderr=True, highlight=False)
    try:
        config = RewardConfig.load(args.config, args.sets)
    except (OSError, ValueError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    if args.threads is not None and args.threads < 1:
        console.print("[red]error:[/red] --threads must be at least 1")
        return 2

    def explain(numbers: list[int], result: ScoreResult) -> None:
        for row, number in enumerate(numbers):
            _print_explanation(console, number, result, row)

    try:
        with _open_input(args.input) as source, _open_output(args.output) as sink:
            scored = score_jsonl(
                source, sink, config, args.threads, explain if args.explain else None
            )
    except OSError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    for number, message in scored.errors:
        console.print(f"[yellow]line {number}:[/yellow] skipped: {message}")
    _print_summary(console, scored.rewards, scored.term_means, len(scored.errors))
    return 1 if scored.errors else 0


def _print_explanation(console: Any, number: int, result: ScoreResult, row: int) -> None:
    """One line's reward as the sum of its terms."""
    details = result.details
    console.print(
        f"[bold]line {number}[/bold]: reward {details['reward'][row]:+.4f}"
        f" (raw {details['raw_reward'][row]:+.4f})"
    )
    for key, value in result.explain(row):
        console.print(f"    {key:<22} {value:+.4f}")


def _print_summary(
    console: Any, rewards: np.ndarray, term_means: dict[str, float], skipped: int
) -> None:
    from rich.table import Table

    console.print(f"[bold]scored {rewards.size} trajectories[/bold] ({skipped} lines skipped)")
    if rewards.size == 0:
        return
    finite = rewards[np.isfinite(rewards)]
    console.print(
        f"reward mean {finite.mean():+.4f}  min {finite.min():+.4f}  max {finite.max():+.4f}"
        if finite.size
        else "no finite rewards"
    )
    table = Table(title="mean contribution of each term", show_edge=False)
    table.add_column("term")
    table.add_column("mean", justify="right")
    for key, mean in term_means.items():
        if mean != 0.0:
            table.add_row(key, f"{mean:+.4f}")
    console.print(table)
    if finite.size:
        _print_histogram(console, finite)


def _print_histogram(console: Any, rewards: np.ndarray) -> None:
    low, high = float(rewards.min()), float(rewards.max())
    if low == high:
        console.print(f"all rewards equal {low:+.4f}")
        return
    counts, edges = np.histogram(rewards, bins=HISTOGRAM_BINS, range=(low, high))
    peak = max(int(counts.max()), 1)
    for count, left, right in zip(counts, edges[:-1], edges[1:], strict=True):
        bar = "█" * round(BAR_WIDTH * int(count) / peak)
        console.print(f"{left:+8.3f} .. {right:+8.3f} │{bar} {int(count)}")
