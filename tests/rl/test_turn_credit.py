"""Per-turn rewards and turn-level advantages, against values worked out by hand."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from agentrl.envs import task_parts, task_tools
from agentrl.errors import UserCodeError
from agentrl.rewards import RewardConfig, combine
from agentrl.rl.advantages import (
    AdvantageConfig,
    TurnRewards,
    compute_advantages,
    token_advantages,
    turn_returns,
)
from agentrl.rl.pack import pack_groups
from agentrl.rollout.episodes import run_episodes
from agentrl.tools import builtin_registry
from agentrl.training.scoring import reward_set, score_trajectories
from agentrl.trajectory import RolloutGroup, Trajectory, response_turns

from tests.fakes.engines import ScriptedEngine, tool_call

# One group of three episodes: A scores [1, 1], B [0, 2] over two turns, C [0] in one turn.
EPISODES = [[1.0, 1.0], [0.0, 2.0], [0.0]]
ONE_GROUP = torch.tensor([0, 0, 0])


def turn_adv(rows: list[list[float]], mode: str, ids: torch.Tensor = ONE_GROUP, **cfg: Any):
    turns = TurnRewards.from_lists(rows)
    totals = turns.rewards.sum(1)
    config = AdvantageConfig(advantage_mode=mode, adv_clip=0.0, **cfg)
    values, metrics = compute_advantages(totals, ids, config, turns=turns)
    return values, {k: float(v) for k, v in metrics.items()}


def test_discounted_returns_run_backwards_within_each_episode() -> None:
    turns = TurnRewards.from_lists(EPISODES)
    # gamma 0.5: A = [1 + 0.5 * 1, 1], B = [0 + 0.5 * 2, 2], C = [0]; padding stays 0
    assert turn_returns(turns, 0.5).tolist() == [[1.5, 1.0], [1.0, 2.0], [0.0, 0.0]]
    assert turn_returns(turns, 1.0).tolist() == [[2.0, 1.0], [2.0, 2.0], [0.0, 0.0]]


def test_turn_grpo_normalises_returns_across_the_episodes_that_reached_each_turn() -> None:
    values, metrics = turn_adv(EPISODES, "turn_grpo")
    # turn 0: returns [2, 2, 0], mean 4/3, population std sqrt(8/9) = 0.9428
    #   -> [(2 - 4/3) / 0.9428, same, (0 - 4/3) / 0.9428] = [0.7071, 0.7071, -1.4142]
    # turn 1: only A and B reached it: returns [1, 2], mean 1.5, std 0.5 -> [-1, 1]; C has none
    s0, s1 = math.sqrt(8 / 9) + 1e-4, 0.5 + 1e-4
    expected = [[(2 - 4 / 3) / s0, -0.5 / s1], [(2 - 4 / 3) / s0, 0.5 / s1], [(-4 / 3) / s0, 0.0]]
    assert values.flatten().tolist() == pytest.approx(
        [v for row in expected for v in row], abs=1e-5
    )
    assert metrics["turn/1/episodes"] == 2 and metrics["turn/0/episodes"] == 3
    assert metrics["turn/1/reward"] == pytest.approx(1.5)  # (1 + 2) / 2
    assert metrics["turn/0/return"] == pytest.approx(4 / 3)
    assert metrics["turn/1/advantage"] == pytest.approx(0.0, abs=1e-6)


def test_turn_grpo_with_a_discount() -> None:
    values, _ = turn_adv(EPISODES, "turn_grpo", turn_discount=0.5)
    # turn 0 returns [1.5, 1, 0]: mean 5/6, var ((2/3)^2 + (1/6)^2 + (5/6)^2) / 3 = 7/18
    std = math.sqrt(7 / 18) + 1e-4
    assert values[:, 0].tolist() == pytest.approx(
        [(1.5 - 5 / 6) / std, (1 - 5 / 6) / std, (-5 / 6) / std], abs=1e-5
    )


def test_turn_group_uses_the_episode_baseline_at_every_turn() -> None:
    values, _ = turn_adv(EPISODES, "turn_group")
    # baseline: the episodes' whole returns [2, 2, 0]: mean 4/3, std 0.9428 at every turn
    # turn 1: A (1 - 4/3) / 0.9428 = -0.3536, B (2 - 4/3) / 0.9428 = 0.7071
    s = math.sqrt(8 / 9) + 1e-4
    expected = [
        [(2 - 4 / 3) / s, (1 - 4 / 3) / s],
        [(2 - 4 / 3) / s, (2 - 4 / 3) / s],
        [(-4 / 3) / s, 0.0],
    ]
    assert values.flatten().tolist() == pytest.approx(
        [v for row in expected for v in row], abs=1e-5
    )


def test_per_turn_modes_reduce_to_grpo_for_an_outcome_reward() -> None:
    rewards = torch.tensor([1.0, 0.0, 3.0, 2.0, 2.0, 5.0])
    ids = torch.tensor([0, 0, 0, 1, 1, 1])
    grpo, _ = compute_advantages(rewards, ids, AdvantageConfig(advantage_mode="grpo"))
    turns = TurnRewards.at_last_turn(rewards, [3, 1, 2, 2, 2, 1])
    for mode in ("turn_grpo", "turn_group"):
        one, _ = compute_advantages(rewards, ids, AdvantageConfig(advantage_mode=mode))
        assert one[:, 0].tolist() == pytest.approx(grpo.tolist(), abs=1e-6)  # one turn each
    # Every turn of an episode carries its outcome: turn_group gives GRPO's value at each.
    group, _ = compute_advantages(
        rewards, ids, AdvantageConfig(advantage_mode="turn_group"), turns=turns
    )
    for i, k in enumerate([3, 1, 2, 2, 2, 1]):
        assert group[i, :k].tolist() == pytest.approx([grpo[i].item()] * k, abs=1e-6)


def test_token_advantages_follow_each_tokens_turn() -> None:
    values = torch.tensor([[1.0, -2.0], [0.5, 0.0]])
    turns = torch.tensor([[-1, 0, 0, 1, -1], [-1, -1, 0, 0, 0]])
    assert token_advantages(values, turns).tolist() == [
        [0.0, 1.0, 1.0, -2.0, 0.0],
        [0.0, 0.0, 0.5, 0.5, 0.5],
    ]


def _traj(response: list[int], mask: list[int], starts: list[int]) -> Trajectory:
    logps = [-0.5 if m else 0.0 for m in mask]
    versions = [0 if m else -1 for m in mask]
    outputs = ["a"] * len(starts)
    return Trajectory(
        "p",
        [],
        None,
        [],
        "",
        "",
        [1, 2],
        response,
        mask,
        logps,
        versions,
        turn_outputs=outputs,
        turn_starts=starts,
    )


def test_packing_marks_each_trained_position_with_its_turn() -> None:
    # turn 0 generates 10, 11, its observation 12, 13; turn 1 generates 14, 15
    traj = _traj([10, 11, 12, 13, 14, 15], [1, 1, 0, 0, 1, 1], [0, 4])
    assert response_turns(traj) == [0, 0, 0, 0, 1, 1]
    unrecorded = _traj([10, 11, 12, 13, 14, 15], [1, 1, 0, 0, 1, 1], [])
    assert response_turns(unrecorded) == [0, 0, 0, 0, 1, 1]
    group = RolloutGroup("p", 0, 0, [traj], 0.0)
    batch = pack_groups([group], num_generations=1, max_total_len=64, pad_id=0)
    # shifted: position t predicts token t + 1; prompt [1, 2] -> the first target is 10 at t=1
    assert batch.token_turns.tolist() == [[-1, 0, 0, -1, -1, 1, 1]]


def test_reward_functions_may_score_each_turn() -> None:
    def per_turn(completions: list[str], **_: Any) -> list[Any]:
        return [[0.5, None, 1.0], 2.0]

    def outcome(completions: list[str], **_: Any) -> list[float]:
        return [1.0, 3.0]

    per_turn.__name__, outcome.__name__ = "per_turn", "outcome"
    result = combine([per_turn, outcome], [2.0, 1.0])([[], []], ["a", "b"], [[], []])
    assert result.totals.tolist() == [2 * 1.5 + 1.0, 2 * 2.0 + 3.0]
    # per_turn's list at its turns (x2), the scalars at each completion's last turn
    assert result.turn_totals([3, 2]) == [[1.0, 0.0, 3.0], [0.0, 7.0]]
    with pytest.raises(UserCodeError, match="3 per-turn rewards for completion 0"):
        result.turn_totals([2, 2])


class StepEnv:
    """Scores each turn by its tool's result: 1.0 for a call that returned 4."""

    def __init__(self) -> None:
        self.tools = [self.add]

    def add(self, a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: first
            b: second
        """
        return a + b

    def turn_reward(self, turn: int, text: str, events: list[dict[str, Any]]) -> float | None:
        if not events:
            return 0.5 if "<answer>" in text else None
        return sum(1.0 for e in events if e["ok"] and e["result"] == 4)

    def reward(self, trajectory: Trajectory) -> float:
        return 10.0


def _two_calls(turn: int, context: str) -> str:
    args = '{"a": 2, "b": 2}' if turn == 0 else '{"a": 1, "b": 2}'
    return tool_call("add", args) if turn < 2 else "<answer>done</answer>"


def test_an_environment_scores_each_turn_and_the_trainer_reads_it() -> None:
    tools = task_tools(builtin_registry(), task_parts(environment=StepEnv))
    sample = {"messages": [{"role": "user", "content": "add"}], "gt": ["3"]}
    groups = run_episodes(ScriptedEngine(_two_calls), [sample], tools, num_generations=2)
    traj = groups[0].trajectories[0]
    assert traj.num_turns == 3 and len(traj.turn_starts) == 3
    # turn 0: 2 + 2 = 4 scores 1; turn 1: 3 scores 0; turn 2 answers: 0.5, plus reward() 10
    assert traj.turn_rewards == [1.0, 0.0, 10.5] and traj.env_reward == 11.5
    scores = score_trajectories(
        groups[0].trajectories, RewardConfig(), 0, reward_set(["environment"])
    )
    assert scores.turn_rewards == [[1.0, 0.0, 10.5], [1.0, 0.0, 10.5]]
    assert scores.rewards.tolist() == [11.5, 11.5]


@pytest.mark.slow
def test_a_turn_level_run_trains_the_chain_example_from_the_cli(
    run_files, tmp_path, monkeypatch, capsys
):
    from agentrl.cli import main as cli_main
    from agentrl.observability import read_metrics
    from agentrl.observability.rollout_dump import read_records

    from tests.fakes.runs import example_train_args, write_example_data

    data = write_example_data("chain", tmp_path / "chain.jsonl", monkeypatch)
    code = cli_main(
        [
            *example_train_args(run_files / "model", data, tmp_path, steps=1, max_turns=4),
            "--environment",
            "examples.chain:ChainEnv",
            "--advantage_mode",
            "turn_grpo",
            "--turn_discount",
            "0.9",
            "--dump_rollouts",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "reward: environment x 1" in out
    assert 'advantage_mode = "turn_grpo"' in (tmp_path / "run" / "config.toml").read_text()
    train = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "train"]
    assert {"turn/0/reward", "turn/0/advantage", "turn/0/episodes"} <= set(train[0])
    records = read_records(tmp_path / "run" / "rollouts" / "step-000001.jsonl.gz")
    assert len(records) == 4 and records[0]["vocab"]
    for record in records:
        view = record["token_view"]
        assert "turn_rewards" in record and "turn_advantages" in record
        ids = [int(i) for i in view["ids"].split(",")]
        prompt = view["prompt"] if "prompt_ref" not in view else 0
        tokens = record["tokens"]
        assert len(ids) == prompt + tokens["generated"] + tokens["observation"]
        assert len(view["lp"].split(",")) == tokens["generated"]
    evals = read_records(tmp_path / "run" / "rollouts" / "eval-000000.jsonl.gz")
    assert evals[0]["vocab"] and all("dlp" not in r["token_view"] for r in evals)
    assert all(len(r["token_view"]["lp"].split(",")) == r["tokens"]["generated"] for r in evals)
