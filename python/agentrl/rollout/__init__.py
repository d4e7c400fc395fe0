"""Rollout: sampling, batched generation, the multi-turn agent loop, async production."""

from agentrl.rollout.async_rollout import AsyncRollout, percentile, split_fresh_groups
from agentrl.rollout.engine import Generation, TorchEngine
from agentrl.rollout.episodes import EpisodeConfig, RolloutEngine, parse_calls, run_episodes
from agentrl.rollout.sampling import SampleResult, SamplingParams, sample_tokens
from agentrl.trajectory import PolicyVersion, RolloutGroup, Trajectory

__all__ = [
    "AsyncRollout",
    "EpisodeConfig",
    "Generation",
    "PolicyVersion",
    "RolloutEngine",
    "RolloutGroup",
    "SampleResult",
    "SamplingParams",
    "TorchEngine",
    "Trajectory",
    "parse_calls",
    "percentile",
    "run_episodes",
    "sample_tokens",
    "split_fresh_groups",
]
