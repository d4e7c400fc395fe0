"""Held-out evaluation with several sampled episodes per prompt: mean accuracy and pass@k."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
import torch
from agentrl.rewards import RewardConfig
from agentrl.training import evaluation
from agentrl.training.scoring import Scores


def _evaluator(monkeypatch, exact: list[int], generations: int):
    """An Evaluator over 3 prompts whose episodes score ``exact`` (prompt-major order)."""
    seen = {}

    def fake_episodes(engine, prompts, tools, *, num_generations, config, data_indices, rng):
        seen["num_generations"] = num_generations
        return [
            SimpleNamespace(trajectories=[SimpleNamespace(tool_events=[])] * num_generations)
            for _ in prompts
        ]

    def fake_scores(trajectories, reward, step, rewards=None):
        assert len(trajectories) == len(exact)
        details = [{"exact_match": float(e)} for e in exact]
        return Scores(
            torch.tensor(exact, dtype=torch.float32),
            details,
            {"exact_match": sum(exact) / len(exact)},
        )

    monkeypatch.setattr(evaluation, "run_episodes", fake_episodes)
    monkeypatch.setattr(evaluation, "score_trajectories", fake_scores)
    monkeypatch.setattr(evaluation, "build_fixed_eval_indices", lambda pool, n, seed: [0, 1, 2])
    pool = type("Pool", (), {"__len__": lambda self: 3, "__getitem__": lambda self, i: i})()
    ev = evaluation.Evaluator(
        pool, None, None, RewardConfig(), samples=3, seed=0, generations=generations
    )
    engine = SimpleNamespace(lock=threading.Lock(), version=0)
    return ev.run(engine), seen


def test_several_episodes_per_prompt_give_mean_accuracy_and_pass_at_k(monkeypatch):
    # prompt 0: 1 of 4 right; prompt 1: none; prompt 2: all four.
    exact = [0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    metrics, seen = _evaluator(monkeypatch, exact, generations=4)
    assert seen["num_generations"] == 4
    assert metrics["eval/exact_match"] == pytest.approx(5 / 12)
    assert metrics["eval/pass_at_k"] == pytest.approx(2 / 3)
    assert metrics["eval/tasks"] == 3.0 and metrics["eval/generations"] == 4.0


def test_one_episode_per_prompt_reports_no_pass_at_k(monkeypatch):
    metrics, seen = _evaluator(monkeypatch, [1, 0, 1], generations=1)
    assert seen["num_generations"] == 1
    assert metrics["eval/exact_match"] == pytest.approx(2 / 3)
    assert "eval/pass_at_k" not in metrics


def test_zero_generations_is_rejected():
    with pytest.raises(ValueError, match="at least 1"):
        evaluation.Evaluator([], None, None, RewardConfig(), samples=1, seed=0, generations=0)
