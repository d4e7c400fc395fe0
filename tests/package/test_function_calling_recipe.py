"""`make function-calling`'s parts without a model: the control gets the seconds RL's loop
took, a kept zero-shot result is reused only for the same recipe, and the table has a row
per stage and a line per BFCL category and summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.repo import BENCHES, load_bench


@pytest.fixture
def recipe(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(BENCHES))  # it imports real_model's helpers
    return load_bench("function_calling")


def test_by_default_every_record_of_the_non_live_categories_is_scored(recipe) -> None:
    args = recipe.parse_args([])
    assert args.bfcl_categories == "non_live" and args.bfcl_limit == 0
    assert args.rl_steps > 0 and args.sft_steps > 0 and not args.score_warm_start


def test_the_control_gets_the_time_of_rls_last_training_row(recipe, tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    rows = [
        {"step": 1, "kind": "train", "time": 31.5},
        {"step": 2, "kind": "train", "time": 64.25},
        {"step": 2, "kind": "eval", "time": 90.0},  # an evaluation is not training
    ]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert recipe.rl_seconds(metrics) == 64.25
    # The starting policy's evaluation, before the first step, is not training either.
    before = {"step": 0, "kind": "eval", "time": 20.0}
    metrics.write_text("".join(json.dumps(r) + "\n" for r in [before, *rows]))
    assert recipe.rl_seconds(metrics) == 44.25
    metrics.write_text(json.dumps(rows[2]) + "\n")
    with pytest.raises(SystemExit, match="no training step"):
        recipe.rl_seconds(metrics)


def test_the_sft_training_time_is_read_from_its_last_line(recipe, tmp_path: Path) -> None:
    log = tmp_path / "control.log"
    log.write_text(
        "setup 14.1s\nheld-out exact match: nan on 0 tasks (greedy, tool loop); 75 steps, "
        "training 812s, total 830s; model saved to runs/x/control\n"
    )
    assert recipe.training_seconds(log) == 812.0
    log.write_text("no such line\n")
    with pytest.raises(SystemExit, match="does not say"):
        recipe.training_seconds(log)


def test_a_zero_shot_result_is_reused_only_for_the_same_recipe(recipe, tmp_path: Path) -> None:
    args = recipe.parse_args([])
    scores = tmp_path / "bfcl_scores.json"
    assert recipe.reusable(scores, "m.gguf", args) is None
    kept = {
        "accuracy": {"simple_python": 0.0},
        "recipe": {
            "model": "m.gguf",
            "bfcl_categories": "non_live",
            "bfcl_limit": 0,
            "tool_format": "auto",
            "chat_template": "",
        },
    }
    scores.write_text(json.dumps(kept))
    assert recipe.reusable(scores, "m.gguf", args) == kept
    assert recipe.reusable(scores, "other.gguf", args) is None
    assert recipe.reusable(scores, "m.gguf", recipe.parse_args(["--bfcl_limit", "5"])) is None


def test_the_table_has_a_column_per_stage_and_a_line_per_category(recipe) -> None:
    row = {"simple_python": 0.5, "irrelevance": 0.75, "non_live_ast": 0.25}
    summary = {
        "seed": 7,
        "bfcl_eval_version": "2026.3.23",
        "subset": False,
        "zero_shot": {k: 0.0 for k in row},
        "sft_control": row,
        "rl": {**row, "simple_python": 0.625},
        "seconds": {"rl_training": 600.0, "sft_control_training": 604.0},
    }
    lines = recipe.table(summary)
    assert "seed 7" in lines[0] and "SUBSET" not in lines[0]
    assert lines[1].split() == ["BFCL", "category", "zero_shot", "sft_control", "rl"]
    assert lines[2].split() == ["simple_python", "0.00%", "50.00%", "62.50%"]
    assert lines[4].split()[0] == "non_live_ast"
    assert lines[-1] == "RL trained 600s; the SFT control 604s"
    assert "SUBSET" in recipe.table({**summary, "subset": True})[0]
