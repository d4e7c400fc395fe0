"""Held-out evaluation: fixed prompts, greedy decoding, the ``eval/...`` metrics.

The same prompts are scored at every evaluation (chosen once by ``eval_seed``), each with
one episode at ``eval_temperature`` (0: greedy), through the full tool loop, with the
rollout engine's current weights. With ``generations`` > 1 (and a temperature) each prompt
is played that many times: the metrics average over every episode, which is the sampled
policy's accuracy (what RL optimises), and ``eval/pass_at_k`` counts the prompts that at
least one of the k episodes got exactly right. The reward's details give the ``eval/...``
numbers: exact match, answer coverage, tool success, tool choice, and the rest.

The eval reward uses the reward's *final* schedules (penalties and caps
as they end up), not the ones of the current step: otherwise ``eval/reward`` would drift
with the warm-up schedule and two evaluations of the same policy would disagree. The
detail metrics (exact match, coverage, tool use) do not depend on the schedules.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from agentrl.data import build_fixed_eval_indices
from agentrl.data.prompt_pool import PromptPool
from agentrl.observability import eval_metrics_from_details
from agentrl.observability.rollout_dump import episode_records
from agentrl.rewards import CombinedReward, RewardConfig
from agentrl.rollout import EpisodeConfig, run_episodes
from agentrl.rollout.engine import TorchEngine
from agentrl.tools import ToolRegistry
from agentrl.training.scoring import Scores, score_trajectories
from agentrl.training.step import tool_metrics
from agentrl.trajectory import Trajectory


def eval_episode_config(
    episode: EpisodeConfig, temperature: float, max_gen_len: int
) -> EpisodeConfig:
    """The rollout limits with the eval decoding: greedy at temperature 0, no thinking."""
    sampling = replace(
        episode.sampling,
        temperature=max(float(temperature), 0.0),
        greedy=temperature <= 0.0,
        max_new_tokens=max_gen_len or episode.max_new_tokens,
    )
    return replace(
        episode,
        sampling=sampling,
        max_new_tokens=max_gen_len or episode.max_new_tokens,
        thinking_ratio=0.0,
    )


class Evaluator:
    """Scores a fixed held-out subset; ``run`` returns {} when there is nothing to score."""

    def __init__(
        self,
        pool: PromptPool,
        tools: ToolRegistry,
        episode: EpisodeConfig,
        reward: RewardConfig,
        *,
        samples: int,
        seed: int,
        generations: int = 1,
        rewards: CombinedReward | None = None,
    ) -> None:
        if generations < 1:
            raise ValueError(f"generations must be at least 1, got {generations}")
        self.generations = generations
        self.pool = pool
        self.tools = tools
        self.episode = episode
        self.reward = reward
        self.rewards = rewards
        self.indices = build_fixed_eval_indices(pool, samples, seed=seed) if len(pool) else []
        self._last: tuple[list[Trajectory], Scores, int] | None = None

    def records(self, step: int) -> list[dict[str, Any]]:
        """The dump records of the last evaluation's episodes (one group per prompt)."""
        if self._last is None:
            return []
        trajectories, scores, version = self._last
        k = self.generations
        return episode_records(
            trajectories,
            kind="eval",
            step=step,
            groups=[i // k for i in range(len(trajectories))],
            rewards=scores.rewards.tolist(),
            details=scores.dump_terms(),
            max_turns=self.episode.max_turns,
            trainer_version=version,
        )

    def run(self, engine: TorchEngine) -> dict[str, float]:
        if not self.indices:
            return {}
        began = time.perf_counter()
        prompts: Sequence[Any] = [self.pool[i] for i in self.indices]
        with engine.lock:
            groups = run_episodes(
                engine,
                prompts,
                self.tools,
                num_generations=self.generations,
                config=self.episode,
                data_indices=self.indices,
                rng=random.Random(0),
            )
        trajectories = [t for g in groups for t in g.trajectories]
        scores = score_trajectories(trajectories, self.reward, None, self.rewards)
        self._last = (trajectories, scores, int(engine.version))
        metrics = eval_metrics_from_details(float(scores.rewards.mean()), scores.means)
        metrics["eval/tasks"] = float(len(groups))
        if self.rewards is not None:  # a task of one's own: its reward functions and tools
            metrics.update({f"eval/reward_fn/{k}": v for k, v in scores.functions.items()})
            metrics.update({f"eval/{k}": v for k, v in tool_metrics(trajectories).items()})
        if self.generations > 1:
            exact = [float(d.get("exact_match", 0.0)) > 0.5 for d in scores.details]
            k = self.generations
            solved = sum(any(exact[i * k : (i + 1) * k]) for i in range(len(groups)))
            metrics["eval/pass_at_k"] = solved / max(len(groups), 1)
            metrics["eval/generations"] = float(k)
        metrics["eval/seconds"] = time.perf_counter() - began
        metrics["eval/policy_version"] = float(engine.version)
        return metrics


__all__ = ["Evaluator", "eval_episode_config"]
