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
