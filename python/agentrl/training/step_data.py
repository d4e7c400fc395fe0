"""What a training step is given (:class:`StepSettings`, built once from the run's config)
and what it gives back (:class:`StepOutcome`, with the per-token view of :class:`TokenStats`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from agentrl.rewards import CombinedReward, RewardConfig
from agentrl.rl.advantages import AdvantageConfig
from agentrl.rl.bc import BCConfig
from agentrl.rl.losses import LossConfig
from agentrl.rl.optim import StepReport
from agentrl.rl.pack import PackedBatch
from agentrl.tools.mcp import MCPServer
from agentrl.training.scoring import Scores


@dataclass
class StepSettings:
    """What shapes every step of a run (built once from the config)."""

    loss: LossConfig
    advantage: AdvantageConfig
    bc: BCConfig
    reward: RewardConfig
    num_generations: int
    max_total_len: int
    strict_group_packing: bool
    stale_discount: float
    micro_batch_size: int
    # Optimizer updates per rollout batch: `ppo_epochs` passes, each cutting the rows into
    # `num_mini_batches` parts; every part is one update against the same behaviour log-probs.
    ppo_epochs: int = 1
    num_mini_batches: int = 1
    default_tools: list[dict[str, Any]] = field(default_factory=list)
    rewards: CombinedReward | None = None  # the reward functions (None: tool_use alone)
    user_tools: bool = False  # tools beyond the built-ins (--tools, --mcp): their metrics
    tool_servers: tuple[MCPServer, ...] = ()  # the run's MCP servers (their restarts)
    # Logits are divided by this before log-probs (1.0: raw; else the sampling temperature,
    # the same divisor the rollouts' behaviour log-probs used).
    logprob_temperature: float = 1.0


@dataclass
class StepOutcome:
    metrics: dict[str, float]
    report: StepReport | None  # None when nothing could be trained on
    scores: Scores | None
    batch: PackedBatch | None
    reward_baseline: float
    advantages: torch.Tensor | None = None  # [rows] per trajectory of ``batch``
    current_version: int = 0  # the trainer's policy version the step trained against
    # Per-turn modes: [rows, turns] advantages (None: one per episode, ``advantages``).
    turn_advantages: torch.Tensor | None = None
    tokens: TokenStats | None = None  # what the trainer saw of each token, for the dumps
    # The step's timings (drawing its rollout groups, training on them) and dynamic
    # sampling's metrics: filled in by the trainer, which times the step.
    rollout_seconds: float = 0.0
    train_seconds: float = 0.0
    sampling_metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class TokenStats:
    """Each packed position's trained log-prob and entropy ([rows, T-1], 0 off the loss),
    taken from the first pass over its row (later updates have moved the policy), and the
    advantage each position trained with."""

    logps: torch.Tensor
    entropy: torch.Tensor
    advantages: torch.Tensor
    seen: torch.Tensor  # [rows] bool

    @staticmethod
    def empty(batch: PackedBatch, advantages: torch.Tensor) -> TokenStats:
        zeros = torch.zeros_like(batch.behavior_logps)
        if advantages.dim() == 1:
            advantages = advantages.unsqueeze(1) * batch.loss_mask
        seen = torch.zeros(batch.num_rows, dtype=torch.bool, device=zeros.device)
        return TokenStats(zeros, zeros.clone(), advantages.detach(), seen)

    def keeper(self, origin: torch.Tensor | None) -> Callable[..., None]:
        """``record`` for a pass over ``batch[origin]`` (None: the whole batch)."""

        def keep(rows: torch.Tensor, logps: torch.Tensor, entropy: torch.Tensor | None) -> None:
            self.record(rows if origin is None else origin[rows], logps, entropy)

        return keep

    def record(self, rows: torch.Tensor, logps: torch.Tensor, entropy: torch.Tensor | None):
        fresh = rows[~self.seen[rows]]
        if not fresh.numel():
            return
        keep = ~self.seen[rows]
        width = logps.size(1)
        self.logps[fresh, :width] = logps.detach()[keep].float()
        if entropy is not None:
            self.entropy[fresh, :width] = entropy.detach()[keep].float()
        self.seen[fresh] = True


__all__ = ["StepOutcome", "StepSettings", "TokenStats"]
