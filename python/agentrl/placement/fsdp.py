"""Fully sharded data parallelism (``--fsdp 1`` with ``--multi_gpu_mode ddp``): FSDP2.

The layout is :class:`~agentrl.placement.ddp.DataParallel`'s (each rank rolls out and
trains on its shard of the prompts; the ranks agree on batches, skipped steps, stopping
and metrics); what changes is where the weights live. The policy and the reference are
wrapped with torch's ``fully_shard`` (each decoder layer, then the whole model): each rank
stores 1/world_size of every parameter, of its gradient and of the optimizer state, with
parameters cast to ``--dtype`` for compute and gradients reduced in float32.

Why the step gathers the parameters once: a training step runs a data-dependent number of
forward and backward passes (micro-batches, the behaviour-cloning loss, none after a
non-finite loss), but FSDP gathers parameters inside every forward, a collective all ranks
must enter together. :class:`ShardedOptimization` therefore gathers the policy and the
reference at :meth:`~ShardedOptimization.begin` and keeps them whole for the step, turns
the per-backward gradient reduction off, and at :meth:`~ShardedOptimization.finish` runs
one zero-weighted pass that reduce-scatters the step's accumulated gradient on every rank
at once, before the ranks agree on keeping it. Between steps only the shards are held:
optimizer state and gradients are always sharded (the large part of a full fine-tune);
parameters are whole during a step (in ``--dtype``), like ZeRO stage 2.

Weights leave the shards at three points, each a collective every rank enters: a policy
sync gathers the full state dict for the rollout copy; checkpoints are written with
``torch.distributed.checkpoint`` (each rank its shards; loadable by any number of ranks,
one process included); the final export gathers the weights into rank 0's rollout copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

from agentrl.config import TrainConfig
from agentrl.models.layers import decoder_layers
from agentrl.placement.base import RolloutSetup
from agentrl.placement.ddp import DataParallel, DistributedOptimization
from agentrl.placement.runtime import DistContext
from agentrl.rl.optim import OptimConfig, Optimization, StepReport
from agentrl.training.memory import OffloadedReference
from agentrl.training.models import Models
from agentrl.training.sources import GroupSource

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def mixed_precision(dtype: str, device: torch.device) -> MixedPrecisionPolicy:
    """Parameters in ``dtype`` for compute, gradients reduced in float32.

    On the CPU the run computes in float32 (as without FSDP), so parameters stay float32.
    """
    param_dtype = _DTYPES[dtype] if device.type == "cuda" else torch.float32
    return MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)


def shard(model: torch.nn.Module, policy: MixedPrecisionPolicy) -> FSDPModule:
    """``fully_shard`` each decoder layer, then the root (embeddings, head, norms)."""
    for layer in decoder_layers(model):
        fully_shard(layer, mp_policy=policy)
    return fully_shard(model, mp_policy=policy)


def is_sharded(model: torch.nn.Module) -> bool:
    return isinstance(model, FSDPModule)


def _fsdp_modules(model: torch.nn.Module) -> list[FSDPModule]:
    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def gather_for_step(model: torch.nn.Module) -> None:
    """All-gather ``model``'s parameters and keep them whole until :func:`release`."""
    _keep_whole(model, True)


def release(model: torch.nn.Module) -> None:
    """Back to shards only, with the usual per-pass gather and reduction."""
    _keep_whole(model, False)


def _keep_whole(model: torch.nn.Module, whole: bool) -> None:
    for module in _fsdp_modules(model):
        module.set_reshard_after_forward(not whole)
        module.set_reshard_after_backward(not whole)
        module.set_requires_gradient_sync(not whole)
        if whole:
            module.unshard()
        else:
            module.reshard()


def _probe_input(model: torch.nn.Module) -> torch.Tensor:
    """One token on the model's device: the input of the zero-weighted reduction pass."""
    device = next(p for p in model.parameters()).device
    return torch.zeros((1, 1), dtype=torch.long, device=device)


def reduce_gradients(model: torch.nn.Module) -> None:
    """Reduce-scatter the gradient accumulated locally since :func:`gather_for_step`.

    A zero-weighted forward/backward with the reduction turned on: FSDP adds its (zero)
    gradient to the accumulated one and reduce-scatters the sum, on every rank at once.
    """
    for module in _fsdp_modules(model):
        module.set_requires_gradient_sync(True)
        module.set_reshard_after_backward(True)
    out = model(input_ids=_probe_input(model))
    logits = out.logits if hasattr(out, "logits") else out
    (logits.float().sum() * 0.0).backward()


class ShardedOptimization(DistributedOptimization):
    """Optimizer steps over sharded parameters; gradients reduce-scattered once per step."""

    def __init__(
        self,
        model: torch.nn.Module,
        config: OptimConfig,
        total_steps: int,
        ctx: DistContext,
        frozen: Iterable[torch.nn.Module] = (),
    ) -> None:
        super().__init__(model, config, total_steps, ctx)
        self.model = model
        self.frozen = [m for m in frozen if is_sharded(m)]

    def begin(self) -> None:
        for module in (self.model, *self.frozen):
            gather_for_step(module)
        super().begin()

    def finish(self, skip: str | None = None) -> StepReport:
        """Reduce (every rank, every step), then agree on keeping it and step."""
        reduce_gradients(self.model)
        for module in (self.model, *self.frozen):
            release(module)
        local = skip or self._bad or _nonfinite_local_grad(self.params)
        reasons = self.ctx.all_gather_objects(local, what="agree on the training step")
        bad = [f"rank {r}: {why}" for r, why in enumerate(reasons) if why]
        return Optimization.finish(self, skip="; ".join(bad) if bad else None)

    def backward(self, loss: torch.Tensor, weight: float = 1.0) -> bool:
        """As `Optimization.backward`, but the step goes on after a non-finite loss: the
        other ranks' passes do not wait on this one, and the step is skipped everywhere."""
        super().backward(loss, weight)
        return True


def _nonfinite_local_grad(params: Iterable[torch.nn.Parameter]) -> str | None:
    for p in params:
        grad = p.grad
        if grad is None:
            continue
        local = grad.to_local() if hasattr(grad, "to_local") else grad
        if not bool(torch.isfinite(local).all()):
            return "non-finite gradient"
    return None


def full_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every rank gets the whole (unsharded) state dict; a collective."""
    options = StateDictOptions(full_state_dict=True, cpu_offload=False)
    return get_model_state_dict(model, options=options)


class FullWeightsSource:
    """A group source whose syncs receive the gathered (unsharded) policy weights."""

    def __init__(self, inner: GroupSource) -> None:
        self._inner = inner

    def sync(self, model: Any) -> int:
        if isinstance(model, torch.nn.Module) and is_sharded(model):
            model = full_state_dict(model)
        return self._inner.sync(model)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class FullyShardedDataParallel(DataParallel):
    """DataParallel's layout with FSDP2-sharded policy and reference (see module doc)."""

    name = "fsdp"
    shards_weights = True
    collective_io = True  # checkpoints and exports gather shards: every rank takes part

    def __init__(self, ctx: DistContext, dtype: str = "bfloat16") -> None:
        super().__init__(ctx)
        self.dtype = dtype
        self._frozen: list[torch.nn.Module] = []

    def check(self, config: TrainConfig) -> None:
        super().check(config)
        if config.lora_rank > 0:
            raise ValueError(
                "fsdp=1 shards every weight; LoRA (lora_rank > 0) trains a few: "
                "use multi_gpu_mode ddp without fsdp for LoRA"
            )
        if config.use_compile:
            raise ValueError("fsdp=1 with use_compile=1 is not supported: set use_compile 0")
        if config.save_pth:
            raise ValueError("save_pth writes whole weights from rank 0: not with fsdp=1")

    def share_weights(self, models: Models) -> None:
        """Rank 0's weights everywhere, then the policy and reference cut into shards."""
        super().share_weights(models)
        policy = mixed_precision(self.dtype, models.device)
        shard(models.policy, policy)
        offloaded = isinstance(models.reference, OffloadedReference)  # moved whole per forward
        if models.reference is not models.policy and not offloaded:
            shard(models.reference, policy)
            self._frozen = [models.reference]
        models.forward = models.policy

    def rollout_source(self, setup: RolloutSetup) -> GroupSource:
        return FullWeightsSource(super().rollout_source(setup))  # type: ignore[return-value]

    def optimization(
        self, policy: torch.nn.Module, config: OptimConfig, total_steps: int
    ) -> Optimization:
        return ShardedOptimization(policy, config, total_steps, self.ctx, self._frozen)

    def final_policy(self, models: Models) -> torch.nn.Module | None:
        """The whole trained policy on rank 0 (its rollout copy, loaded from the shards);
        None elsewhere. Every rank must call it."""
        weights = full_state_dict(models.policy)
        if not self.is_main:
            return None
        models.rollout.load_state_dict(weights)
        return models.rollout

    def gather_metrics(self, metrics: Mapping[str, Any]) -> dict[str, Any]:
        out = super().gather_metrics(metrics)
        out["dist/fsdp"] = 1.0
        return out


__all__ = [
    "FullWeightsSource",
    "FullyShardedDataParallel",
    "ShardedOptimization",
    "full_state_dict",
    "is_sharded",
    "mixed_precision",
    "shard",
]
