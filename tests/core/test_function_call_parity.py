"""The `function_call` reward's `valid` against bfcl-eval's own checker: the golden file it
generated (tests/data/gen_function_call_golden.py), and live when `.venv-bfcl` exists."""

from __future__ import annotations

import gzip
import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from agentrl.assembly.bfcl_checker import CATEGORIES as BFCL_CATEGORIES
from agentrl.rewards import score_function_calls

ROOT = Path(__file__).parents[2]
GOLDEN = ROOT / "tests" / "data" / "function_call_golden.jsonl.gz"
GENERATOR = ROOT / "tests" / "data" / "gen_function_call_golden.py"
BFCL_PYTHON = ROOT / ".venv-bfcl" / "bin" / "python"
REQUIRED_AGREEMENT = 0.995
CATEGORIES = set(BFCL_CATEGORIES)  # every single-turn AST category BFCL scores
KINDS = {
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
}


def _disagreements(records: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """(cases, one line per case where `valid` differs from the checker's verdict)."""
    rows, cases = [], []
    for record in records:
        for case in record["cases"]:
            rows.append(
                {
                    "tools": record["tools"],
                    "ground_truth": record["ground_truth"],
                    "completion": case["completion"],
                }
            )
            cases.append((record["category"], record["id"], case["kind"], case["valid"]))
    valid = score_function_calls(rows, tool_format="hermes").details["valid"]
    wrong = [
        f"{category} {rid} {kind}: checker {want}, agentrl {int(got)}"
        for (category, rid, kind, want), got in zip(cases, valid, strict=True)
        if int(got) != want
    ]
    return len(cases), wrong


def _check(records: list[dict[str, Any]]) -> None:
    n, wrong = _disagreements(records)
    agreement = 1 - len(wrong) / n
    assert agreement >= REQUIRED_AGREEMENT, (
        f"valid agrees with bfcl-eval on {agreement:.4%} of {n} cases; disagreements:\n"
        + "\n".join(wrong)
    )


def _golden() -> list[dict[str, Any]]:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_the_golden_file_covers_every_category_and_perturbation() -> None:
    records = _golden()
    assert {r["category"] for r in records} == CATEGORIES
    kinds = Counter((c["kind"], c["valid"]) for r in records for c in r["cases"])
    assert {kind for kind, _ in kinds} == KINDS
    # Both verdicts are well represented: the file tests rejections as much as acceptances.
    assert sum(n for (_, v), n in kinds.items() if v == 0) > 5000
    assert sum(n for (_, v), n in kinds.items() if v == 1) > 5000


def test_valid_agrees_with_the_checkers_golden_verdicts() -> None:
    _check(_golden())


@pytest.mark.skipif(
    not BFCL_PYTHON.exists(), reason="no .venv-bfcl (make it with scripts/bfcl_venv.sh)"
)
def test_valid_agrees_with_the_checker_run_live() -> None:
    out = subprocess.run(
        [str(BFCL_PYTHON), str(GENERATOR), "--limit", "25", "--out", "-"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert {r["category"] for r in records} == CATEGORIES
    _check(records)
