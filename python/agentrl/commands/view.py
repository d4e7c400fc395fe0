"""`agentrl view RUN_DIR [RUN_DIR2] [-o report.html]`: the episode browser of a run.

Writes one self-contained HTML file (no network, opens from ``file://``) with the run's
config and curves, its dumped episodes (``--dump_rollouts``) to sort, filter and read turn
by turn, each group side by side, and, given two runs or two `agentrl eval --output`
files, the same tasks next to each other. The page is built by
:func:`agentrl.observability.viewer.write_view`. A run's damaged dump file is skipped and
named (the page shows the others; exit 1, as `agentrl score` exits on skipped lines).
"""

from __future__ import annotations

import argparse
import sys
import time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Write an HTML episode browser for a run directory or an eval dump "
        "(two of them: side by side)."
    )
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="RUN_DIR_OR_DUMP",
        help="run directory (metrics.jsonl, rollouts/) or dump file (agentrl eval --output)",
    )
    parser.add_argument(
        "-o",
        "--output",
        default=None,
        help="HTML file to write (default: RUN_DIR/view.html, or DUMP.html)",
    )


def run(args: argparse.Namespace) -> int:
    from agentrl.observability.viewer import write_view

    began = time.perf_counter()
    path, sources = write_view(args.inputs, args.output)
    episodes = sum(len(s.episodes) for s in sources)
    size = path.stat().st_size / 1e6
    print(
        f"wrote {path} ({episodes} episodes, {size:.1f} MB, "
        f"{time.perf_counter() - began:.1f}s); open it in a browser"
    )
    if episodes == 0:
        print("no episodes dumped: train with --dump_rollouts N or eval with --output FILE")
    skipped = [error for s in sources for error in s.skipped]
    for error in skipped:
        print(f"agentrl view: skipped a damaged dump file: {error}", file=sys.stderr)
    if skipped:  # the page is written without them; exit 1, as score's skipped lines
        print(f"agentrl view: {len(skipped)} dump file(s) skipped", file=sys.stderr)
    return 1 if skipped else 0
