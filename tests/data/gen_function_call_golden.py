"""Generates tests/data/function_call_golden.jsonl.gz: bfcl-eval's own verdicts on calls.

Run with the interpreter of the bfcl-eval environment (``scripts/bfcl_venv.sh`` makes it),
never the project's: ``.venv-bfcl/bin/python tests/data/gen_function_call_golden.py``.

For every BFCL v4 single-turn AST record in Python (the categories in ``CATEGORIES``), the
ground truth is rendered as calls (the first acceptable value of each argument, optional
arguments left out) and perturbed in seeded ways (``KINDS``); each case's completion is the
calls as Hermes ``<tool_call>`` JSON, and ``valid`` is what bfcl-eval's checker says of the
same calls as structured data, under the checker's model ``MODEL``. One output line per
record: ``{"category", "id", "tools", "ground_truth", "cases": [{"kind", "completion",
"valid"}]}`` (no ground truth for the irrelevance categories: ``[]``, the right answer is no
call). Do not edit the output by hand; rerun this script.

``--limit N`` keeps the first N records per category and ``--out -`` writes plain JSON lines
to stdout (the live parity test uses both).
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import random
import sys
from pathlib import Path
from typing import Any

from bfcl_eval.constants.enums import Language
from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
from bfcl_eval.utils import is_empty_output, is_function_calling_format_output

# The categories as agentrl's BFCL checker names them (that file imports bfcl-eval and the
# standard library only, so this environment runs it too).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "agentrl" / "assembly"))
from bfcl_checker import AST as AST_CATEGORIES
from bfcl_checker import CATEGORIES
from bfcl_checker import IRRELEVANCE as IRRELEVANCE_CATEGORIES

MODEL = "gorilla-openfunctions-v2"
KINDS = (
    "truth",
    "alternative",
    "wrong_value",
    "missing_required",
    "extra_arg",
    "swapped_function",
    "reordered",
    "int_float",
    "string_case",
    "string_space",
    "no_call",
    "call",
)
SEED = 20261207
DATA = Path(__file__).resolve().parent / "function_call_golden.jsonl.gz"


def data_dir() -> Path:
    import bfcl_eval

    return Path(bfcl_eval.__file__).parent / "data"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def render(calls: list[dict[str, dict[str, Any]]]) -> str:
    """Calls as Hermes blocks, one per line."""
    blocks = []
    for call in calls:
        ((name, args),) = call.items()
        body = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
        blocks.append(f"<tool_call>\n{body}\n</tool_call>")
    return "\n".join(blocks)


def answer_calls(truth: list[dict[str, Any]], pick: str) -> list[dict[str, dict[str, Any]]]:
    """One call per expected call: each argument's first (or last) acceptable value,
    arguments that may be left out left out."""
    calls = []
    for expected in truth:
        ((name, args),) = expected.items()
        chosen = {}
        for arg, values in args.items():
            options = [v for v in values if v != ""]
            if "" in values or not options:
                continue
            chosen[arg] = options[0] if pick == "first" else options[-1]
        calls.append({name: chosen})
    return calls


def perturb_value(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.randint(1, 9)
    if isinstance(value, float):
        return value + 1.5
    if isinstance(value, str):
        return value + "zq"
    if isinstance(value, list):
        return [*value, value[0]] if value else ["zq"]
    if isinstance(value, dict):
        return {**value, "zq": 1}
    return "zq"


def first_arg(calls: list[dict[str, dict[str, Any]]], test) -> tuple[int, str] | None:
    for i, call in enumerate(calls):
        ((_, args),) = call.items()
        for arg, value in args.items():
            if test(value):
                return i, arg
    return None


def set_arg(calls, where, value):
    out = copy.deepcopy(calls)
    i, arg = where
    ((_, args),) = out[i].items()
    args[arg] = value
    return out


def variant(kind: str, record: dict[str, Any], truth: list, rng: random.Random):
    """The calls of one perturbation, or None when it does not apply to the record."""
    functions = record["function"]
    if not truth:  # irrelevance: the right answer is no call
        if kind == "no_call":
            return []
        if kind == "call" and functions:
            f = functions[0]
            required = f.get("parameters", {}).get("required", [])
            return [{f["name"]: {name: "x" for name in required}}]
        return None
    base = answer_calls(truth, "first")
    if kind == "truth":
        return base
    if kind == "alternative":
        alt = answer_calls(truth, "last")
        return alt if alt != base else None
    if kind == "no_call":
        return []
    if kind == "call":
        return None
    if kind == "wrong_value":
        where = first_arg(base, lambda v: True)
        if where is None:
            return None
        value = base[where[0]][next(iter(base[where[0]]))][where[1]]
        return set_arg(base, where, perturb_value(value, rng))
    if kind == "missing_required":
        for i, call in enumerate(base):
            ((name, args),) = call.items()
            spec = next((f for f in functions if f["name"] == name), None)
            required = (spec or {}).get("parameters", {}).get("required", [])
            present = [a for a in required if a in args]
            if present:
                out = copy.deepcopy(base)
                del out[i][name][rng.choice(present)]
                return out
        return None
    if kind == "extra_arg":
        out = copy.deepcopy(base)
        ((_, args),) = out[rng.randrange(len(out))].items()
        args["unexpected_option"] = rng.choice([1, "yes", True])
        return out
    if kind == "swapped_function":
        out = copy.deepcopy(base)
        i = rng.randrange(len(out))
        ((name, args),) = out[i].items()
        others = [f["name"] for f in functions if f["name"] != name]
        out[i] = {rng.choice(others) if others else name + "_v2": args}
        return out
    if kind == "reordered":
        return list(reversed(base)) if len(base) > 1 else None
    if kind == "int_float":
        where = first_arg(base, lambda v: isinstance(v, int | float) and not isinstance(v, bool))
        if where is None:
            return None
        value = base[where[0]][next(iter(base[where[0]]))][where[1]]
        if isinstance(value, int):
            return set_arg(base, where, float(value))
        return set_arg(base, where, int(value) if value == int(value) else value * 2)
    if kind in ("string_case", "string_space"):
        where = first_arg(base, lambda v: isinstance(v, str) and v.strip() != "")
        if where is None:
            return None
        value = base[where[0]][next(iter(base[where[0]]))][where[1]]
        if kind == "string_case":
            changed = value.upper() if value != value.upper() else value.lower()
        else:
            changed = " " + value.replace(" ", "  ") + (" " if rng.random() < 0.5 else "\t")
        return set_arg(base, where, changed)
    raise ValueError(kind)


def verdict(category: str, record: dict[str, Any], truth: list, calls: list) -> bool | None:
    """bfcl-eval's verdict; None when its checker raises on the case."""
    if category in IRRELEVANCE_CATEGORIES:
        return bool(is_empty_output(calls))
    if not is_function_calling_format_output(calls):
        return False
    try:
        result = ast_checker(record["function"], calls, truth, Language.PYTHON, category, MODEL)
    except Exception:  # the checker's own failures (an unknown type name, ...)
        return None
    return bool(result["valid"])


def generate(limit: int | None) -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    root = data_dir()
    out = []
    for category in CATEGORIES:
        records = read_jsonl(root / f"BFCL_v4_{category}.json")
        answers: dict[str, list] = {}
        if category in AST_CATEGORIES:
            answers = {
                a["id"]: a["ground_truth"]
                for a in read_jsonl(root / "possible_answer" / f"BFCL_v4_{category}.json")
            }
        for record in records[:limit]:
            truth = answers.get(record["id"], [])
            cases = []
            for kind in KINDS:
                calls = variant(kind, record, truth, rng)
                if calls is None:
                    continue
                valid = verdict(category, record, truth, calls)
                if valid is None:
                    continue
                cases.append({"kind": kind, "completion": render(calls), "valid": int(valid)})
            out.append(
                {
                    "category": category,
                    "id": record["id"],
                    "tools": record["function"],
                    "ground_truth": truth,
                    "cases": cases,
                }
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help="records per category (default: all)")
    parser.add_argument("--out", default=str(DATA), help="output path (.gz), or - for stdout")
    args = parser.parse_args()
    lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in generate(args.limit)]
    if args.out == "-":
        sys.stdout.writelines(lines)
        return
    with gzip.open(args.out, "wt", encoding="utf-8", compresslevel=9) as f:
        f.writelines(lines)
    cases = sum(len(json.loads(line)["cases"]) for line in lines)
    print(f"{len(lines)} records, {cases} cases -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
