"""Where the parts of a run live, and which weights train: small objects the trainer asks.

A placement (:class:`SingleProcess`, :class:`DataParallel`, :class:`TrainerRolloutSplit`)
answers the trainer at named points: build models, sync weights, reduce gradients,
gather metrics, agree on stopping, save (see `agentrl.placement.base`). An adapter
(:class:`FullWeights`, :class:`LoraAdapter`) says which weights train and what
checkpoints, rollout engines and exports take from the policy.

:func:`placement_for` picks the placement of this process: one process, unless launched
by ``torchrun`` (``torchrun --nproc_per_node=N -m agentrl.cli train --multi_gpu_mode
ddp``, or ``trainer_rollout``), in which case it joins the process group first.
"""

from __future__ import annotations

from agentrl.assembly.models import run_dtype
from agentrl.config import TrainConfig
from agentrl.errors import UsageError
from agentrl.placement.adapters import Adapter, FullWeights, LoraAdapter, adapter_for
from agentrl.placement.base import Placement, RolloutSetup, SingleProcess
from agentrl.placement.ddp import DataParallel
from agentrl.placement.fsdp import FullyShardedDataParallel
from agentrl.placement.runtime import (
    DEFAULT_TIMEOUT_S,
    DistContext,
    DistributedError,
    init_distributed,
    launched_by_torchrun,
    shutdown,
)
from agentrl.placement.split import TrainerRolloutSplit

MODES = ("trainer_rollout", "ddp")


def placement_for(config: TrainConfig, ctx: DistContext | None = None) -> Placement:
    """This process's placement; under ``torchrun`` joins the process group (unless
    ``ctx`` is given) and takes the layout ``config.multi_gpu_mode`` names."""
    sharded = bool(config.fsdp)
    if ctx is None and launched_by_torchrun(one_rank_too=sharded):
        ctx = init_distributed(config.dist_backend, config.dist_timeout_sec, one_rank_too=sharded)
    if config.fsdp and config.multi_gpu_mode != "ddp":
        raise ValueError("fsdp=1 shards the data-parallel layout: use multi_gpu_mode ddp")
    if config.fsdp and ctx is None:
        raise ValueError("fsdp=1 runs under torchrun (torchrun --nproc_per_node=1 for one GPU)")
    if config.fsdp and ctx is not None:
        placement: Placement = FullyShardedDataParallel(ctx, run_dtype(config))
    elif ctx is None or ctx.world_size <= 1:
        placement = SingleProcess()
    elif config.multi_gpu_mode == "ddp":
        placement = DataParallel(ctx)
    elif config.multi_gpu_mode == "trainer_rollout":
        placement = TrainerRolloutSplit(ctx)
    else:
        raise UsageError(f"multi_gpu_mode must be one of {MODES}, got {config.multi_gpu_mode!r}")
    placement.check(config)
    return placement


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MODES",
    "Adapter",
    "DataParallel",
    "DistContext",
    "DistributedError",
    "FullWeights",
    "FullyShardedDataParallel",
    "LoraAdapter",
    "Placement",
    "RolloutSetup",
    "SingleProcess",
    "TrainerRolloutSplit",
    "adapter_for",
    "init_distributed",
    "launched_by_torchrun",
    "placement_for",
    "shutdown",
]
