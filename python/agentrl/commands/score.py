"""``agentrl score``: score trajectories from a JSONL file with the tool-use reward, or with
the ``function_call`` reward (``--reward function_call``).

Each input line is a JSON object in the golden reward file's schema (for
``function_call``: ``tools``, ``ground_truth`` and ``completion``, whose calls are read in
``--tool_format``'s call format); the output repeats it with ``reward`` and ``details``
added. A line's own ``config`` object overrides the settings (``--config``/``--set``) for
that line, so the golden file scores to its own rewards.
Reading, checking, scoring and writing run in Rust on worker threads (``score_file``);
the input may be gzip-compressed. Scored lines go to ``-o`` (written to a temporary file
and renamed when complete, so a failed run leaves no file) or, without it, to stdout; the
summary (and ``--explain``) goes to stderr so that stdout stays valid JSONL.

Exit codes: 0 when every line was scored; 1 when some lines were skipped (each is reported
with its line number and the reason: undecodable bytes, invalid JSON, nesting too deep, a
field missing or of the wrong type, a non-finite answer, a bad setting) while the others
were scored; 2 when nothing could be scored (bad settings or options, unreadable input,
unwritable output); 130 when stopped by Ctrl-C (an output file is then not written).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import IO, Any

from agentrl.errors import PATH_ERRNOS, UsageError, UserError
from agentrl.rewards import (
    FileScoreSummary,
    LineExplanation,
    RewardConfig,
    RewardHistogram,
    score_file,
)

# Exit code of a run stopped by Ctrl-C (128 + SIGINT, as shells report it).
INTERRUPTED = 130
HISTOGRAM_BINS = 12
BAR_WIDTH = 40


REWARDS = ("tool_use", "function_call")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", help="JSONL file of trajectories, or - for stdin")
    parser.add_argument(
        "--reward",
        choices=REWARDS,
        default="tool_use",
        help="tool_use (default) or function_call (lines of tools, ground_truth, completion)",
    )
    parser.add_argument(
        "--tool_format",
        default="auto",
        help="function_call: the family whose call format is read (auto: every format)",
    )
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


def _stdin() -> IO[Any]:
    """Standard input as bytes when it has a byte layer (so no decoding happens in Python)."""
    return getattr(sys.stdin, "buffer", None) or sys.stdin


def _stdout() -> IO[Any]:
    """Standard output as bytes when it has a byte layer, after any text already written."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        return sys.stdout
    sys.stdout.flush()
    return buffer


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    console = Console(stderr=True, highlight=False)
    try:
        config = RewardConfig.load(args.config, args.sets)
    except (OSError, ValueError) as exc:  # the settings: a --config file or a --set value
        raise UsageError(str(exc)) from exc
    if args.threads is not None and args.threads < 1:
        raise UsageError("--threads must be at least 1")

    source = _stdin() if args.input == "-" else args.input
    sink = _stdout() if args.output is None else args.output
    try:
        summary = _score(args, source, sink, config)
    except OSError as exc:  # the input cannot be read or the output written: nothing scored
        # A path that cannot be used as given is 2; a full disk or a damaged input (a
        # truncated gzip stream: no OS error code) is 1.
        failure = UsageError if exc.errno in PATH_ERRNOS else UserError
        raise failure(exc.strerror or str(exc)) from exc
    except KeyboardInterrupt:
        written = "" if args.output is None else " (no output file written)"
        console.print(f"[red]interrupted[/red]{written}")
        return INTERRUPTED
    finally:
        if args.output is None:
            # A closed pipe was reported above; flushing again must not raise.
            with contextlib.suppress(OSError):
                sys.stdout.flush()

    for explanation in summary.explanations:
        _print_explanation(console, explanation)
    _print_skipped(console, summary, escape)
    _print_summary(console, summary)
    return 1 if summary.skipped_count else 0


def _score(args: argparse.Namespace, source: Any, sink: Any, config: Any) -> FileScoreSummary:
    if getattr(args, "reward", "tool_use") != "function_call":
        return score_file(source, sink, config, args.threads, explain=args.explain)
    from agentrl.parsing import tool_format_formats
    from agentrl.rewards.function_call_files import score_function_call_file

    try:
        tool_format_formats(args.tool_format)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return score_function_call_file(
        source,
        sink,
        config,
        tool_format=args.tool_format,
        threads=args.threads,
        explain=args.explain,
    )


def _print_skipped(console: Any, summary: FileScoreSummary, escape: Any) -> None:
    for number, message in summary.skipped:
        console.print(f"[yellow]line {number}:[/yellow] skipped: {escape(message)}")
    unlisted = summary.skipped_count - len(summary.skipped)
    if unlisted:
        console.print(f"[yellow]{unlisted} more lines skipped[/yellow] (not listed)")


def _print_explanation(console: Any, explanation: LineExplanation) -> None:
    """One line's reward as the sum of its terms."""
    console.print(
        f"[bold]line {explanation.line}[/bold]: reward {explanation.reward:+.4f}"
        f" (raw {explanation.raw_reward:+.4f})"
    )
    for key, value in explanation.terms:
        console.print(f"    {key:<22} {value:+.4f}")


def _print_summary(console: Any, summary: FileScoreSummary) -> None:
    from rich.table import Table

    console.print(
        f"[bold]scored {summary.scored} trajectories[/bold] ({summary.skipped_count} lines skipped)"
    )
    if summary.scored == 0:
        return
    histogram = summary.histogram(HISTOGRAM_BINS)
    console.print(
        f"reward mean {histogram.mean:+.4f}  min {histogram.min:+.4f}  max {histogram.max:+.4f}"
        if histogram.finite
        else "no finite rewards"
    )
    table = Table(title="mean contribution of each term", show_edge=False)
    table.add_column("term")
    table.add_column("mean", justify="right")
    for key, mean in summary.term_means.items():
        if mean != 0.0:
            table.add_row(key, f"{mean:+.4f}")
    console.print(table)
    if histogram.finite:
        _print_histogram(console, histogram)


def _print_histogram(console: Any, histogram: RewardHistogram) -> None:
    if histogram.min == histogram.max:
        console.print(f"all rewards equal {histogram.min:+.4f}")
        return
    peak = max(max(histogram.counts), 1)
    edges = histogram.edges
    for count, left, right in zip(histogram.counts, edges[:-1], edges[1:], strict=True):
        bar = "█" * round(BAR_WIDTH * count / peak)
        console.print(f"{left:+8.3f} .. {right:+8.3f} │{bar} {count}")
