"""BFCL's own side of `agentrl eval --benchmark bfcl`: run by the interpreter of the
bfcl-eval environment (``scripts/bfcl_venv.sh`` makes ``.venv-bfcl``), never imported by
agentrl, whose pins clash with bfcl-eval's. It imports bfcl-eval and the standard library
only.

``prepare DIR [--limit N]``
    writes each category's records as BFCL gives them to a model
    (``bfcl_eval.utils.load_dataset_entry``: the function docs with BFCL's language hint)
    to ``DIR/BFCL_v4_<category>.json`` and the possible answers to
    ``DIR/possible_answer/BFCL_v4_<category>.json`` (the first N records of each, all by
    default); prints ``{"version", "categories": {category: [records written, records in
    the category]}}`` to ``--result``.
``check``
    reads ``{"model": NAME, "entries": [{"category", "id", "calls"}]}`` on stdin, ``calls``
    being the model's decoded calls (``[{name: {argument: value}}]``), and prints
    ``{"verdicts": [{"valid", "error"}], "accuracy": {category: ...}, "summaries": {...}}``
    to ``--result``:
    each verdict as ``bfcl_eval/eval_checker/eval_runner.py`` gives it
    (``_evaluate_single_ast_entry`` after its decoding, ``_evaluate_single_relevance_entry``
    for the irrelevance categories), each category's accuracy as its ``save_eval_results``
    computes it, and the summaries with its own ``calculate_unweighted_accuracy`` /
    ``calculate_weighted_accuracy`` (``eval_runner_helper.generate_leaderboard_csv``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
from pathlib import Path
from typing import Any

AST = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
IRRELEVANCE = ("irrelevance", "live_irrelevance")
CATEGORIES = AST + IRRELEVANCE
VERSION_PREFIX = "BFCL_v4"


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def prepare(out: Path, limit: int | None) -> dict[str, Any]:
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    counts = {}
    for category in CATEGORIES:
        entries = load_dataset_entry(category)
        kept = entries[:limit] if limit is not None else entries
        write_jsonl(out / f"{VERSION_PREFIX}_{category}.json", kept)
        if category in AST:
            answers = {a["id"]: a for a in load_ground_truth_entry(category)}
            rows = [answers[e["id"]] for e in kept]
            write_jsonl(out / "possible_answer" / f"{VERSION_PREFIX}_{category}.json", rows)
        counts[category] = [len(kept), len(entries)]
    return {"version": importlib.metadata.version("bfcl-eval"), "categories": counts}


def verdict(category: str, entry: dict[str, Any], answer: Any, calls: Any, model: str) -> dict:
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    from bfcl_eval.utils import is_empty_output, is_function_calling_format_output

    if category in IRRELEVANCE:  # no call: what the model wrote decodes to no call
        valid = bool(is_empty_output(calls))
        return {"valid": valid, "error": None if valid else "irrelevance_error:decoder_success"}
    if not is_function_calling_format_output(calls):
        return {"valid": False, "error": "ast_decoder:decoder_wrong_output_format"}
    try:
        result = ast_checker(entry["function"], calls, answer, Language.PYTHON, category, model)
    except Exception as e:  # eval_runner does not catch these: its whole run would stop
        return {"valid": False, "error": f"checker_raised:{type(e).__name__}: {e}"[:300]}
    valid = bool(result["valid"])
    return {"valid": valid, "error": None if valid else result.get("error_type")}


def check(request: dict[str, Any]) -> dict[str, Any]:
    from bfcl_eval.eval_checker.eval_runner_helper import (
        calculate_unweighted_accuracy,
        calculate_weighted_accuracy,
    )
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    entries: dict[str, dict[str, Any]] = {}
    answers: dict[str, Any] = {}
    wanted = {e["category"] for e in request["entries"]}
    for category in sorted(wanted):
        # As the checker reads them: no language hint (eval_runner.evaluate_task).
        for e in load_dataset_entry(
            category, include_prereq=False, include_language_specific_hint=False
        ):
            entries[e["id"]] = e
        if category in AST:
            answers.update({a["id"]: a["ground_truth"] for a in load_ground_truth_entry(category)})
    verdicts = []
    tally: dict[str, list[int]] = {}
    for item in request["entries"]:
        category, key = item["category"], item["id"]
        one = verdict(category, entries[key], answers.get(key), item["calls"], request["model"])
        verdicts.append(one)
        counts = tally.setdefault(category, [0, 0])
        counts[0] += int(one["valid"])
        counts[1] += 1
    # save_eval_results: accuracy = correct_count / len(model_result).
    score = {
        c: {"accuracy": right / total, "total_count": total, "display_accuracy": right / total}
        for c, (right, total) in tally.items()
    }
    summaries = {}
    if all(c in score for c in ("simple_python", "multiple", "parallel", "parallel_multiple")):
        # The leaderboard's simple group also averages simple_java and simple_javascript;
        # only Python's is scored here.
        simple = calculate_unweighted_accuracy([score["simple_python"]])
        groups = [simple, score["multiple"], score["parallel"], score["parallel_multiple"]]
        summaries["non_live_ast"] = calculate_unweighted_accuracy(groups)["accuracy"]
    live = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
    if all(c in score for c in live):
        summaries["live_ast"] = calculate_weighted_accuracy([score[c] for c in live])["accuracy"]
    return {
        "verdicts": verdicts,
        "accuracy": {c: s["accuracy"] for c, s in score.items()},
        "summaries": summaries,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare")
    prep.add_argument("out")
    prep.add_argument("--limit", type=int, default=None)
    checking = sub.add_parser("check")
    for command in (prep, checking):  # not stdout: bfcl-eval's imports may print there
        command.add_argument("--result", required=True, help="write the answer here (JSON)")
    args = parser.parse_args()
    if args.command == "prepare":
        result = prepare(Path(args.out), args.limit)
    else:
        result = check(json.load(sys.stdin))
    Path(args.result).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
