"""Training groups and evaluations played by the user's agent (``--agent``).

:class:`AgentSource` is the trainer's rollout source when an agent is given: step ``k``
takes the same prompts the built-in loop would (`agentrl.training.sources`), plays G agent
episodes of each at once and hands the trainer one group per prompt. A prompt left with
fewer than two finished episodes has no group-relative signal: as dynamic sampling does
with a flat group, it is set aside and other prompts are played in its place (up to
``max(1, dynamic_sampling_rounds)`` extra rounds); when the rounds run out, the set-aside
groups that have an episode fill the batch. A step whose every episode was dropped stops
the run with the agent's first error. :class:`AgentEvaluator` plays the held-out prompts.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrl.agents.endpoint import AgentFn, agent_name
from agentrl.agents.recorder import Limits
from agentrl.agents.runner import AgentBatch, AgentRunner, error_summary, failure_record
from agentrl.agents.server import EndpointServer, endpoint_capacity
from agentrl.data import build_fixed_eval_indices
from agentrl.errors import UserCodeError
from agentrl.observability.rollout_dump import episode_records
from agentrl.rollout import EpisodeConfig, PolicyVersion, RolloutGroup
from agentrl.training.sources import StepSource
from agentrl.trajectory import Trajectory

# Metrics summed over a step's rounds (the others are the first round's).
_SUMMED = (
    "agent/episodes",
    "agent/dropped",
    "agent/raised",
    "agent/timeouts",
    "agent/no_reward",
    "agent/history_rewrites",
    "agent/branches",
    "agent/generate_calls",
    "agent/ignored_fields",
    "agent/seconds",
)
# Prompt streams of the rounds that replace short groups (clear of dynamic sampling's).
_REFILL_STREAM = 1_000_003


def agent_reward(*, trajectories: Sequence[Any], **extra: Any) -> list[float | None]:
    """``agent``: the reward each episode's agent returned (every sequence of it)."""
    return [(t.agent or {}).get("reward") if t.agent is not None else None for t in trajectories]


agent_reward.__name__ = "agent"


def limits_of(episode: EpisodeConfig) -> Limits:
    return Limits(episode.sampling, episode.max_new_tokens, episode.max_context_len)


def model_name(spec: str) -> str:
    """The model id the endpoint serves (the policy's name; any id is accepted)."""
    return Path(str(spec).rstrip("/")).name or "agentrl-policy"


def _finished(batch: AgentBatch, positions: int) -> list[int]:
    counts = [0] * positions
    for ep in batch.episodes:
        if ep.reward is not None:
            counts[ep.position] += 1
    return counts


class AgentSource(StepSource):
    """The `agentrl.training.sources.GroupSource` of an agent run (see module doc)."""

    def __init__(
        self,
        agent: AgentFn,
        engine: Any,
        prompts: Sequence[Any],
        episode: EpisodeConfig,
        *,
        timeout: float,
        refill_rounds: int,
        model: str,
        **step: Any,
    ) -> None:
        """``step``: :class:`StepSource`'s keywords (num_generations, batch_size, seed, and
        version, a fresh one when not given)."""
        step.setdefault("version", PolicyVersion(0))
        super().__init__(engine, prompts, **step)
        self.refill_rounds = max(1, int(refill_rounds))
        self.server = EndpointServer(
            model, capacity=endpoint_capacity(self.batch_size * self.num_generations)
        )
        self.runner = AgentRunner(agent, self.server, engine, limits_of(episode), timeout=timeout)
        self._step = -1
        self._metrics: dict[str, float] = {}
        self._dropped: list[tuple[int, Any]] = []  # (group in the step, episode)

    # ------------------------------------------------------------------ GroupSource

    def _play(self, indices: list[int]) -> AgentBatch:
        return self.runner.run([self.prompts[i] for i in indices], indices, self.num_generations)

    def _note(self, batch: AgentBatch) -> None:
        for key, value in batch.metrics.items():
            if key in _SUMMED or key not in self._metrics:
                self._metrics[key] = self._metrics.get(key, 0.0) + value
        for ep in batch.episodes:
            if ep.reward is None:
                self._dropped.append((ep.position, ep))

    def next_batch(self, step: int, attempt: int = 0) -> list[RolloutGroup]:
        if step != self._step:
            self._step, self._metrics, self._dropped = step, {}, []
        began = time.perf_counter()
        with self.engine.lock:
            self.reseed(step, attempt)
        indices = self.indices(step, stream=attempt)
        batch = self._play(indices)
        self._note(batch)
        full, short = self._sort(batch, len(indices))
        rounds = 0
        while len(full) < self.batch_size and rounds < self.refill_rounds and short[1]:
            rounds += 1
            stream = _REFILL_STREAM + attempt * 1_000 + rounds
            wanted = self.batch_size - len(full)
            more = self.indices(step, stream=stream)
            batch = self._play(more[:wanted])
            self._note(batch)
            extra_full, extra_short = self._sort(batch, wanted)
            full += extra_full
            short = (short[0] + extra_short[0], extra_short[1])
        if not full and not short[0]:
            raise UserCodeError(
                f"every agent episode of step {step} was dropped: {error_summary(batch.episodes)}"
            )
        groups = (full + short[0])[: self.batch_size]
        self._metrics["agent/refill_rounds"] = (
            self._metrics.get("agent/refill_rounds", 0.0) + rounds
        )
        self._metrics["agent/short_groups"] = float(len(groups) - min(len(full), len(groups)))
        self.timed(began)
        return groups

    def _sort(self, batch: AgentBatch, positions: int) -> tuple[list[RolloutGroup], tuple]:
        """(groups with two or more finished episodes, (groups with one, any short?))."""
        counts = _finished(batch, positions)
        full: list[RolloutGroup] = []
        one: list[RolloutGroup] = []
        groups = iter(batch.groups)
        for position in range(positions):
            if counts[position] == 0:
                continue
            group = next(groups)
            (full if counts[position] >= 2 else one).append(group)
        return full, (one, any(c < 2 for c in counts))

    def stop(self) -> None:
        self.server.close()

    # ------------------------------------------------------------------ for the trainer

    def step_metrics(self) -> dict[str, float]:
        """The ``agent/...`` metrics of the step last drawn."""
        return dict(self._metrics)

    def dropped_records(self, step: int, first_episode: int) -> list[dict[str, Any]]:
        """Dump records of the step's dropped episodes (numbered from ``first_episode``)."""
        return [
            failure_record(ep, kind="train", step=step, episode=first_episode + i, group=-1)
            for i, (_, ep) in enumerate(self._dropped)
        ]


class AgentEvaluator:
    """The held-out evaluation of an agent run: each prompt played by the agent (one
    episode, or ``generations``), at the eval decoding unless the agent sets its own.

    ``eval/reward`` is the mean reward of the finished episodes; dropped ones are counted
    in ``eval/dropped``; the agent's other returned values are ``eval/<name>`` means.
    """

    def __init__(
        self,
        agent: AgentFn,
        pool: Any,
        episode: EpisodeConfig,
        *,
        samples: int,
        seed: int,
        generations: int,
        timeout: float,
        server: EndpointServer,
    ) -> None:
        self.agent, self.pool, self.episode = agent, pool, episode
        self.generations, self.timeout, self.server = max(1, generations), timeout, server
        self.indices = build_fixed_eval_indices(pool, samples, seed=seed) if len(pool) else []
        self._last: tuple[AgentBatch, int] | None = None

    def run(self, engine: Any) -> dict[str, float]:
        if not self.indices:
            return {}
        began = time.perf_counter()
        runner = AgentRunner(
            self.agent, self.server, engine, limits_of(self.episode), timeout=self.timeout
        )
        batch = runner.run([self.pool[i] for i in self.indices], self.indices, self.generations)
        self._last = (batch, int(getattr(engine, "version", 0)))
        rewards = [ep.reward.reward for ep in batch.episodes if ep.reward is not None]
        metrics = {
            "eval/reward": sum(rewards) / len(rewards) if rewards else float("nan"),
            "eval/tasks": float(len(self.indices)),
            "eval/episodes": float(len(batch.episodes)),
            "eval/dropped": float(len(batch.episodes) - len(rewards)),
            "eval/seconds": time.perf_counter() - began,
            "eval/policy_version": float(getattr(engine, "version", 0)),
        }
        values: dict[str, list[float]] = {}
        for ep in batch.episodes:
            if ep.reward is not None:
                for key, value in ep.reward.values.items():
                    values.setdefault(key, []).append(value)
        metrics.update({f"eval/{k}": sum(v) / len(v) for k, v in values.items()})
        return metrics

    def records(self, step: int) -> list[dict[str, Any]]:
        """Dump records of the last evaluation: every sequence, then the dropped episodes."""
        if self._last is None:
            return []
        batch, version = self._last
        trajs: list[Trajectory] = [t for g in batch.groups for t in g.trajectories]
        groups = [i for i, g in enumerate(batch.groups) for _ in g.trajectories]
        rewards = [float((t.agent or {}).get("reward", 0.0)) for t in trajs]
        records = episode_records(
            trajs,
            kind="eval",
            step=step,
            groups=groups,
            rewards=rewards,
            details=[{} for _ in trajs],
            max_turns=self.episode.max_turns,
            trainer_version=version,
        )
        dropped = [ep for ep in batch.episodes if ep.reward is None]
        records += [
            failure_record(ep, kind="eval", step=step, episode=len(records) + i, group=-1)
            for i, ep in enumerate(dropped)
        ]
        return records


def agent_reward_plan(
    reward_funcs: Sequence[Any], reward_weights: Sequence[float] | None
) -> tuple[list[Any], list[float] | None, str]:
    """(reward functions, weights, a log line) of an agent run: the agent's own reward
    (``agent``, weight 1), then any reward functions given beside it."""
    functions = [agent_reward, *reward_funcs]
    weights = None if reward_weights is None else [1.0, *reward_weights]
    names = [f if isinstance(f, str) else getattr(f, "__name__", repr(f)) for f in functions]
    shown = ", ".join(
        f"{n} x {w:g}" for n, w in zip(names, weights or [1.0] * len(names), strict=False)
    )
    return functions, weights, f"reward: {shown}"


def describe(agent: AgentFn, timeout: float) -> str:
    return (
        f"agent {agent_name(agent)}: each episode calls the endpoint on 127.0.0.1 "
        f"(dropped after --agent_timeout {timeout:g}s)"
    )


__all__ = [
    "AgentEvaluator",
    "AgentSource",
    "agent_reward",
    "agent_reward_plan",
    "describe",
    "limits_of",
    "model_name",
]
