"""BFCL's own data files (the ``bfcl-eval`` package in ``.venv-bfcl``, made by
``scripts/bfcl_venv.sh``) through the prompt pool: every single-turn AST record is read, and
the tools the model sees give the ``function_call`` reward the verdict BFCL's own function
docs give. Skipped where that environment does not exist."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentrl.data import PromptPool
from agentrl.rewards.function_call import score_function_calls

from tests.fakes.function_calls import answer_text
from tests.fakes.repo import REPO

DATA = next((REPO / ".venv-bfcl" / "lib").glob("python3*/site-packages/bfcl_eval/data"), None)
PYTHON_AST = {
    "simple_python": 400,
    "multiple": 200,
    "parallel": 200,
    "parallel_multiple": 200,
    "live_simple": 258,
    "live_multiple": 1053,
    "live_parallel": 16,
    "live_parallel_multiple": 24,
    "irrelevance": 240,
    "live_irrelevance": 884,
}


@pytest.mark.slow
@pytest.mark.skipif(DATA is None, reason="no .venv-bfcl (make it with scripts/bfcl_venv.sh)")
@pytest.mark.parametrize("category", sorted(PYTHON_AST))
def test_bfcl_records_read_whole_and_score_as_with_bfcls_docs(category: str) -> None:
    assert DATA is not None
    path = Path(DATA) / f"BFCL_v4_{category}.json"
    pool = PromptPool(str(path), require_gt=False, strict=True)
    assert len(pool) == PYTHON_AST[category] and pool.data_formats == {"bfcl": len(pool)}
    if "irrelevance" not in category:
        assert "possible_answer" in pool.notes[0]
    seen, original = [], []
    for sample in pool:
        text = answer_text(sample["ground_truth"])
        truth = sample["ground_truth"]
        seen.append({"tools": sample.tools, "ground_truth": truth, "completion": text})
        original.append(
            {"tools": sample["function_docs"], "ground_truth": truth, "completion": text}
        )
    converted = score_function_calls(seen).details["valid"]
    assert list(converted) == list(score_function_calls(original).details["valid"])
    assert converted.mean() > 0.98  # the answers themselves pass (a few first values clash)
