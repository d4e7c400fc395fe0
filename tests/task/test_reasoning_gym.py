"""reasoning-gym generators as prompt data, scored by their own scorers (the real package)."""

from __future__ import annotations

import gzip
import json
import sys

import pytest
from agentrl.cli import main as cli_main
from agentrl.data import PromptPool
from agentrl.errors import UsageError, UserCodeError
from agentrl.observability import read_metrics
from agentrl.rewards.functions import BUILTIN_REWARDS
from agentrl.rewards.reasoning_gym import answer_text
from transformers import AutoTokenizer

from tests.fakes.runs import example_train_args, use_examples

pytest.importorskip("reasoning_gym", reason="pip install 'agentrl[reasoning-gym]'")


def test_a_generator_spec_makes_seeded_prompts_with_its_answers_and_metadata() -> None:
    spec = "reasoning_gym:basic_arithmetic?size=3&seed=5"
    pool = PromptPool(spec, filter_mode="all")
    again = PromptPool(spec, filter_mode="all")
    assert len(pool) == 3 and [s.messages for s in pool] == [s.messages for s in again]
    sample = pool[0]
    assert [m["role"] for m in sample.messages] == ["system", "user"]
    assert "<answer>" in sample.messages[0]["content"]
    assert sample.gt == [sample.columns["answer"]]
    assert sample.columns["metadata"]["source_dataset"] == "basic_arithmetic"
    other = PromptPool("reasoning_gym:basic_arithmetic?size=3&seed=6", filter_mode="all")
    assert [s.messages for s in other] != [s.messages for s in pool]


def test_the_reward_is_the_generators_own_score() -> None:
    pool = PromptPool("reasoning_gym:leg_counting?size=2&seed=1", filter_mode="all")
    reward = BUILTIN_REWARDS["reasoning_gym"]
    sample = pool[0]
    right = f"Counting... <answer>{sample.gt[0]}</answer>"
    wrong = f"<answer>{int(sample.gt[0]) + 1}</answer>"
    scores = reward(
        prompts=[sample.messages] * 4,
        completions=[right, wrong, "no tags", right],
        metadata=[sample.columns["metadata"]] * 3 + [None],
        answer=[sample.columns["answer"]] * 4,
    )
    assert scores == [1.0, 0.0, 0.0, None]  # None: a prompt that is not reasoning-gym's


def test_the_answer_is_the_last_closed_answer_tags_in_linear_time() -> None:
    assert answer_text("<answer>1</answer> then <answer> 2 </answer>") == "2"
    assert answer_text("<answer>1") is None and answer_text("plain") is None
    assert answer_text("<answer>" * 200_000 + "</answer>") == ""


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("reasoning_gym:leg_countin", ["no task 'leg_countin'", "leg_counting"]),
        ("reasoning_gym:leg_counting?legs=3", ["no field legs", "max_animals"]),
        ("reasoning_gym:", ["name a reasoning-gym task"]),
    ],
)
def test_a_bad_spec_is_one_line_naming_it(spec, words) -> None:
    with pytest.raises(UsageError) as caught:
        PromptPool(spec, filter_mode="all")
    message = str(caught.value)
    assert "\n" not in message and spec in message
    assert all(word in message for word in words), message


def test_a_generator_that_raises_is_reported_as_its_code() -> None:
    with pytest.raises(UserCodeError) as caught:
        PromptPool("reasoning_gym:leg_counting?size=2&min_animals=5&max_animals=1")
    message = str(caught.value)
    assert message.startswith("reasoning-gym task 'leg_counting' (create_dataset) raised")
    assert "\n" not in message


@pytest.mark.slow
@pytest.mark.parametrize(
    "tools",
    [
        [],
        # With the sandboxed python tool, and examples/reasoning_tasks.py's reward beside.
        ["--tools", "python", "--reward_funcs", "reasoning_gym,examples.reasoning_tasks:brief"],
    ],
)
def test_a_reasoning_gym_task_trains_from_the_command_line(
    run_files, tmp_path, capsys, monkeypatch, tools
):
    use_examples(monkeypatch)
    spec = "reasoning_gym:basic_arithmetic?size=10&seed=2"
    args = example_train_args(run_files / "model", tmp_path / "unused", tmp_path, max_turns=1)
    args[args.index("--data") + 1] = spec
    sizes = ["--max_context_len", "768", "--max_total_len", "800", "--dump_rollouts", "1"]
    code = cli_main([*args, *sizes, *tools])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "finished: 2/2 steps" in out and "reward: reasoning_gym x 1" in out
    assert ("brief x 1" in out) == bool(tools)
    train = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "train"]
    assert len(train) == 2 and train[0]["reward_fn/reasoning_gym/none_frac"] == 0.0
    assert 0.0 <= train[0]["reward_fn/reasoning_gym/mean"] <= 1.0
    # The policy was offered the sandboxed python tool exactly when asked for.
    with gzip.open(tmp_path / "run" / "rollouts" / "step-000001.jsonl.gz", "rt") as handle:
        record = json.loads(handle.readline())
    ids = [int(i) for i in record["token_view"]["ids"].split(",")][: record["tokens"]["prompt"]]
    prompt = AutoTokenizer.from_pretrained(run_files / "model").decode(ids)
    assert ("Calculate" in prompt) and ('"name": "python"' in prompt) == bool(tools)


def test_without_the_package_the_line_says_how_to_install_it(monkeypatch) -> None:
    from agentrl.errors import UserError

    monkeypatch.setitem(sys.modules, "reasoning_gym", None)  # import fails as if missing
    with pytest.raises(UserError) as caught:
        PromptPool("reasoning_gym:leg_counting")
    assert str(caught.value) == (
        "--data reasoning_gym:leg_counting needs the reasoning-gym package: "
        "pip install 'agentrl[reasoning-gym]'"
    )
