"""The `function_call` reward against a Python loop over BFCL's own checker, same run.

Builds N lines (100,000 by default) of ``tools``, ``ground_truth`` and ``completion`` by
cycling the cases of tests/data/function_call_golden.jsonl.gz (every BFCL v4 single-turn
AST category in Python, the ground truth and its perturbations). Then:

- agentrl, records: `agentrl.rewards.score_function_calls` on the cases already decoded
  into dicts (as the trainer calls it; the rows of one BFCL record share their ``tools`` and
  ``ground_truth`` objects, converted once), reading the calls from the completion text,
  checking them and computing the graded terms;
- agentrl, JSON lines: `agentrl.rewards.score_function_call_lines` on the text lines, 8,192
  at a time (JSON decoding of every line, its tools included, then the same work; no
  output lines rendered), as `agentrl score` reads them;

  each for each thread count (1 and all cores by default), in wall seconds;
- BFCL: in the bfcl-eval environment (``.venv-bfcl``, made by scripts/bfcl_venv.sh), a
  Python loop calling ``ast_checker`` (and the irrelevance check) on the same cases:
  "records", given the lines and their calls already decoded (its calls structured, where
  agentrl reads them from the text, so this ratio favours it); "JSON lines", decoding each
  line with ``json.loads`` and its Hermes calls with a regular expression first.

Each figure is the best of ``--repeat`` runs (3), as the machine may be shared; wall-clock
rates depend on the load, CPU-time rates (lines per CPU second of this process, or of the
BFCL child) much less, and are printed beside them (with several threads the CPU rate sums
the threads' time). It prints lines per second for each and the ratios. Run:
``.venv/bin/python benches/bench_function_call.py [--lines N] [--threads 1,2]``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "function_call_golden.jsonl.gz"
BFCL_PYTHON = ROOT / ".venv-bfcl" / "bin" / "python"

# Runs in the bfcl-eval environment: reads the cases, decodes their calls, then times the
# checker over them; prints {"seconds", "valid"}.
BFCL_LOOP = r"""
import json, re, sys, time
from bfcl_eval.constants.enums import Language
from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
from bfcl_eval.utils import is_empty_output, is_function_calling_format_output

BLOCK = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.S)
MODEL = "gorilla-openfunctions-v2"


def decode(line):
    row = json.loads(line)
    calls = []
    for body in BLOCK.findall(row["completion"]):
        call = json.loads(body)
        calls.append({call["name"]: call["arguments"]})
    return row["category"], row["tools"], row["ground_truth"], calls


def check(case):
    category, tools, truth, calls = case
    if "irrelevance" in category:
        return bool(is_empty_output(calls))
    if not is_function_calling_format_output(calls):
        return False
    try:
        return bool(ast_checker(tools, calls, truth, Language.PYTHON, category, MODEL)["valid"])
    except Exception:
        return False


with open(sys.argv[1], encoding="utf-8") as f:
    lines = f.read().splitlines()
cases = [decode(line) for line in lines]
out = {}
for mode, run in (
    ("records", lambda: sum(check(c) for c in cases)),
    ("lines", lambda: sum(check(decode(line)) for line in lines)),
):
    best, best_cpu = float("inf"), float("inf")
    for _ in range(int(sys.argv[2])):
        start, start_cpu = time.perf_counter(), time.process_time()
        valid = run()
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - start_cpu)
    out[mode] = {"seconds": best, "cpu": best_cpu, "valid": valid}
print(json.dumps(out))
"""


def build_lines(n: int) -> list[str]:
    cases = []
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            for case in record["cases"]:
                row = {
                    "category": record["category"],
                    "tools": record["tools"],
                    "ground_truth": record["ground_truth"],
                    "completion": case["completion"],
                }
                cases.append(json.dumps(row, ensure_ascii=False))
    return [cases[i % len(cases)] for i in range(n)]


CHUNK = 8192


def time_lines(lines: list[str], threads: int) -> tuple[float, int]:
    from agentrl.rewards import score_function_call_lines

    encoded = [line.encode("utf-8") for line in lines]
    valid = 0
    start, start_cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(encoded), CHUNK):
        scored = score_function_call_lines(encoded[i : i + CHUNK], threads=threads, render=False)
        valid += int(scored.scores.details["valid"].sum())
    return time.perf_counter() - start, time.process_time() - start_cpu, valid


def time_records(lines: list[str], threads: int) -> tuple[float, int]:
    from agentrl.rewards import score_function_calls

    shared: dict[str, tuple] = {}
    rows = []
    for line in lines:
        row = json.loads(line)
        key = json.dumps([row["tools"], row["ground_truth"]])
        tools, truth = shared.setdefault(key, (row["tools"], row["ground_truth"]))
        rows.append({"tools": tools, "ground_truth": truth, "completion": row["completion"]})
    valid = 0
    start, start_cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(rows), CHUNK):
        scores = score_function_calls(rows[i : i + CHUNK], threads=threads)
        valid += int(scores.details["valid"].sum())
    return time.perf_counter() - start, time.process_time() - start_cpu, valid


def best_of(repeat: int, timer, *args) -> tuple[float, float, int]:
    """The fastest wall and CPU seconds of ``repeat`` runs (the machine may be shared),
    and the count of valid rows."""
    runs = [timer(*args) for _ in range(repeat)]
    return min(r[0] for r in runs), min(r[1] for r in runs), runs[0][2]


def time_bfcl(path: Path, repeat: int) -> dict[str, tuple[float, float, int]] | None:
    if not BFCL_PYTHON.exists():
        return None
    out = subprocess.run(
        [str(BFCL_PYTHON), "-c", BFCL_LOOP, str(path), str(repeat)],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        mode: (float(r["seconds"]), float(r["cpu"]), int(r["valid"])) for mode, r in result.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--threads", default=f"1,{os.cpu_count() or 1}")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs each")
    args = parser.parse_args()
    lines = build_lines(args.lines)
    size = sum(map(len, lines)) / 1e6
    print(f"{args.lines} lines, {size:.1f} MB, {os.cpu_count()} CPUs ({platform.machine()})")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cases.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        bfcl = time_bfcl(path, args.repeat)
    rates: dict[tuple[str, int], tuple[float, float]] = {}
    for threads in sorted({int(t) for t in args.threads.split(",")}):
        for mode, timer in (("records", time_records), ("JSON lines", time_lines)):
            wall, cpu, valid = best_of(args.repeat, timer, lines, threads)
            rates[(mode, threads)] = (args.lines / wall, args.lines / cpu)
            print(
                f"agentrl, {mode}, {threads} thread(s): {wall:.2f} s, "
                f"{args.lines / wall:,.0f} lines/s, {args.lines / cpu:,.0f} lines/CPU-s "
                f"({valid} valid)"
            )
    if bfcl is None:
        print("BFCL loop: skipped (no .venv-bfcl; make it with scripts/bfcl_venv.sh)")
        return
    theirs = {}
    for mode, label in (("records", "records"), ("lines", "JSON lines")):
        wall, cpu, valid = bfcl[mode]
        theirs[label] = (args.lines / wall, args.lines / cpu)
        print(
            f"BFCL checker loop, {label}: {wall:.2f} s, {args.lines / wall:,.0f} lines/s, "
            f"{args.lines / cpu:,.0f} lines/CPU-s ({valid} valid)"
        )
    for (mode, threads), (mine, mine_cpu) in rates.items():
        rate, cpu_rate = theirs[mode]
        print(
            f"ratio agentrl/BFCL, {mode}, {threads} thread(s): {mine / rate:.1f}x wall, "
            f"{mine_cpu / cpu_rate:.1f}x CPU"
        )


if __name__ == "__main__":
    sys.exit(main())
