"""``agentrl score``: score trajectories from a JSONL file with the seed's reward.

Each input line is a JSON object in the golden reward file's schema; the output repeats it
with ``reward`` and ``details`` added. A line's own ``config`` object overrides the settings
(``--config``/``--set``) for that line, so the golden file scores to its own rewards.
Scored lines go to ``-o`` or, without it, to stdout; the summary (and ``--explain``) goes to
stderr so that stdout stays valid JSONL. A line that is not a JSON object, or that the
scorer rejects, is reported with its line number and skipped, and the exit code is then 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import numpy as np

from agentrl.rewards import TERM_KEYS, RewardConfig, ScoreResult, score_batch

# Lines scored per Rust call: large enough to amortise the call, small enough to stream.
CHUNK_ROWS = 8192
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


def _read_records(handle: TextIO, errors: list[tuple[int, str]]) -> Iterator[tuple[int, dict]]:
    """``(line number, record)`` for each JSON-object line; bad lines go to ``errors``."""
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append((number, f"invalid JSON: {exc.msg} at column {exc.colno}"))
            continue
        if not isinstance(record, dict):
            errors.append((number, f"expected a JSON object, got {type(record).__name__}"))
            continue
        yield number, record


def _chunks(items: Iterator[tuple[int, dict]], size: int) -> Iterator[list[tuple[int, dict]]]:
    chunk: list[tuple[int, dict]] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _score_chunk(
    chunk: list[tuple[int, dict]],
    config: RewardConfig,
    threads: int | None,
    errors: list[tuple[int, str]],
) -> tuple[list[tuple[int, dict]], ScoreResult | None]:
    """Scores a chunk in one call; if the scorer rejects a record, finds and drops it."""
    records = [record for _, record in chunk]
    try:
        return chunk, score_batch(records, config, threads, explain=True)
    except (ValueError, TypeError):
        pass
    kept = []
    for number, record in chunk:
        try:
            score_batch([record], config, 1)
        except (ValueError, TypeError) as exc:
            errors.append((number, str(exc).removeprefix("record 0: ")))
            continue
        kept.append((number, record))
    if not kept:
        return kept, None
    return kept, score_batch([r for _, r in kept], config, threads, explain=True)


def _json_float(value: float) -> Any:
    return value if np.isfinite(value) else str(value)


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

    errors: list[tuple[int, str]] = []
    rewards: list[np.ndarray] = []
    terms: dict[str, list[np.ndarray]] = {key: [] for key in TERM_KEYS}
    try:
        with _open_input(args.input) as source, _open_output(args.output) as sink:
            for chunk in _chunks(_read_records(source, errors), CHUNK_ROWS):
                kept, result = _score_chunk(chunk, config, args.threads, errors)
                if result is None:
                    continue
                rows = result.to_records()
                for row, ((number, record), detail) in enumerate(zip(kept, rows, strict=True)):
                    record["reward"] = _json_float(detail["reward"])
                    record["details"] = {k: _json_float(v) for k, v in detail.items()}
                    sink.write(json.dumps(record, ensure_ascii=False) + "\n")
                    if args.explain:
                        _print_explanation(console, number, result, row)
                rewards.append(result.rewards.copy())
                for key, column in (result.contributions or {}).items():
                    terms[key].append(column.copy())
    except OSError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2

    for number, message in sorted(errors):
        console.print(f"[yellow]line {number}:[/yellow] skipped: {message}")
    all_rewards = np.concatenate(rewards) if rewards else np.zeros(0)
    means = {key: float(np.concatenate(v).mean()) for key, v in terms.items() if v}
    _print_summary(console, all_rewards, means, len(errors))
    return 1 if errors else 0


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
