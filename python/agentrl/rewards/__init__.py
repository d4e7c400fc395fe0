"""Rewards: the seed's tool-use reward scored in batches in Rust, and a reward-function API.

- :class:`RewardConfig`: every weight, penalty, cap and schedule (the seed's names).
- :func:`score_batch`: score many trajectories in one call, with the seed's detail columns.
- :func:`combine` and the built-in reward functions, in the second seed's style.
- :func:`group_advantages`: group-normalised advantages.
"""

from agentrl.rewards.advantages import (
    GroupAdvantages,
    calculate_rewards_and_advantages,
    group_advantages,
)
from agentrl.rewards.config import RewardConfig
from agentrl.rewards.functions import (
    BUILTIN_REWARDS,
    CombinedReward,
    CombinedRewards,
    RewardFunction,
    combine,
    math_tool_reward,
    r1_accuracy_reward,
    r1_int_reward,
    r1_soft_format_reward,
    r1_strict_format_reward,
    r1_xml_count_reward,
)
from agentrl.rewards.scoring import (
    DETAIL_KEYS,
    TERM_KEYS,
    ScoreResult,
    parallelism_disabled,
    resolved_threads,
    score_batch,
)

__all__ = [
    "BUILTIN_REWARDS",
    "DETAIL_KEYS",
    "TERM_KEYS",
    "CombinedReward",
    "CombinedRewards",
    "GroupAdvantages",
    "RewardConfig",
    "RewardFunction",
    "ScoreResult",
    "calculate_rewards_and_advantages",
    "combine",
    "group_advantages",
    "math_tool_reward",
    "parallelism_disabled",
    "r1_accuracy_reward",
    "r1_int_reward",
    "r1_soft_format_reward",
    "r1_strict_format_reward",
    "r1_xml_count_reward",
    "resolved_threads",
    "score_batch",
]
