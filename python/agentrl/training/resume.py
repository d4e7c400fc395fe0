"""Checkpoints of a run and exact resume from them.

A checkpoint (written atomically by `agentrl.training.checkpoint`) holds the policy weights,
the optimizer/scheduler/accumulation state, every RNG state and the trainer's counters:
step, optimizer step, policy version, reward baseline, beta and its EMA, and the rollout
engine's cumulative counters (the ``rollout/*`` metrics), so that they go on counting
across a resume instead of restarting from zero. When the rollout engine's weights lag
behind the policy (``policy_sync_interval`` > 1) they are saved too, so the resumed run
samples from exactly the weights the original would have.

Which weights a checkpoint holds and which the rollout engine loads is the policy's
:class:`PolicyWeights` (all of them; or, with a LoRA adapter, the adapter alone in the
checkpoint and the merged weights in the engine).
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.fsdp import FSDPModule

from agentrl.errors import UsageError, UserError, first_line
from agentrl.rl.kl_control import BetaController
from agentrl.rl.optim import Optimization
from agentrl.training.checkpoint import (
    Checkpoint,
    ResumeState,
    is_sharded_checkpoint,
    latest_checkpoint,
    load_checkpoint,
    load_sharded_checkpoint,
    restore_rng_state,
    save_checkpoint,
    save_sharded_checkpoint,
)
from agentrl.training.models import Models
from agentrl.training.sources import GroupSource

CHECKPOINT_DIR = "checkpoints"
ROLLOUT_STATS = "rollout_stats"  # the key of the engine's counters in ResumeState.extra


class PolicyWeights(Protocol):
    """What of the policy a checkpoint holds, and what the rollout engine loads."""

    def checkpointed(self, policy: torch.nn.Module) -> torch.nn.Module:
        """The module whose state dict a checkpoint saves and loads."""
        ...

    def rollout_weights(
        self, policy: torch.nn.Module
    ) -> torch.nn.Module | Mapping[str, torch.Tensor]:
        """What a rollout engine loads to sample from ``policy``."""
        ...


@dataclass
class Counters:
    """The trainer's own state between steps (the rest lives in the objects it drives)."""

    step: int = 0
    reward_baseline: float = 0.0
    rollout_current: bool = True  # the rollout engine holds the policy's latest weights
    trained_tokens: int = 0  # tokens trained on so far, every rank's


def checkpoint_root(run_dir: Path) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR


def engine_counters(engine: Any) -> dict[str, Any] | None:
    """The engine's cumulative counters (``rollout/*``); None for an engine without them."""
    stats = getattr(engine, "stats", None)
    return stats if isinstance(stats, dict) else None


def save_run(
    run_dir: Path,
    counters: Counters,
    models: Models,
    optimization: Optimization,
    beta: BetaController,
    source: GroupSource,
    keep_last: int,
    *,
    weights: PolicyWeights,
) -> Path | None:
    """Write a checkpoint of the current state; None when the weights are not finite."""
    extra: dict[str, Any] = {"trained_tokens": counters.trained_tokens}
    stats = engine_counters(source.engine)
    if stats is not None:
        extra[ROLLOUT_STATS] = {k: v for k, v in stats.items() if isinstance(v, int | float)}
    if not counters.rollout_current:
        extra["rollout_weights"] = {
            k: v.detach().cpu().clone() for k, v in source.engine.model.state_dict().items()
        }
    state = ResumeState(
        step=counters.step,
        opt_step=optimization.opt_step,
        policy_version=source.version.get(),
        reward_baseline=counters.reward_baseline,
        beta=beta.beta,
        beta_ema=beta.ema,
        extra=extra,
    )
    if is_sharded(models.policy):
        return save_sharded_checkpoint(
            checkpoint_root(run_dir),
            models.policy,
            optimization.optimizer,
            state,
            optimization.state_dict(),
            keep_last=keep_last,
        )
    return save_checkpoint(
        checkpoint_root(run_dir),
        weights.checkpointed(models.policy),
        state,
        optimization.state_dict(),
        keep_last=keep_last,
    )


def is_sharded(model: torch.nn.Module) -> bool:
    """The policy is cut into FSDP shards (its checkpoints go through DCP)."""
    return isinstance(model, FSDPModule)


def _load(
    path: Path, models: Models, optimization: Optimization, weights: PolicyWeights
) -> Checkpoint:
    """Weights and optimization state from a whole or a sharded checkpoint (a sharded
    one loads into any number of ranks, one process included)."""
    if not is_sharded_checkpoint(path):
        if is_sharded(models.policy):
            raise ValueError(f"{path} holds whole weights; fsdp=1 resumes from sharded ones")
        ckpt = load_checkpoint(path, weights.checkpointed(models.policy))
        if ckpt.optimization is not None:
            optimization.load_state_dict(ckpt.optimization)
        return ckpt
    if optimization.masters is not None:
        raise ValueError(f"{path} is sharded: resume it with fsdp=1 or dtype=float32")
    ckpt = load_sharded_checkpoint(path, models.policy, optimization.optimizer)
    rest = ckpt.optimization or {}
    optimization.scheduler.load_state_dict(rest["scheduler"])
    optimization.opt_step = int(rest["opt_step"])
    optimization.pending = int(rest.get("pending", 0))
    return ckpt


def find_resume_point(run_dir: Path) -> Path | None:
    return latest_checkpoint(checkpoint_root(run_dir))


# What torch and pickle say of a file that is truncated or not a checkpoint at all.
_DAMAGED = (
    "PytorchStreamReader",
    "zip archive",
    "central directory",
    "unpickling",
    "Ran out of input",
    "truncated",
    "invalid load key",
)


def is_damaged(exc: BaseException) -> bool:
    """Whether ``exc`` says the checkpoint's files are broken (not that they do not fit)."""
    if isinstance(exc, EOFError | pickle.UnpicklingError | FileNotFoundError):
        return True
    text = str(exc)
    return any(marker in text for marker in _DAMAGED)


def restore_run(
    path: Path,
    models: Models,
    optimization: Optimization,
    beta: BetaController,
    source: GroupSource,
    *,
    weights: PolicyWeights,
    reference_too: bool = False,
) -> Counters:
    """Load checkpoint ``path`` into every object; return the counters to continue from.

    A checkpoint that does not fit the model (another ``--model``, another LoRA setting) or
    cannot be read is a :class:`UserError` naming it.
    """
    try:
        ckpt = _load(path, models, optimization, weights)
    except (OSError, RuntimeError, ValueError, KeyError, EOFError, pickle.UnpicklingError) as exc:
        if is_damaged(exc):  # not a question of options: the files themselves are broken
            raise UserError(
                f"checkpoint {path} cannot be resumed (from_resume=1): its files are damaged "
                f"or incomplete ({first_line(exc)}); remove it to resume from the checkpoint "
                "before it"
            ) from exc
        raise UserError(
            f"checkpoint {path} cannot be resumed (from_resume=1): {first_line(exc)}; "
            "resume with the model and options of the run that wrote it"
        ) from exc
    if reference_too and is_sharded(models.reference):
        raise UsageError("ref_from_rl_checkpoint=1 with fsdp=1 is not supported")
    resume = ckpt.resume
    beta.load_state_dict({"beta": resume.beta, "beta_ema": resume.beta_ema})
    if reference_too:
        models.reference.load_state_dict(models.policy.state_dict())
    rollout_weights = resume.extra.get("rollout_weights")
    engine = source.engine
    with engine.lock, torch.no_grad():
        source_state = (
            rollout_weights
            if rollout_weights is not None
            else weights.rollout_weights(models.policy)
        )
        if isinstance(source_state, torch.nn.Module) and is_sharded(source_state):
            options = StateDictOptions(full_state_dict=True)  # every rank: a collective
            source_state = get_model_state_dict(source_state, options=options)
        engine.update_weights(source_state, version=resume.policy_version)
        source.version.set(resume.policy_version)
        stats = engine_counters(engine)
        if stats is not None:  # as saved: the reload above is not one of the run's updates
            stats.update(resume.extra.get(ROLLOUT_STATS, {}))
    restore_rng_state(ckpt.rng)
    return Counters(
        step=resume.step,
        reward_baseline=resume.reward_baseline,
        rollout_current=rollout_weights is None,
        trained_tokens=int(resume.extra.get("trained_tokens", 0)),
    )


__all__ = [
    "CHECKPOINT_DIR",
    "Counters",
    "PolicyWeights",
    "checkpoint_root",
    "engine_counters",
    "find_resume_point",
    "restore_run",
    "save_run",
]
