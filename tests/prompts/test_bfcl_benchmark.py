"""`agentrl eval --benchmark bfcl`: BFCL v4's single-turn categories played by agentrl and
scored by bfcl-eval's own checker (in ``.venv-bfcl``, made by ``scripts/bfcl_venv.sh``; the
end-to-end test is skipped without it), and the leaderboard's summary arithmetic."""

from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path

import pytest
from agentrl.assembly import bfcl
from agentrl.assembly.bfcl import (
    CATEGORIES,
    CHECKER_MODEL,
    bfcl_python,
    decoded_calls,
    run_checker,
    select_categories,
    summaries,
)
from agentrl.assembly.evaluation import EvalPolicy
from agentrl.cli import main as cli_main
from agentrl.config import resolve
from agentrl.errors import UsageError
from agentrl.tools import builtin_registry

from tests.fakes.engines import ScriptedEngine
from tests.fakes.function_calls import answer_text, first_value
from tests.fakes.repo import REPO

VENV = REPO / ".venv-bfcl"


def test_summaries_follow_the_leaderboards_unweighted_and_weighted_means() -> None:
    # Made-up accuracies and counts; the expected values are bfcl-eval's arithmetic
    # (eval_runner_helper.generate_leaderboard_csv): non-live AST is the unweighted mean of
    # simple (here simple_python alone), multiple, parallel and parallel_multiple; live AST
    # weighs each live category by its records.
    scores = {
        "simple_python": (0.5, 400),
        "multiple": (0.25, 200),
        "parallel": (0.75, 200),
        "parallel_multiple": (0.0, 200),
        "irrelevance": (0.9, 240),
        "live_simple": (0.5, 258),
        "live_multiple": (0.2, 1053),
        "live_parallel": (1.0, 16),
        "live_parallel_multiple": (0.25, 24),
        "live_irrelevance": (0.1, 884),
    }
    out = summaries(scores)
    assert out["non_live_ast"] == pytest.approx((0.5 + 0.25 + 0.75 + 0.0) / 4)
    live = (0.5 * 258 + 0.2 * 1053 + 1.0 * 16 + 0.25 * 24) / (258 + 1053 + 16 + 24)
    assert out["live_ast"] == pytest.approx(live)
    # Weighted, not the plain mean of the four (which would be 0.4875).
    assert abs(out["live_ast"] - (0.5 + 0.2 + 1.0 + 0.25) / 4) > 0.2
    # The irrelevance categories are in neither summary.
    assert summaries({**scores, "irrelevance": (0.0, 240), "live_irrelevance": (1.0, 9)}) == out


def test_a_summary_needs_all_its_categories() -> None:
    non_live = {
        c: (0.5, 10) for c in ("simple_python", "multiple", "parallel", "parallel_multiple")
    }
    assert summaries(non_live) == {"non_live_ast": 0.5}
    assert summaries({**non_live, "live_simple": (1.0, 3)}) == {"non_live_ast": 0.5}
    assert summaries({"irrelevance": (1.0, 240)}) == {}


def test_categories_are_named_one_by_one_or_by_group_in_bfcls_order() -> None:
    assert select_categories("all") == CATEGORIES
    assert select_categories("non_live") == (
        "simple_python",
        "multiple",
        "parallel",
        "parallel_multiple",
        "irrelevance",
    )
    assert select_categories("live_simple, simple_python,live") == (
        "simple_python",
        "live_simple",
        "live_multiple",
        "live_parallel",
        "live_parallel_multiple",
        "live_irrelevance",
    )
    with pytest.raises(UsageError, match=r"unknown category 'simple_java'.*groups: all"):
        select_categories("simple_python,simple_java")


def test_the_checker_gets_the_calls_read_and_not_the_refused_blocks() -> None:
    calls = [
        {"name": "f", "arguments": {"a": 1}, "canonical": True},
        {"name": "", "arguments": {}, "parse_error": "<tool_call>{", "canonical": False},
        {"name": "g", "arguments": {}, "canonical": False},
    ]
    assert decoded_calls(calls) == [{"f": {"a": 1}}, {"g": {}}]
    assert decoded_calls([]) == [] and decoded_calls(None) == []


def test_a_missing_bfcl_environment_is_one_line_naming_the_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli_main(
        [
            "eval",
            "--benchmark",
            "bfcl",
            "--bfcl_venv",
            str(tmp_path / "absent"),
            "--model",
            str(tmp_path / "model"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1
    assert "scripts/bfcl_venv.sh" in err[0] and str(tmp_path / "absent") in err[0]


@pytest.mark.slow
@pytest.mark.skipif(
    not (VENV / "bin" / "python").exists(),
    reason="no .venv-bfcl: bfcl-eval's environment (scripts/bfcl_venv.sh makes it; several "
    "GB, so `make test` does not)",
)
def test_bfcl_eval_scores_every_category_with_bfcls_checker(
    run_files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scores, episodes = tmp_path / "out" / "scores.json", tmp_path / "out" / "episodes.jsonl.gz"
    code = cli_main(
        [
            "eval",
            "--benchmark",
            "bfcl",
            "--bfcl_venv",
            str(VENV),
            "--bfcl_limit",
            "3",
            "--model",
            str(run_files / "model"),
            "--max_context_len",
            "512",
            "--eval_max_gen_len",
            "8",
            "--metrics_output",
            str(scores),
            "--output",
            str(episodes),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "SUBSET (--bfcl_limit)" in out and "disagrees with BFCL's checker on 0" in out
    result = json.loads(scores.read_text())
    assert result["subset"] is True and result["benchmark"] == "bfcl"
    assert list(result["categories"]) == list(CATEGORIES)
    for name, score in result["categories"].items():
        assert score["records"] == 3 and score["total"] > 3, name
        assert score["disagreements"] == 0 and score["accuracy"] == score["agentrl_valid"]
    assert set(result["summaries"]) == {"non_live_ast", "live_ast"}
    assert set(result["accuracy"]) == {*CATEGORIES, "non_live_ast", "live_ast"}
    with gzip.open(episodes, "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    assert len(records) == 3 * len(CATEGORIES)
    assert len({r["episode"] for r in records}) == len(records)
    for record in records:
        terms = record["reward_terms"]
        assert terms["bfcl/valid"] == terms["function_call/valid"]
        assert record["bfcl"]["category"] in CATEGORIES
    # The untrained model calls nothing: the irrelevance records are right, the rest wrong.
    irrelevant = [r for r in records if "irrelevance" in r["bfcl"]["category"]]
    assert all(r["reward_terms"]["bfcl/valid"] == 1.0 for r in irrelevant)


@pytest.mark.slow
@pytest.mark.skipif(not (VENV / "bin" / "python").exists(), reason="no .venv-bfcl")
def test_bfcls_checker_accepts_the_answers_and_refuses_other_calls(tmp_path: Path) -> None:
    python = bfcl_python(VENV)
    prepared = run_checker(python, "prepare", str(tmp_path), "--limit", "2")
    assert prepared["categories"]["live_parallel"] == [2, 16]
    entries = []
    for category in CATEGORIES:
        if "irrelevance" in category:
            records = (tmp_path / f"BFCL_v4_{category}.json").read_text().splitlines()
            for line in records:
                entries.append({"category": category, "id": json.loads(line)["id"], "calls": []})
            continue
        answers = (tmp_path / "possible_answer" / f"BFCL_v4_{category}.json").read_text()
        for line in answers.splitlines():
            answer = json.loads(line)
            calls = [
                {name: {k: first_value(v[0]) for k, v in args.items() if v[0] != ""}}
                for entry in answer["ground_truth"]
                for name, args in entry.items()
            ]
            entries.append({"category": category, "id": answer["id"], "calls": calls})
    wrong = [{**e, "calls": [{"no_such_function": {}}]} for e in entries]
    checked = run_checker(python, "check", request={"model": CHECKER_MODEL, "entries": entries})
    failed = [(e, v) for e, v in zip(entries, checked["verdicts"], strict=True) if not v["valid"]]
    assert not failed
    assert checked["accuracy"] == dict.fromkeys(CATEGORIES, 1.0)
    assert checked["summaries"] == {"non_live_ast": 1.0, "live_ast": 1.0}
    refused = run_checker(python, "check", request={"model": CHECKER_MODEL, "entries": wrong})
    assert not any(v["valid"] for v in refused["verdicts"])


@pytest.mark.slow
@pytest.mark.skipif(not (VENV / "bin" / "python").exists(), reason="no .venv-bfcl")
def test_answers_read_from_the_models_text_are_what_bfcl_scores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A scripted policy answers BFCL's records from their possible answers, except the second
    # record of each category: no call where calls are expected, a call where none is.
    python = bfcl_python(VENV)
    data = tmp_path / "data"
    run_checker(python, "prepare", str(data), "--limit", "3")
    replies: dict[str, str] = {}
    for category in CATEGORIES:
        records = [json.loads(line) for line in (data / f"BFCL_v4_{category}.json").open()]
        answers: dict[str, list] = {}
        if "irrelevance" not in category:
            path = data / "possible_answer" / f"BFCL_v4_{category}.json"
            answers = {a["id"]: a["ground_truth"] for a in map(json.loads, path.open())}
        for n, record in enumerate(records):
            truth = answers.get(record["id"], [])
            if n == 1:  # the wrong answer
                name = record["function"][0]["name"]
                truth = [] if truth else [{name: {}}]
            question = record["question"][0][-1]["content"]
            replies[question] = answer_text(truth)

    def answer(_turn: int, context: str) -> str:
        (reply,) = [text for question, text in replies.items() if question in context]
        return reply

    engine = ScriptedEngine(answer)
    engine.lock = threading.RLock()  # type: ignore[attr-defined]
    policy = EvalPolicy("scripted", engine.tokenizer, builtin_registry(), engine)
    monkeypatch.setattr(bfcl, "load_eval_policy", lambda _config, _log: policy)
    config = resolve(overrides={"eval_max_gen_len": 512, "max_context_len": 8192})
    result = bfcl.evaluate_bfcl(config, venv=VENV, limit=3, log=lambda _line: None)
    assert result.subset
    for name, score in result.categories.items():
        assert (score.records, score.disagreements) == (3, 0), name
        assert score.accuracy == pytest.approx(2 / 3), name
        assert score.agentrl_valid == pytest.approx(2 / 3), name
    assert result.summaries == pytest.approx({"non_live_ast": 2 / 3, "live_ast": 2 / 3})
    assert [r["reward_terms"]["bfcl/valid"] for r in result.records][:3] == [1.0, 0.0, 1.0]
