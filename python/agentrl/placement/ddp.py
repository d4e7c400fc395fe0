"""Data parallelism (``--multi_gpu_mode ddp``): every rank rolls out and trains on its shard.

Each rank holds the whole policy, plays episodes for its own shard of the prompt pool and
computes the gradient of its own batch; gradients are then averaged over ranks, so every
rank takes the same optimizer step and the replicas stay identical. With the
``sequence``/``grpo`` reductions and the same number of rows per rank, the averaged
gradient is exactly the gradient of one process training on the union of the batches.

Why gradients are averaged here rather than by ``DistributedDataParallel``'s backward
hooks: a training step runs a data-dependent number of backward passes (micro-batches,
the behaviour-cloning loss when a batch has examples, none at all when a loss is not
finite). DDP's hooks all-reduce inside every backward, so ranks that run different
numbers of backward passes would wait on each other forever. Here each rank accumulates
its step's gradient locally; :class:`DistributedOptimization` then (1) agrees across
ranks whether the step is kept (one bad rank skips it everywhere), and (2) averages the
kept gradient with bucketed all-reduces, the same reduction DDP performs, once per step.
:class:`DistributedBeta` keeps the adaptive KL coefficient identical on every rank by
feeding it rank-averaged KL values.

:class:`DataParallel` is the placement: rank 0 prepares the run's files first, every rank
starts from rank 0's weights and rolls out on its shard with its own random stream, the
ranks agree on each batch, on skipping a step and on stopping (a signal or the time limit
on any rank stops all of them after the same step), and step metrics are averaged. Only
rank 0 logs, evaluates, writes checkpoints and exports.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from agentrl.assembly.prompts import load_prompts
from agentrl.config import TrainConfig
from agentrl.data import PromptPool
from agentrl.errors import UsageError
from agentrl.placement.base import Log, RolloutSetup
from agentrl.placement.runtime import DistContext
from agentrl.placement.shared import OnRanks, prompts_config, rank_0_first
from agentrl.rl.advantages import update_reward_baseline
from agentrl.rl.kl_control import BetaConfig, BetaController
from agentrl.rl.optim import OptimConfig, Optimization, StepReport
from agentrl.tools import ToolRegistry
from agentrl.training.models import Models
from agentrl.training.signals import StopRequest
from agentrl.training.sources import GroupSource
from agentrl.training.step import StepOutcome


def shard_indices(n: int, world_size: int, rank: int) -> list[int]:
    """Indices of rank ``rank``'s shard: every ``world_size``-th item.

    A rank whose shard would be empty gets one item, so no rank starves.
    """
    if world_size <= 1:
        return list(range(n))
    out = list(range(rank, n, world_size))
    return out or ([rank % n] if n else [])


def shard_pool(pool: PromptPool, world_size: int, rank: int) -> PromptPool:
    """This rank's shard of a `PromptPool`."""
    return pool.subset(shard_indices(len(pool), world_size, rank))


@torch.no_grad()
def broadcast_module_(ctx: DistContext, module: torch.nn.Module, src: int = 0) -> None:
    """Make every rank's ``module`` (parameters and buffers) equal to rank ``src``'s."""
    tensors = [t for t in module.state_dict(keep_vars=True).values() if torch.is_tensor(t)]
    seen: set[int] = set()
    unique = []
    for t in tensors:  # tied weights appear twice in a state dict
        key = id(t)
        if key not in seen:
            seen.add(key)
            unique.append(t.data if isinstance(t, torch.nn.Parameter) else t)
    ctx.broadcast_tensors(unique, src=src, what="broadcast initial weights")


def _local_skip_reason(params: Sequence[torch.nn.Parameter]) -> str | None:
    for p in params:
        if p.grad is not None and not bool(torch.isfinite(p.grad).all()):
            return "non-finite gradient"
    return None


def one_torch_worker(setup: RolloutSetup) -> RolloutSetup:
    """The torch engine under data parallelism rolls out with one background thread per
    rank: more would only wait on the engine's lock (a warning says so)."""
    cfg = setup.config
    if cfg.rollout_engine != "torch" or cfg.async_workers <= 1:
        return setup
    setup.log(
        f"warning: async_workers {cfg.async_workers} -> 1: under ddp the torch engine's "
        "rollout threads would take turns on its lock"
    )
    return dataclasses.replace(setup, config=cfg.replace(async_workers=1))


class DistributedOptimization(Optimization):
    """`Optimization` whose steps are agreed and whose gradients are averaged across ranks."""

    def __init__(
        self, model: torch.nn.Module, config: OptimConfig, total_steps: int, ctx: DistContext
    ) -> None:
        super().__init__(model, config, total_steps)
        self.ctx = ctx

    def finish(self, skip: str | None = None) -> StepReport:
        local = skip or self._bad or _local_skip_reason(self.params)
        reasons = self.ctx.all_gather_objects(local, what="agree on the training step")
        bad = [f"rank {r}: {why}" for r, why in enumerate(reasons) if why]
        if bad:
            return super().finish(skip="; ".join(bad))
        grads = []
        for p in self.params:
            if p.grad is None:  # a parameter this rank's batch did not reach
                p.grad = torch.zeros_like(p)
            grads.append(p.grad)
        self.ctx.all_reduce_mean_(grads, what="average gradients")
        return super().finish()


class DistributedBeta(BetaController):
    """`BetaController` driven by KL values averaged over ranks (so beta stays in sync)."""

    def __init__(self, config: BetaConfig, ctx: DistContext) -> None:
        super().__init__(config)
        self.ctx = ctx

    def _agreed(self, metrics: dict[str, Any]) -> dict[str, Any]:
        keys = sorted({self.metric_key, "policy/kl_ref"})
        local = [float(metrics.get(k, 0.0) or 0.0) for k in keys]
        local = [v if math.isfinite(v) else 0.0 for v in local]
        means = self.ctx.mean(local, what="average the KL control metric")
        out = dict(metrics)
        out.update(dict(zip(keys, means, strict=True)))
        return out

    def should_stop(self, metrics: dict[str, Any]) -> str | None:
        return super().should_stop(self._agreed(metrics))

    def update(self, metrics: dict[str, Any], opt_step: int) -> float:
        return super().update(self._agreed(metrics), opt_step)


class DataParallel(OnRanks):
    """Every rank rolls out on its shard and trains; gradients averaged (see module doc)."""

    name = "ddp"
    shards_weights = False  # every rank holds the whole policy

    @property
    def is_rollout_rank(self) -> bool:
        return False

    @property
    def data_shards(self) -> int:
        return self.ctx.world_size

    def check(self, config: TrainConfig) -> None:
        if config.fsdp and not self.shards_weights:
            raise ValueError("fsdp=1 needs the FullyShardedDataParallel placement")
        if config.rollout_engine in ("sglang", "vllm-server"):
            server = "SGLang" if config.rollout_engine == "sglang" else "vLLM server"
            raise UsageError(
                f"the {server} engine is one server for one trainer: run a single process "
                "(the server is the rollout fleet), not torchrun"
            )

    def preparing(self) -> contextlib.AbstractContextManager[None]:
        return rank_0_first(self.ctx)

    def load_prompts(
        self, config: TrainConfig, tools: ToolRegistry, log: Log
    ) -> tuple[PromptPool, PromptPool]:
        ctx = self.ctx
        train, held_out = load_prompts(prompts_config(config, ctx.rank), tools, log)
        return shard_pool(train, ctx.world_size, ctx.rank), held_out

    def share_weights(self, models: Models) -> None:
        """Rank 0's weights everywhere: the policy and its reference and rollout copies."""
        seen: set[int] = set()
        for module in (models.policy, models.reference, models.rollout):
            if id(module) not in seen:
                seen.add(id(module))
                broadcast_module_(self.ctx, module)

    def rollout_source(self, setup: RolloutSetup) -> GroupSource:
        """This rank's shard with its own random stream (the same split and evaluation)."""
        setup = one_torch_worker(setup)
        return setup.local_source(seed=setup.config.seed + self.ctx.rank)

    def optimization(
        self, policy: torch.nn.Module, config: OptimConfig, total_steps: int
    ) -> Optimization:
        return DistributedOptimization(policy, config, total_steps, self.ctx)

    def beta_controller(self, config: BetaConfig) -> BetaController:
        return DistributedBeta(config, self.ctx)

    def gather(self, value: Any, what: str) -> list[Any]:
        return self.ctx.all_gather_objects(value, what=what)

    def ranks_able_to_train(self, can_train: Callable[[], bool]) -> list[bool]:
        """Asked before training: a rank that cannot pack its batch would skip the gradient
        collectives the others wait in, so one such rank skips the step everywhere."""
        return self.ctx.all_gather_objects(bool(can_train()), what="agree on packing")

    def batch_reward_baseline(self, outcome: StepOutcome, before: float, decay: float) -> None:
        """The baseline follows the mean reward of the whole (all-rank) batch."""
        report = outcome.report
        if report is None or not report.stepped:
            return
        (mean,) = self.ctx.mean(
            [outcome.metrics.get("reward/mean", 0.0)], what="average the reward"
        )
        baseline = update_reward_baseline(before, mean, decay, report.opt_step)
        outcome.reward_baseline = baseline
        outcome.metrics["reward/baseline"] = baseline

    def gather_metrics(self, metrics: Mapping[str, Any]) -> dict[str, Any]:
        out = self.ctx.average_metrics(metrics, what="average step metrics")
        out["dist/world_size"] = float(self.ctx.world_size)
        return out

    def agree_on_stop(self, stop: StopRequest) -> bool:
        """If any rank wants to stop (a signal, its time limit, a request), all stop now,
        with every rank's reason."""
        mine = stop.reason if stop.requested else None
        reasons = self.ctx.all_gather_objects(mine, what="agree on stop")
        wanted = [f"rank {r}: {why}" for r, why in enumerate(reasons) if why]
        if wanted:
            stop.reason = "; ".join(wanted)
        return bool(wanted)

    def rollout_worker(self, config: TrainConfig) -> Any:
        raise RuntimeError("every data-parallel rank trains; none runs a rollout worker")


__all__ = [
    "DataParallel",
    "DistributedBeta",
    "DistributedOptimization",
    "broadcast_module_",
    "shard_indices",
    "shard_pool",
]
