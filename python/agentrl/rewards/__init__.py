"""Rewards: the tool-use reward scored in batches in Rust, and a reward-function API.

- :class:`RewardConfig`: every weight, penalty, cap and schedule (the command line's names).
- :func:`score_batch`: score many trajectories (dicts or JSON lines) in one call, with the
  detail columns.
- :func:`score_file`: score a JSONL file end to end in Rust, streaming, with a summary.
- :func:`combine` and the built-in reward functions (``(completions, **columns)`` style).
- :func:`group_advantages`: group-normalised advantages.
"""

from agentrl.rewards.advantages import (
    GroupAdvantages,
    calculate_rewards_and_advantages,
    group_advantages,
)
from agentrl.rewards.config import RewardConfig
from agentrl.rewards.files import FileScoreSummary, LineExplanation, score_file
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
    "FileScoreSummary",
    "GroupAdvantages",
    "LineExplanation",
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
    "score_file",
]
