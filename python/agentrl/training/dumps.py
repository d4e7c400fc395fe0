"""The dump records of a training step and of an evaluation (`agentrl.observability.rollout_dump`
writes them): the step's episodes with the rewards, reward terms and advantages it trained on."""

from __future__ import annotations

from typing import Any

from agentrl.observability.rollout_dump import episode_records
from agentrl.training.step import StepOutcome


def step_records(outcome: StepOutcome, step: int, max_turns: int) -> list[dict[str, Any]]:
    """One record per trained episode of ``outcome`` ([] when the step trained on nothing)."""
    if outcome.scores is None or outcome.batch is None:
        return []
    advantages = outcome.advantages.tolist() if outcome.advantages is not None else None
    return episode_records(
        outcome.batch.trajectories,
        kind="train",
        step=step,
        groups=outcome.batch.group_ids.tolist(),
        rewards=outcome.scores.rewards.tolist(),
        details=outcome.scores.details,
        max_turns=max_turns,
        advantages=advantages,
        trainer_version=outcome.current_version,
    )


__all__ = ["step_records"]
