"""Rewards: the tool-use reward scored in batches in Rust, and a reward-function API.

- :class:`RewardConfig`: every weight, penalty, cap and schedule (the command line's names).
- :func:`score_batch`: score many trajectories (dicts or JSON lines) in one call, with the
  detail columns.
- :func:`score_file`: score a JSONL file end to end in Rust, streaming, with a summary.
- :func:`combine` and the built-in reward functions: callables over prompts, completions
  and answers, weighted into one total.
- :func:`score_function_calls` and :class:`FunctionCallReward` (``function_call``): BFCL's
  verdict on a completion's calls, with graded terms (:mod:`agentrl.rewards.function_call`).
- :class:`JudgeReward` (``judge``): a model scores the episodes by a rubric, alone or
  ranked within their group (:mod:`agentrl.rewards.judge`).

Turning rewards into advantages is RL math: see :mod:`agentrl.rl.advantages`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrl.utils.imports import lazy_attributes

if TYPE_CHECKING:
    from agentrl.rewards.config import RewardConfig
    from agentrl.rewards.files import (
        FileScoreSummary,
        LineExplanation,
        RewardHistogram,
        score_file,
    )
    from agentrl.rewards.function_call import (
        FunctionCallReward,
        score_function_call_lines,
        score_function_calls,
    )
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
    from agentrl.rewards.judge import JudgeReward
    from agentrl.rewards.options import JudgeSettings
    from agentrl.rewards.scoring import (
        DETAIL_KEYS,
        TERM_KEYS,
        ScoreResult,
        parallelism_disabled,
        resolved_threads,
        score_batch,
    )
    from agentrl.rewards.values import DetailedRewards

# Loaded on first use, as at the package root: `agentrl score` needs only the scorer and
# its settings, and skips numpy and the reward functions.
_LAZY = {
    "BUILTIN_REWARDS": "agentrl.rewards.functions",
    "CombinedReward": "agentrl.rewards.functions",
    "CombinedRewards": "agentrl.rewards.functions",
    "DETAIL_KEYS": "agentrl.rewards.scoring",
    "DetailedRewards": "agentrl.rewards.values",
    "FunctionCallReward": "agentrl.rewards.function_call",
    "ENVIRONMENT": "agentrl.rewards.functions",
    "FileScoreSummary": "agentrl.rewards.files",
    "JudgeReward": "agentrl.rewards.judge",
    "JudgeSettings": "agentrl.rewards.options",
    "LineExplanation": "agentrl.rewards.files",
    "RewardConfig": "agentrl.rewards.config",
    "RewardFunction": "agentrl.rewards.functions",
    "RewardHistogram": "agentrl.rewards.files",
    "ScoreResult": "agentrl.rewards.scoring",
    "TERM_KEYS": "agentrl.rewards.scoring",
    "TOOL_USE": "agentrl.rewards.functions",
    "ToolUseReward": "agentrl.rewards.functions",
    "combine": "agentrl.rewards.functions",
    "environment_reward": "agentrl.rewards.functions",
    "episode_record": "agentrl.rewards.functions",
    "math_tool_reward": "agentrl.rewards.functions",
    "parallelism_disabled": "agentrl.rewards.scoring",
    "r1_accuracy_reward": "agentrl.rewards.functions",
    "r1_int_reward": "agentrl.rewards.functions",
    "r1_soft_format_reward": "agentrl.rewards.functions",
    "r1_strict_format_reward": "agentrl.rewards.functions",
    "r1_xml_count_reward": "agentrl.rewards.functions",
    "resolved_threads": "agentrl.rewards.scoring",
    "reward_functions": "agentrl.rewards.functions",
    "reward_weights": "agentrl.rewards.functions",
    "score_batch": "agentrl.rewards.scoring",
    "score_file": "agentrl.rewards.files",
    "score_function_call_lines": "agentrl.rewards.function_call",
    "score_function_calls": "agentrl.rewards.function_call",
}


__getattr__ = lazy_attributes("agentrl.rewards", _LAZY)


__all__ = [
    "BUILTIN_REWARDS",
    "DETAIL_KEYS",
    "ENVIRONMENT",
    "TERM_KEYS",
    "TOOL_USE",
    "CombinedReward",
    "CombinedRewards",
    "DetailedRewards",
    "FileScoreSummary",
    "FunctionCallReward",
    "JudgeReward",
    "JudgeSettings",
    "LineExplanation",
    "RewardConfig",
    "RewardFunction",
    "RewardHistogram",
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
    "score_function_call_lines",
    "score_function_calls",
]
