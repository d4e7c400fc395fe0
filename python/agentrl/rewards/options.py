"""Which reward functions score a run (the ``reward`` section of the run's config, beside
every setting of the built-in reward, :class:`agentrl.rewards.config.RewardConfig`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from agentrl.utils.options import option

__all__ = ["RewardFunctionsConfig"]


@dataclass(frozen=True)
class RewardFunctionsConfig:
    """The reward functions and their weights."""

    SECTION: ClassVar[str] = "reward"

    use_reward_model: bool = option(False, "add a learned reward model's score")
    reward_model_path: str = option("", "reward model path")
    reward_funcs: str = option(
        "",
        "reward functions: comma-separated built-in names or pkg.module:function "
        "('': tool_use, or the environment's reward)",
    )
    reward_weights: str = option("", "weights of reward_funcs, e.g. 1.0,0.5 ('': 1 each)")
    # The `judge` reward (agentrl.rewards.judge): who judges, by what rubric, how.
    judge_model: str = option("", "judge run locally: a model spec as --model takes ('': none)")
    judge_url: str = option("", "judge behind an OpenAI-compatible URL, e.g. http://host:8000/v1")
    judge_api_model: str = option("", "model name sent to judge_url ('': the first it lists)")
    judge_rubric: str = option("", "what the judge rewards: text, or @file ('': a default)")
    judge_mode: str = option(
        "single", "score each episode alone, or rank each group's together", ("single", "rank")
    )
    judge_max_tokens: int = option(256, "reasoning tokens of the judge's reply", check=">=0")
    judge_batch_size: int = option(8, "judge prompts per batch or concurrent request", check=">=1")
