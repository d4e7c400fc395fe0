"""Rewards of whole episodes, in one batched call to the Rust scorer.

The reward's warm-up schedules (format penalty, reward caps) follow the training step,
so the step is written into the config for every call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from agentrl.observability import mean_details
from agentrl.rewards import RewardConfig, score_batch
from agentrl.trajectory import Trajectory


@dataclass
class Scores:
    rewards: torch.Tensor  # [N] float32, one per trajectory
    details: list[dict[str, float]]  # the reward's detail dict per trajectory
    means: dict[str, float]  # batch mean of every detail


def trajectory_record(traj: Trajectory) -> dict[str, Any]:
    """The scorer's row for one episode (the golden reward file's record shape)."""
    return {
        "messages": traj.messages,
        "tools": traj.tools,
        "gt": list(traj.gt),
        "completion": traj.completion,
        "tool_events": traj.tool_events,
        "unfinished": bool(traj.unfinished),
    }


def score_trajectories(
    trajectories: Sequence[Trajectory], config: RewardConfig, step: int | None
) -> Scores:
    """Rewards and details of every trajectory, with the schedules at ``step``.

    ``step=None`` scores with the schedules finished (their final penalties and caps).
    """
    result = score_batch(
        [trajectory_record(t) for t in trajectories], config.with_overrides(current_step=step)
    )
    details = result.to_records()
    rewards = torch.tensor(result.rewards, dtype=torch.float32)
    return Scores(rewards, details, mean_details(details))


__all__ = ["Scores", "score_trajectories", "trajectory_record"]
