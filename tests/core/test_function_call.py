"""The `function_call` reward: scoring, settings, the reward-function API, metrics, `score`."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from agentrl import _core
from agentrl.cli import main
from agentrl.rewards import (
    RewardConfig,
    combine,
    reward_functions,
    score_function_call_lines,
    score_function_calls,
)
from agentrl.rewards.function_call import (
    DETAIL_KEYS,
    TERM_KEYS,
    WEIGHT_SETTINGS,
    FunctionCallReward,
)
from agentrl.training.scoring import reward_set, score_trajectories

from tests.fakes.trajectories import column_trajectory

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    },
    {"name": "get_time", "parameters": {"type": "dict", "properties": {}, "required": []}},
]
TRUTH = [{"get_weather": {"city": ["Paris"], "days": [3, ""]}}]
RIGHT = '<tool_call>{"name": "get_weather", "arguments": {"city": "paris"}}</tool_call>'
WRONG_CITY = '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>'


def _score(completion: str, truth=TRUTH, **kwargs):
    rows = [{"tools": TOOLS, "ground_truth": truth, "completion": completion}]
    return score_function_calls(rows, **kwargs).to_records()[0]


def test_a_right_call_is_valid_and_a_wrong_value_is_not() -> None:
    right, wrong = _score(RIGHT), _score(WRONG_CITY)
    assert right["valid"] == 1.0 and right["reward"] == pytest.approx(2.0)
    assert wrong["valid"] == 0.0
    assert (wrong["names"], wrong["arg_names"], wrong["values"]) == (1.0, 1.0, 0.0)
    assert wrong["reward"] == pytest.approx(1.0 * 0 + 0.2 + 0.2 + 0.0 + 0.2)


def test_no_call_is_right_when_the_truth_is_no_call() -> None:
    silent = _score("No function fits this request.", truth=[])
    assert (silent["valid"], silent["calls"], silent["no_call_expected"]) == (1.0, 0.0, 1.0)
    assert _score(RIGHT, truth=[])["valid"] == 0.0


def test_the_tool_format_picks_the_family_read() -> None:
    pythonic = "[get_weather(city='Paris')]"
    assert _score(pythonic)["valid"] == 1.0
    assert _score(pythonic, tool_format="hermes")["calls"] == 0.0
    with pytest.raises(ValueError, match="unknown tool format"):
        _score(pythonic, tool_format="nonesuch")


def test_weights_are_the_reward_settings_declared_once() -> None:
    defaults = RewardConfig().to_dict()
    assert set(WEIGHT_SETTINGS.values()) <= set(defaults)
    assert dict(zip(DETAIL_KEYS, [0] * len(DETAIL_KEYS), strict=True)).keys() >= set(TERM_KEYS)
    # The Rust core reads the same settings: a weight changed here changes its reward.
    config = RewardConfig().with_overrides(function_call_values_weight=5.0)
    assert _score(RIGHT, config=config)["reward"] == pytest.approx(2.0 - 0.4 + 5.0)
    assert _core.function_call_term_keys() == list(TERM_KEYS)


def test_malformed_records_name_the_record_and_the_field() -> None:
    with pytest.raises(ValueError, match=r"record 1: field \"ground_truth\""):
        score_function_calls(
            [
                {"tools": TOOLS, "ground_truth": TRUTH, "completion": RIGHT},
                {
                    "tools": TOOLS,
                    "ground_truth": [{"get_weather": {"city": "Paris"}}],
                    "completion": RIGHT,
                },
            ]
        )
    with pytest.raises(ValueError, match="completion"):
        score_function_calls([{"tools": TOOLS, "ground_truth": TRUTH}])


def test_lines_are_scored_in_rust_and_bad_lines_skipped_with_a_reason() -> None:
    good = json.dumps({"tools": TOOLS, "ground_truth": TRUTH, "completion": RIGHT, "n": 1})
    scored = score_function_call_lines([good, "", "{oops", json.dumps({"completion": "x"})])
    assert scored.outputs[1:] == [None, None, None]
    record = json.loads(scored.outputs[0] or "{}")
    assert record["n"] == 1 and record["details"]["valid"] == 1.0
    assert [i for i, _ in scored.skipped] == [2, 3]
    assert "invalid JSON" in scored.skipped[0][1] and "ground_truth" in scored.skipped[1][1]


def test_the_reward_function_reports_its_details_through_combine() -> None:
    def zero(completions, **_):
        return [0.0] * len(completions)

    reward = combine([*reward_functions("function_call"), zero], [1.0, 1.0])
    completions = [RIGHT, WRONG_CITY, "nothing", "ignored"]
    truths = [TRUTH, TRUTH, [], None]
    totals = reward([None] * 4, completions, [[]] * 4, ground_truth=truths, tools=[TOOLS] * 4)
    assert totals.columns["function_call"][:3].tolist() == pytest.approx([2.0, 0.6, 2.0])
    assert np.isnan(totals.columns["function_call"][3])  # no ground truth: does not apply
    valid = totals.details["function_call/valid"]
    assert valid[:3].tolist() == [1.0, 0.0, 1.0] and np.isnan(valid[3])
    no_call = totals.details["function_call/no_call_rate"]
    assert no_call[2] == 1.0 and np.isnan(no_call[:2]).all()


def test_training_metrics_and_term_rows_carry_every_term() -> None:
    episodes = [
        column_trajectory(RIGHT, {"tools": TOOLS, "ground_truth": TRUTH}, []),
        column_trajectory("no call", {"tools": TOOLS, "ground_truth": []}, []),
        column_trajectory(WRONG_CITY, {"tools": TOOLS, "ground_truth": TRUTH}, []),
    ]
    scores = score_trajectories(
        episodes, RewardConfig(), step=1, rewards=reward_set("function_call")
    )
    assert scores.functions["function_call/valid/mean"] == pytest.approx(2 / 3)
    assert scores.functions["function_call/no_call_rate/mean"] == 1.0
    assert scores.functions["function_call/calls/mean"] == pytest.approx(2 / 3)
    for term in TERM_KEYS:
        assert f"function_call/{term}/mean" in scores.functions
    terms = scores.dump_terms()
    assert terms[0]["function_call/valid"] == 1.0 and terms[2]["function_call/valid"] == 0.0
    assert terms[0]["function_call"] == pytest.approx(2.0)


def test_an_episode_counts_the_calls_of_every_turn() -> None:
    episode = column_trajectory("done", {"tools": TOOLS, "ground_truth": TRUTH}, [])
    episode.turn_outputs = [RIGHT, "done"]
    out = FunctionCallReward()(
        completions=["done"], ground_truth=[TRUTH], tools=[TOOLS], trajectories=[episode]
    )
    assert out == [pytest.approx(2.0)]


def test_score_command_scores_function_calls_and_reports_bad_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [
        json.dumps({"tools": TOOLS, "ground_truth": TRUTH, "completion": RIGHT}),
        json.dumps({"tools": TOOLS, "ground_truth": [], "completion": WRONG_CITY}),
        '{"tools": [], "ground_truth": 5, "completion": ""}',
    ]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = main(["score", "--reward", "function_call", str(src), "-o", str(dst)])
    assert code == 1
    scored = [json.loads(line) for line in dst.read_text(encoding="utf-8").splitlines()]
    assert [s["details"]["valid"] for s in scored] == [1.0, 0.0]
    assert set(scored[0]["details"]) == set(DETAIL_KEYS[1:])
    err = capsys.readouterr().err
    assert "line 3:" in err and "ground_truth" in err and "scored 2" in err
    # The output follows the umask like any file the command writes (not mkstemp's 0600).
    assert dst.stat().st_mode & 0o777 == (src.stat().st_mode & 0o777)


def test_score_command_reads_gzip_and_honours_weights_and_tool_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst = tmp_path / "in.jsonl.gz", tmp_path / "out.jsonl"
    line = {"tools": TOOLS, "ground_truth": TRUTH, "completion": "[get_weather(city='Paris')]"}
    with gzip.open(src, "wt", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
    args = ["score", "--reward", "function_call", str(src), "-o", str(dst)]
    assert main([*args, "--set", "function_call_format_weight=0"]) == 0
    scored = json.loads(dst.read_text(encoding="utf-8"))
    assert scored["details"]["valid"] == 1.0 and scored["reward"] == pytest.approx(1.8)
    assert main([*args, "--tool_format", "hermes"]) == 0
    assert json.loads(dst.read_text(encoding="utf-8"))["details"]["calls"] == 0.0
    assert main([*args, "--tool_format", "nonesuch"]) == 2
    assert "unknown tool format" in capsys.readouterr().err
