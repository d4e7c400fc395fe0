"""Held-out evaluation, the one home for it: fixed prompts, greedy decoding, ``eval/...``.

Every held-out number agentrl reports comes from here, through the rollout's own
token-in/token-out episode loop (`agentrl.rollout.run_episodes`) on agentrl's engine and the
Rust reward's details (exact match, answer coverage, tool success, ...):

* `Evaluator`: the evaluations inside `agentrl train`, with the rollout engine's current
  weights;
* `agentrl.assembly.evaluation.evaluate_policy`: `agentrl eval`, one policy loaded outside a
  run, on the same prompts, limits, tools and reward details, so its numbers compare with
  a run's ``eval/...``;
* `evaluate_model`: a model being trained in this process (`agentrl sft`'s held-out score);
* `evaluate_episodes`: what both run: play the samples, score them, the metrics.

The same prompts are scored at every evaluation (chosen once by ``eval_seed``), each with
one episode at ``eval_temperature`` (0: greedy), through the full tool loop. With
``generations`` > 1 (and a temperature) each prompt is played that many times: the metrics
average over every episode, which is the sampled policy's accuracy (what RL optimises), and
``eval/pass_at_k`` counts the prompts that at least one of the k episodes got exactly right.

The eval reward uses the reward's *final* schedules (penalties and caps as they end up),
not the ones of the current step: otherwise ``eval/reward`` would drift with the warm-up
schedule and two evaluations of the same policy would disagree. The detail metrics (exact
match, coverage, tool use) do not depend on the schedules.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentrl.data import build_fixed_eval_indices
from agentrl.data.prompt_pool import PromptPool
from agentrl.observability import eval_metrics_from_details
from agentrl.observability.rollout_dump import episode_records
from agentrl.rewards import CombinedReward, RewardConfig
from agentrl.rollout import EpisodeConfig, run_episodes
from agentrl.rollout.engine import TorchEngine
from agentrl.rollout.sampling import SamplingParams
from agentrl.tools import ToolRegistry
from agentrl.training.dumps import add_episode_token_views
from agentrl.training.scoring import Scores, score_trajectories
from agentrl.training.step_metrics import tool_metrics
from agentrl.trajectory import Trajectory

if TYPE_CHECKING:
    import torch


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
        self._tokenizer: Any = None  # the engine's, for the dumps' token views

    @property
    def last_trajectories(self) -> list[Trajectory]:
        """The last evaluation's episodes (sample-major); [] before the first."""
        return [] if self._last is None else list(self._last[0])

    def records(self, step: int) -> list[dict[str, Any]]:
        """The dump records of the last evaluation's episodes (one group per prompt)."""
        if self._last is None:
            return []
        trajectories, scores, version = self._last
        k = self.generations
        records = episode_records(
            trajectories,
            kind="eval",
            step=step,
            groups=[i // k for i in range(len(trajectories))],
            rewards=scores.rewards.tolist(),
            details=scores.dump_terms(),
            max_turns=self.episode.max_turns,
            trainer_version=version,
        )
        if self._tokenizer is None:
            return records
        return add_episode_token_views(records, trajectories, self._tokenizer)

    def run(self, engine: TorchEngine) -> dict[str, float]:
        if not self.indices:
            return {}
        prompts: Sequence[Any] = [self.pool[i] for i in self.indices]
        metrics, trajectories, scores = evaluate_episodes(
            engine,
            prompts,
            self.tools,
            self.episode,
            self.reward,
            generations=self.generations,
            indices=self.indices,
            rewards=self.rewards,
        )
        self._last = (trajectories, scores, int(engine.version))
        self._tokenizer = getattr(engine, "tokenizer", None)
        return metrics


def evaluate_episodes(
    engine: TorchEngine,
    samples: Sequence[Any],
    tools: ToolRegistry,
    episode: EpisodeConfig,
    reward: RewardConfig,
    *,
    generations: int = 1,
    indices: Sequence[int] | None = None,
    rewards: CombinedReward | None = None,
) -> tuple[dict[str, float], list[Trajectory], Scores]:
    """Play ``generations`` episodes of every sample and score them: the ``eval/...``
    metrics, the trajectories (sample-major) and their scores."""
    began = time.perf_counter()
    with engine.lock:
        groups = run_episodes(
            engine,
            samples,
            tools,
            num_generations=generations,
            config=episode,
            data_indices=indices,
            rng=random.Random(0),
        )
    trajectories = [t for g in groups for t in g.trajectories]
    scores = score_trajectories(trajectories, reward, None, rewards)
    metrics = eval_metrics_from_details(float(scores.rewards.mean()), scores.means)
    metrics["eval/tasks"] = float(len(groups))
    metrics.update({f"eval/{k}": v for k, v in tool_metrics(trajectories).items()})
    if rewards is not None:  # a task of one's own: its reward functions
        metrics.update({f"eval/reward_fn/{k}": v for k, v in scores.functions.items()})
    if generations > 1:
        exact = [float(d.get("exact_match", 0.0)) > 0.5 for d in scores.details]
        k = generations
        solved = sum(any(exact[i * k : (i + 1) * k]) for i in range(len(groups)))
        metrics["eval/pass_at_k"] = solved / max(len(groups), 1)
        metrics["eval/generations"] = float(k)
    metrics["eval/seconds"] = time.perf_counter() - began
    metrics["eval/policy_version"] = float(engine.version)
    return metrics, trajectories, scores


def evaluate_model(
    model: torch.nn.Module,
    tokenizer: Any,
    samples: Sequence[Any],
    tools: ToolRegistry,
    *,
    max_turns: int,
    max_new_tokens: int,
    max_context_len: int = 2048,
    batch_rows: int = 0,
    reward: RewardConfig | None = None,
) -> tuple[dict[str, float], list[Trajectory]]:
    """Score ``model`` (trained in this process) greedily on held-out ``samples`` (dicts
    with ``messages``, ``tools``, ``gt``): the `evaluate_policy` path with the rollout's
    default sampling made greedy, ``batch_rows`` rows per forward pass (0: all)."""
    from agentrl.rollout.options import RolloutConfig
    from agentrl.rollout.remote import create_rollout_engine

    engine = create_rollout_engine(
        "torch",
        RolloutConfig(rollout_batch_rows=batch_rows),
        tokenizer=tokenizer,
        rollout_model=model,
    )
    # Plain greedy decoding (no repetition penalty), as the built-in run's own evaluations
    # decode: the warm start's held-out figure is the one RL's first evaluation repeats.
    limits = EpisodeConfig(
        max_turns=max_turns,
        max_new_tokens=max_new_tokens,
        max_context_len=max_context_len,
        sampling=SamplingParams(greedy=True, repetition_penalty=1.0),
    )
    metrics, trajectories, _ = evaluate_episodes(
        engine,
        samples,
        tools,
        eval_episode_config(limits, 0.0, max_new_tokens),
        reward or RewardConfig(),
    )
    return metrics, trajectories


__all__ = [
    "Evaluator",
    "eval_episode_config",
    "evaluate_episodes",
    "evaluate_model",
]
