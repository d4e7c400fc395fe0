"""What the processes of one launch share: files rank 0 makes first, then everyone reads.

Rank 0 prepares the run (a warm start with `agentrl sft` when the model is missing, the
generated prompt file) while the other ranks wait; then every rank builds from the same
files. Ranks > 0 read rank 0's generated prompts instead of writing their own copy
(several processes writing one file at once could read it half-written).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import torch

from agentrl.config import TrainConfig
from agentrl.placement.runtime import DistContext
from agentrl.training.models import Models

# How long ranks > 0 wait while rank 0 prepares the run (a warm start can take minutes).
PREPARE_TIMEOUT_S = 3600.0
WAIT_FOR_RANK_0 = "wait for rank 0 to prepare the run"


@contextlib.contextmanager
def rank_0_first(ctx: DistContext) -> Iterator[None]:
    """Rank 0 runs the block, then the other ranks do."""
    if ctx.rank > 0:
        ctx.barrier(WAIT_FOR_RANK_0, PREPARE_TIMEOUT_S)
    yield
    if ctx.rank == 0:
        ctx.barrier(WAIT_FOR_RANK_0, PREPARE_TIMEOUT_S)


class OnRanks:
    """A placement over the ranks of one process group: rank 0 logs, evaluates and writes."""

    collective_io = False  # rank 0 alone writes checkpoints and exports

    def __init__(self, ctx: DistContext) -> None:
        self.ctx = ctx

    def final_policy(self, models: Models) -> torch.nn.Module | None:
        """Rank 0's policy (every rank holds the whole of it); None elsewhere."""
        return models.policy if self.is_main else None

    @property
    def is_main(self) -> bool:
        return self.ctx.rank == 0


def prompts_config(config: TrainConfig, rank: int) -> TrainConfig:
    """The config rank ``rank`` loads its prompts with: rank 0's generated file on ranks > 0
    (they never evaluate, so they load no held-out set)."""
    if rank == 0 or config.data_path:
        return config
    generated = config.run_dir / "data" / "train_prompts.jsonl"
    return dataclasses.replace(config, data_path=str(generated), eval_ratio=0.0, eval_data_path="")


__all__ = ["PREPARE_TIMEOUT_S", "OnRanks", "prompts_config", "rank_0_first"]
