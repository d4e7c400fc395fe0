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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from agentrl.distributed.runtime import DistContext
from agentrl.rl.kl_control import BetaConfig, BetaController
from agentrl.rl.optim import OptimConfig, Optimization, StepReport


def shard_indices(n: int, world_size: int, rank: int) -> list[int]:
    """Indices of rank ``rank``'s shard: every ``world_size``-th item (the seed's split).

    A rank whose shard would be empty gets one item, so no rank starves.
    """
    if world_size <= 1:
        return list(range(n))
    out = list(range(rank, n, world_size))
    return out or ([rank % n] if n else [])


def shard_pool(pool: Any, world_size: int, rank: int) -> Any:
    """This rank's shard of a `PromptPool`."""
    from agentrl.data import PromptPool

    samples = [pool[i] for i in shard_indices(len(pool), world_size, rank)]
    return PromptPool.from_samples(samples)


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


__all__ = [
    "DistributedBeta",
    "DistributedOptimization",
    "broadcast_module_",
    "shard_indices",
    "shard_pool",
]
