"""Throughput of the Rust text core against the reference Python implementation, in one run.

Each row times one function on one input set and, when the reference implementation is
present beside the checkout (`../shared/seeds/000_*.txt`, loaded by
`reference_baseline.load_reference`), its equivalent on the same inputs, and prints the
speed-up (reference time / agentrl time per unit of work: characters for text, calls for
numbers). The reference is superlinear on some adversarial inputs, so those rows time it on
a prefix (`ref_cap`); its per-character rate on the full 1 MB input would be worse than the
one printed, so those ratios understate the gap.

Add a row by appending a `Row` to the list a `*_rows` function returns (one function per
area; `build_rows` collects them). Run with `make bench` or
`.venv/bin/python benches/bench_parsing.py [--quick]`. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agentrl import parsing
from reference_baseline import absent_message, load_reference

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
MB = 1_000_000


@dataclass
class Row:
    """One measurement: `ours` (agentrl) and the reference function `ref_name` on `inputs`."""

    area: str
    name: str
    ours: Callable[[Any], object]
    inputs: Sequence[Any]
    ref_name: str | None = None
    # The reference sees each input cut to this many characters (it is superlinear there).
    ref_cap: int | None = None
    # Adapts the reference function's call (e.g. to pass extra arguments).
    ref_call: Callable[[Callable[..., object], Any], object] | None = None
    # A plain-Python baseline to time instead of a reference function (for functions the
    # reference has no equivalent of); it is used whether or not the reference is present.
    baseline: Callable[[Any], object] | None = None


def work(items: Sequence[Any]) -> int:
    """Units of work: characters for strings, one per call otherwise."""
    return sum(len(x) if isinstance(x, str) else 1 for x in items)


def seconds_per_pass(
    function: Callable[[Any], object], items: Sequence[Any], budget: float
) -> float:
    """Best time of one pass over `items`, repeating for about `budget` seconds."""
    best = math.inf
    spent = 0.0
    runs = 0
    while runs == 0 or (spent < budget and runs < 1000):
        start = time.perf_counter()
        for item in items:
            # The reference raises assorted exceptions on invalid input; only the time matters.
            # (A bare try is cheaper than contextlib.suppress in this hot loop.)
            try:  # noqa: SIM105
                function(item)
            except Exception:
                pass
        elapsed = time.perf_counter() - start
        best = min(best, elapsed)
        spent += elapsed
        runs += 1
    return best


def rate(units: int, seconds: float) -> str:
    per_second = units / seconds if seconds > 0 else math.inf
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if per_second >= scale:
            return f"{per_second / scale:7.1f} {suffix}"
    return f"{per_second:7.1f}  "


def load_corpus() -> list[dict[str, Any]]:
    with (DATA / "expressions.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def adversarial_texts() -> dict[str, tuple[str, int | None]]:
    """1 MB hostile inputs, with the prefix length the reference is timed on (None = all)."""
    return {
        "operator chain + letter": ("1+" * (MB // 2) + "1x", None),
        # Every position of the run restarts \d+ and backtracks through the rest: quadratic.
        "unicode digit run": ("\u0663" * MB, 2_000),
        "unicode digit chain": ("\u0663+" * (MB // 2), None),
        "nested open parens": ("(" * MB, None),
        "unclosed sqrt( calls": ("sqrt(1+" * (MB // 7), None),
        "long whitespace": ("1" + " " * MB + "+", None),
        "many small expressions": ("1+1 " * (MB // 4), None),
        "chinese prose": ("请计算这个结果" * (MB // 7), None),
    }


def expression_rows(corpus: list[dict[str, Any]]) -> list[Row]:
    texts = [row["text"] for row in corpus]
    document = "\n".join(texts * 20)  # one long realistic document
    values = [float(row["eval"]) for row in corpus if "eval" in row]
    extracted = [e for row in corpus for e in row["extracted"]]
    rows = [
        Row(
            "expr",
            "extract / golden texts",
            parsing.extract_expressions,
            texts,
            "extract_arithmetic_expressions",
        ),
        Row(
            "expr",
            "extract / one long document",
            parsing.extract_expressions,
            [document],
            "extract_arithmetic_expressions",
        ),
        Row(
            "expr",
            "canonicalize / golden texts",
            parsing.canonicalize_expression,
            texts,
            "canonicalize_expression",
        ),
        Row("expr", "safe_eval / golden texts", parsing.safe_eval, texts, "safe_eval_math"),
        Row("expr", "safe_eval / extracted exprs", parsing.safe_eval, extracted, "safe_eval_math"),
        Row(
            "expr", "format_number / golden values", parsing.format_number, values, "format_number"
        ),
    ]
    for name, (text, cap) in adversarial_texts().items():
        rows.append(
            Row(
                "expr",
                f"extract / 1 MB {name}",
                parsing.extract_expressions,
                [text],
                "extract_arithmetic_expressions",
                ref_cap=cap,
            )
        )
    rows.append(
        Row(
            "expr",
            "safe_eval / 1 MB operator chain",
            parsing.safe_eval,
            ["1+" * (MB // 2) + "1"],
            "safe_eval_math",
        )
    )
    return rows


def load_tool_call_texts() -> list[str]:
    with (DATA / "tool_calls.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh if line.strip()]


def toolcall_rows() -> list[Row]:
    texts = load_tool_call_texts()
    small_call = '<tool_call>{"name":"calculate_math","arguments":{"expression":"1+1"}}</tool_call>'
    # (text, prefix the reference is timed on): its regex and paren scan restart at every
    # unclosed tag or call, so it is quadratic on those.
    adversarial = {
        "unclosed tags": ("<tool_call>" * (MB // 11), 20_000),
        "open calculate_math(": ("calculate_math(" * (MB // 15), 8_000),
        'open calculate_math("': ('calculate_math("' * (MB // 16), 8_000),
        "nested ( after call": ("calculate_math(" + "(" * MB, None),
        "deep [[[ in a tag": ("<tool_call>" + "[" * MB + "</tool_call>", None),
        "long string arg": (
            '<tool_call>{"name":"f","arguments":{"s":"' + "a" * MB + '"}}</tool_call>',
            None,
        ),
        "many small calls": (small_call * (MB // len(small_call)), None),
    }
    rows = [
        Row(
            "tool",
            "parse_tool_calls / golden texts",
            parsing.parse_tool_calls,
            texts,
            "parse_tool_calls",
        ),
    ]
    for name, (text, cap) in adversarial.items():
        rows.append(
            Row(
                "tool",
                f"parse_tool_calls / 1 MB {name}",
                parsing.parse_tool_calls,
                [text],
                "parse_tool_calls",
                ref_cap=cap,
            )
        )
    return rows


_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def regex_json_calls(text: str) -> list[dict[str, Any]]:
    """The plain Python way: a non-greedy regex for the blocks, `json.loads` on each."""
    calls = []
    for body in _TOOL_CALL_BLOCK.findall(text):
        try:
            obj = json.loads(body)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("name"), str):
            arguments = obj.get("arguments", {})
            if isinstance(arguments, str):
                arguments = json.loads(arguments)
            calls.append({"name": obj["name"], "arguments": arguments})
    return calls


def two_call_messages(count: int = 200) -> list[str]:
    """Typical model turns: reasoning, a sentence, two calls, a closing sentence."""
    cities = ["Paris", "東京", "São Paulo", "Zürich", "北京", "New York"]
    messages = []
    for i in range(count):
        a, b = cities[i % len(cities)], cities[(i * 7 + 3) % len(cities)]
        first = {"name": "get_weather", "arguments": {"city": a, "unit": "celsius", "days": i % 5}}
        second = {"name": "calculate_math", "arguments": {"expression": f"({i}+17)*3/{i % 9 + 1}"}}
        messages.append(
            f"<think>\nThe user wants the weather in {a} and {b}, and a sum. I will call "
            f"get_weather, then calculate_math.\n</think>\n\nLet me check that for you.\n"
            f"<tool_call>\n{json.dumps(first, ensure_ascii=False)}\n</tool_call>\n"
            f"<tool_call>\n{json.dumps(second, ensure_ascii=False)}\n</tool_call>\n"
            "I will report back once both results are in."
        )
    return messages


def message_rows() -> list[Row]:
    declared = ["get_weather", "calculate_math"]
    ours = partial(parsing.parse_message, tools=declared)
    return [
        Row(
            "msg",
            "parse_message / typical two-call turns",
            ours,
            two_call_messages(),
            baseline=regex_json_calls,
        ),
        Row(
            "msg",
            "parse_message / 1 MB unclosed <tool_call>{",
            ours,
            ["<tool_call>{" * (MB // 12)],
            ref_cap=20_000,
            baseline=regex_json_calls,
        ),
    ]


def build_rows(corpus: list[dict[str, Any]]) -> list[Row]:
    return expression_rows(corpus) + toolcall_rows() + message_rows()


def run(rows: list[Row], reference: dict[str, Any] | None, budget: float) -> None:
    print(f"{'area':6} {'benchmark':44} {'agentrl /s':>10} {'ref /s':>10} {'speed-up':>9}  note")
    for row in rows:
        ours = seconds_per_pass(row.ours, row.inputs, budget)
        units = work(row.inputs)
        line = f"{row.area:6} {row.name:44} {rate(units, ours):>10}"
        ref_function = reference.get(row.ref_name) if reference and row.ref_name else None
        if row.baseline is not None:
            ref_function = row.baseline
        if ref_function is None:
            print(f"{line} {'-':>10} {'-':>9}  no reference baseline")
            continue
        ref_inputs = row.inputs
        note = ""
        if row.ref_cap is not None:
            ref_inputs = [x[: row.ref_cap] if isinstance(x, str) else x for x in row.inputs]
            if work(ref_inputs) < units:
                note = f"reference timed on a {row.ref_cap:,}-char prefix (superlinear beyond)"
        if row.baseline is not None:
            note = "; ".join(
                filter(None, ["baseline column: plain regex + json.loads, not the reference", note])
            )
        function = ref_function if row.ref_call is None else partial(row.ref_call, ref_function)
        theirs = seconds_per_pass(function, ref_inputs, budget)
        ref_units = work(ref_inputs)
        speedup = (theirs / ref_units) / (ours / units)
        print(f"{line} {rate(ref_units, theirs):>10} {speedup:8.1f}x  {note}")
        sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter timing per row")
    args = parser.parse_args(argv)
    # Parsing the reference file warns about literals such as "1if"; the warnings are noise here.
    warnings.simplefilter("ignore", SyntaxWarning)
    reference = load_reference()
    if reference is None:
        print(absent_message())
    else:
        print("baseline: the reference functions, loaded from ../shared/seeds (same process)")
    print("rates are characters per second for text rows, calls per second for numbers\n")
    run(build_rows(load_corpus()), reference, budget=0.2 if args.quick else 1.0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
