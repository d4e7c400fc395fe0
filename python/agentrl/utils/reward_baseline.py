"""The reward baseline's defaults, declared once for the two configs that carry them.

The ``baseline`` advantage modes subtract a running mean of the reward (an EMA with decay
``reward_ema_decay``) and divide by ``reward_scale``. The advantage stage reads them
(:class:`agentrl.rl.advantages.AdvantageConfig`); the reward settings list them too
(:class:`agentrl.rewards.config.RewardConfig`, the scorer's compatible names), which is
where a command line or a TOML ``[reward]`` table sets them, and the run's config copies
them from there into the advantage stage. The RL math imports nothing but ``agentrl.utils``
and the reward layer sits below it, so the defaults live here, below both.
"""

from __future__ import annotations

__all__ = ["REWARD_EMA_DECAY", "REWARD_SCALE"]

REWARD_EMA_DECAY = 0.98
REWARD_SCALE = 3.0
