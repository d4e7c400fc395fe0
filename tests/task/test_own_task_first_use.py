"""A new user's own task, tried as the README shows it: data without ground truth, a sample
read like its record, and errors in the user's code that name that code."""

from __future__ import annotations

import json

import pytest
from agentrl.assembly.prompts import load_prompts, prompt_config
from agentrl.assembly.task import build_tools
from agentrl.config import resolve
from agentrl.data import PromptPool
from agentrl.data.prompt_pool import PromptPoolError
from agentrl.envs import TaskParts, rewards_read_gt
from agentrl.trainer import Trainer


def _records(path, n: int = 16):
    rows = [{"prompt": f"Guess my number ({i})", "secret": i % 7} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def closeness(completions, secret, **kwargs):
    return [1.0 if str(s) in c else 0.0 for c, s in zip(completions, secret, strict=True)]


def _pools(tmp_path, **task):
    data = _records(tmp_path / "data.jsonl")
    config = resolve(preset="tiny", overrides={"data_path": str(data), "save_dir": str(tmp_path)})
    trainer = Trainer(config, **task)
    tools = build_tools(config, trainer.parts)
    lines: list[str] = []
    train, held_out = load_prompts(
        prompt_config(config, trainer.parts, tools, lines.append), tools, lines.append
    )
    return train, held_out, lines


def test_own_reward_keeps_prompts_without_ground_truth(tmp_path) -> None:
    train, held_out, lines = _pools(tmp_path, reward_funcs=[closeness])
    assert len(train) + len(held_out) == 16
    assert any("prompts without ground truth are kept" in line for line in lines)


def test_a_reward_that_needs_ground_truth_drops_them_and_names_the_option(tmp_path) -> None:
    with pytest.raises(PromptPoolError, match=r"skip_no_gt 16 \(--require_gt 0 keeps them\)"):
        _pools(tmp_path, reward_funcs=[closeness, "tool_use"])


def test_which_rewards_read_the_ground_truth() -> None:
    assert rewards_read_gt(TaskParts(), False)  # the built-in task: tool_use
    assert not rewards_read_gt(TaskParts(reward_funcs=[closeness]), False)
    assert not rewards_read_gt(TaskParts(reward_funcs=["r1_int"]), True)
    assert rewards_read_gt(TaskParts(reward_funcs=["math_tool"]), False)


def test_a_sample_reads_like_its_record(tmp_path) -> None:
    pool = PromptPool(str(_records(tmp_path / "d.jsonl", 2)), require_gt=False)
    sample = pool[1]
    assert sample["secret"] == 1 and sample.get("secret") == 1 and "secret" in sample
    assert sample.get("missing", "x") == "x" and "missing" not in sample
    assert sample["messages"][-1]["content"] == "Guess my number (1)"
    assert {"secret", "messages"} <= set(sample.keys())
    with pytest.raises(KeyError, match=r"d.jsonl:2: the record has no column 'guess'"):
        sample["guess"]


def test_console_and_eval_lines_show_the_task_of_ones_own() -> None:
    from agentrl.observability.progress import format_eval_line, format_step_line, short_summary

    own = {
        "reward/mean": 0.5,
        "reward_fn/closeness/mean": 0.5,
        "reward_fn/closeness/std": 0.1,
        "reward_fn/closeness/none_frac": 0.0,
        "tools/calls_per_episode": 2.0,
        "tools/guess/calls_per_episode": 2.0,
        "tools/guess/error_rate": 0.25,
        "reward_detail/exact_match": 0.0,
    }
    line = format_step_line(1, 2, own)
    assert "tools 2.00/ep guess 2.00 err 0.25" in line and "closeness 0.500±0.100" in line
    assert "exact" not in line and "tag" not in line and "exact" not in short_summary(own)
    evaluated = {f"eval/{k.removeprefix('reward/')}": v for k, v in own.items()}
    evaluated["eval/reward"] = 0.5
    eval_line = format_eval_line("eval", 1, evaluated)
    assert "closeness 0.500±0.100" in eval_line and "guess 2.00 err 0.25" in eval_line
    assert "exact" not in eval_line and "canon" not in eval_line
    # The built-in reward among the functions: its terms are back.
    both = {**own, "reward_fn/tool_use/mean": 1.0}
    assert "exact/cov" in format_step_line(1, 2, both)
    assert "exact/cov" in format_step_line(1, 2, {"reward/mean": 1.0})


class GuessingGame:
    """The README's guessing game, with a slip a new user makes: a column name typo."""

    def reset(self, sample):
        self.secret = int(sample["secrett"])

    def guess(self, n: int) -> str:
        """Guess the number.

        Args:
            n: the guess
        """
        return "higher" if n < self.secret else "lower" if n > self.secret else "right"

    @property
    def tools(self):
        return [self.guess]


def test_an_error_in_the_environment_names_its_line_and_exits_1(tmp_path) -> None:
    from agentrl.cli import user_failure
    from agentrl.envs import EnvironmentTools
    from agentrl.errors import EXIT_DATA, RecurringError, UserCodeError
    from agentrl.tools import ToolRegistry

    pool = PromptPool(str(_records(tmp_path / "d.jsonl", 1)), require_gt=False)
    tools = EnvironmentTools(ToolRegistry(), GuessingGame)
    with pytest.raises(UserCodeError) as caught:
        tools.open_episode(pool[0])
    message = str(caught.value)
    line = GuessingGame.reset.__code__.co_firstlineno + 1
    assert message.startswith("environment GuessingGame.reset() raised KeyError at ")
    assert f"test_own_task_first_use.py:{line}:" in message and "'secrett'" in message
    assert "\n" not in message and user_failure(caught.value) == (EXIT_DATA, message)
    # Background rollout stops on it (a recurring error) instead of retrying the same code.
    assert isinstance(caught.value, RecurringError)


def test_dumps_show_the_tasks_own_reward_terms() -> None:
    from agentrl.rewards import RewardConfig
    from agentrl.training.scoring import reward_set, score_trajectories

    from tests.fakes.trajectories import TRAJECTORIES

    def found(completions, **kwargs):
        return [1.0 if "answer" in c else None for c in completions]

    def short(completions, **kwargs):
        return [0.5] * len(completions)

    own = score_trajectories(TRAJECTORIES, RewardConfig(), 1, reward_set([found, short]))
    assert [t["found"] for t in own.dump_terms()] == [1.0, None, 1.0]
    assert all(set(t) == {"found", "short"} for t in own.dump_terms())
    both = score_trajectories(TRAJECTORIES, RewardConfig(), 1, reward_set([found, "tool_use"]))
    terms = both.dump_terms()[0]
    assert terms["found"] == 1.0 and "exact_match" in terms and "tool_use" in terms
    builtin = score_trajectories(TRAJECTORIES, RewardConfig(), 1)
    assert builtin.dump_terms() == builtin.details and "exact_match" in builtin.details[0]


def test_the_last_line_of_a_run_of_ones_own_task_names_its_rewards() -> None:
    from types import SimpleNamespace

    from agentrl.commands.train import summary_line

    first = {"eval/reward": 0.25, "eval/reward_fn/closeness/mean": 0.25, "eval/tasks": 4.0}
    last = {"eval/reward": 0.75, "eval/reward_fn/closeness/mean": 0.75, "eval/tasks": 4.0}
    result = SimpleNamespace(
        first_eval=first,
        last_eval=last,
        stopped=None,
        steps_done=2,
        total_steps=2,
        warm_start_seconds=0.0,
        wall_seconds=60.0,
    )
    line = summary_line(result)
    assert "held-out reward 0.250 -> 0.750, closeness 0.250 -> 0.750 on 4 tasks" in line
    assert "exact match" not in line and "tool success" not in line
