"""The trainer/rollout split (``--multi_gpu_mode trainer_rollout``): rank 0 trains, ranks
1..N-1 only roll out.

Rank 0 trains exactly as one process would, except that its groups come from the
rollout ranks and its weight syncs go to them (:class:`~agentrl.placement.rollout_ranks.
GatheredSource`). A rollout rank does not build a trainer at all: the entry point sees
:attr:`TrainerRolloutSplit.is_rollout_rank` and runs :meth:`TrainerRolloutSplit.
rollout_worker`, which loads the policy for sampling only and serves rank 0's commands
(:class:`~agentrl.placement.rollout_ranks.RolloutWorker`) until rank 0 says stop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from agentrl.assembly.engines import rollout_engine, torch_engine
from agentrl.assembly.models import model_spec
from agentrl.assembly.prompts import load_prompts
from agentrl.assembly.sources import group_shape
from agentrl.assembly.task import build_tools, episode_config, resolve_call_mode
from agentrl.config import TrainConfig
from agentrl.errors import UsageError
from agentrl.models import frozen_copy, load_configured_policy, resolve_device
from agentrl.placement.base import RolloutSetup, SingleProcess
from agentrl.placement.rollout_ranks import GatheredSource, RolloutWorker
from agentrl.placement.runtime import DistContext
from agentrl.placement.shared import (
    PREPARE_TIMEOUT_S,
    WAIT_FOR_RANK_0,
    OnRanks,
    prompts_config,
)
from agentrl.rollout import AsyncRollout, PolicyVersion
from agentrl.training.sources import GroupSource


def split_version_gap(config: TrainConfig) -> int:
    """How many versions a group may lag in this layout when ``max_version_gap`` is -1:
    rollout ranks lag more than an in-process worker does, so the bound is wider."""
    if config.max_version_gap >= 0:
        return int(config.max_version_gap)
    return max(
        int(config.max_head_offpolicyness), min(max(2, int(config.policy_sync_interval) * 2), 4)
    )


def split_queue_groups(config: TrainConfig, gap: int, rollout_ranks: int) -> int:
    """A rollout rank's queue capacity when ``max_queue_groups`` is 0: room for ``gap`` + 1
    versions of batches, and at least max(8, 4 x rollout ranks) batches, so that the ranks
    together keep rank 0 fed (the reference rule)."""
    if config.max_queue_groups > 0:
        return int(config.max_queue_groups)
    batch = int(config.batch_size)
    return max((gap + 1) * batch, batch * max(8, 4 * rollout_ranks))


class TrainerRolloutSplit(OnRanks, SingleProcess):
    """Rank 0 trains as one process does, on groups from ranks 1..N-1 (see module doc)."""

    name = "trainer_rollout"

    def __init__(self, ctx: DistContext) -> None:
        if ctx.world_size < 2:
            raise UsageError("trainer_rollout needs at least 2 ranks (1 trainer + rollout)")
        super().__init__(ctx)

    @property
    def is_rollout_rank(self) -> bool:
        return self.ctx.rank > 0

    def check(self, config: TrainConfig) -> None:
        if config.fsdp:
            raise ValueError("fsdp=1 shards the data-parallel layout: use multi_gpu_mode ddp")
        if config.rollout_engine != "torch":
            raise UsageError("trainer_rollout rolls out with the torch engine on ranks 1..N-1")
        if config.agent:
            raise UsageError(
                "--agent plays its episodes in the training process: use "
                "multi_gpu_mode ddp (or one process), not trainer_rollout"
            )

    @contextlib.contextmanager
    def preparing(self) -> Iterator[None]:
        """Rank 0 makes the shared files; the rollout ranks wait in :meth:`rollout_worker`."""
        yield
        self.ctx.barrier(WAIT_FOR_RANK_0, PREPARE_TIMEOUT_S)

    def rollout_source(self, setup: RolloutSetup) -> GroupSource:
        """Groups gathered from the rollout ranks; rank 0's own engine only evaluates."""
        config, models = setup.config, setup.models
        engine = rollout_engine(config, models, seed=config.seed)
        return GatheredSource(
            self.ctx,
            engine,
            batch_size=config.batch_size,
            max_version_gap=split_version_gap(config),
            fetch_timeout_s=config.fetch_timeout_sec,
            version=PolicyVersion(0),
            log=setup.log,
        )

    def rollout_worker(self, config: TrainConfig) -> RolloutWorker:
        """This rollout rank's worker, built once rank 0 has prepared the run; call
        ``run()`` on it to serve rank 0 until the run ends."""
        ctx = self.ctx
        if not self.is_rollout_rank:
            raise RuntimeError("rank 0 of trainer_rollout trains; it runs no rollout worker")

        def log(message: str) -> None:
            print(f"[rank {ctx.rank}] {message}", flush=True)

        ctx.barrier(WAIT_FOR_RANK_0, PREPARE_TIMEOUT_S)
        cfg = prompts_config(config, ctx.rank)
        device = (
            ctx.device
            if ctx.device.type == "cuda"
            else resolve_device(None if cfg.device == "auto" else cfg.device)
        )
        model, tokenizer = load_configured_policy(model_spec(cfg), "float32", device, cfg)
        model = frozen_copy(model)
        if hasattr(model, "config"):
            model.config.use_cache = True
        tools = build_tools(cfg)
        train_pool, _ = load_prompts(cfg, tools, log)
        cfg = resolve_call_mode(cfg, train_pool, cfg.agent or None, log)
        seed = cfg.seed + ctx.rank
        engine = torch_engine(cfg, model, tokenizer, seed=seed)
        gap = split_version_gap(cfg)
        rollout = AsyncRollout(
            engine,
            train_pool,
            tools,
            version=PolicyVersion(0),
            config=episode_config(cfg),
            max_version_gap=gap,
            max_queue_groups=split_queue_groups(cfg, gap, ctx.world_size - 1),
            num_workers=max(1, cfg.async_workers),
            **group_shape(cfg, seed),
        )
        return RolloutWorker(ctx, rollout, log=log)


__all__ = ["TrainerRolloutSplit", "split_version_gap"]
