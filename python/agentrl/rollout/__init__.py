"""Rollout: sampling, batched generation, the multi-turn agent loop, async production."""

from agentrl.rollout.types import PolicyVersion, RolloutGroup, Trajectory

__all__ = ["PolicyVersion", "RolloutGroup", "Trajectory"]
