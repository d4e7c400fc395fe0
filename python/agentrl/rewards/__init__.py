"""Rewards: the tool-use reward scored in batches in Rust, and a reward-function API.

- :class:`RewardConfig`: every weight, penalty, cap and schedule (the command line's names).
- :func:`score_batch`: score many trajectories (dicts or JSON lines) in one call, with the
  detail columns.
- :func:`score_file`: score a JSONL file end to end in Rust, streaming, with a summary.
- :func:`combine` and the built-in reward functions: callables over prompts, completions
  and answers, weighted into one total.

Turning rewards into advantages is RL math: see :mod:`agentrl.rl.advantages`.
"""

from agentrl.rewards.config import RewardConfig
from agentrl.rewards.files import FileScoreSummary, LineExplanation, score_file
from agentrl.rewards.functions import (
    BUILTIN_REWARDS,
    ENVIRONMENT,
    TOOL_USE,
    CombinedReward,
    CombinedRewards,
    RewardFunction,
    ToolUseReward,
    combine,
    environment_reward,
    episode_record,
    math_tool_reward,
    r1_accuracy_reward,
    r1_int_reward,
    r1_soft_format_reward,
    r1_strict_format_reward,
    r1_xml_count_reward,
    reward_functions,
    reward_weights,
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
    "ENVIRONMENT",
    "TERM_KEYS",
    "TOOL_USE",
    "CombinedReward",
    "CombinedRewards",
    "FileScoreSummary",
    "LineExplanation",
    "RewardConfig",
    "RewardFunction",
    "ScoreResult",
    "ToolUseReward",
    "combine",
    "environment_reward",
    "episode_record",
    "math_tool_reward",
    "parallelism_disabled",
    "r1_accuracy_reward",
    "r1_int_reward",
    "r1_soft_format_reward",
    "r1_strict_format_reward",
    "r1_xml_count_reward",
    "resolved_threads",
    "reward_functions",
    "reward_weights",
    "score_batch",
    "score_file",
]
