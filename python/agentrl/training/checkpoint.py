"""RL checkpoints: atomic, never of broken weights, last N kept, resumable exactly.

A checkpoint is a directory ``<root>/step-NNNNNNN/`` holding ``model.pt`` (the full
precision state dict) and ``state.pt`` (optimizer/scheduler/accumulation state, RNG
states, counters, reward baseline, beta and its EMA). It is written under a temporary
name and renamed into place only when complete (files fsync'ed first), so a crash
mid-write leaves the previous checkpoints untouched and nothing half-written that
:func:`latest_checkpoint` would pick. Weights with a NaN/inf are never saved: resuming
from them would only reproduce the failure.

:func:`export_policy` writes the weights for use outside training: an HF directory (any
policy) or a MiniMind ``.pth`` (policies that came from one).
"""

from __future__ import annotations

import os
import random
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentrl.utils.atomic import (
    atomic_dir,
    complete_numbered_dirs,
    fsync_dir,
    fsync_tree,
    remove_stale_temps,
    replace_dir,
    saving,
)

__all__ = [
    "Checkpoint",
    "ResumeState",
    "export_policy",
    "is_sharded_checkpoint",
    "latest_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "load_sharded_checkpoint",
    "model_has_nonfinite",
    "restore_rng_state",
    "rng_state",
    "save_checkpoint",
    "save_sharded_checkpoint",
]

MODEL_FILE = "model.pt"
STATE_FILE = "state.pt"
# A sharded checkpoint holds its weights and optimizer state here instead of MODEL_FILE.
SHARDED_DIR = "dcp"
_STEP_DIR = re.compile(r"^step-(\d+)$")


@dataclass
class ResumeState:
    """The trainer's counters and controller state that a resume must restore."""

    step: int = 0
    opt_step: int = 0
    policy_version: int = 0
    reward_baseline: float = 0.0
    beta: float = 0.0
    beta_ema: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Checkpoint:
    path: Path
    resume: ResumeState
    optimization: dict[str, Any] | None  # Optimization.state_dict()
    rng: dict[str, Any]


@torch.no_grad()
def model_has_nonfinite(model: torch.nn.Module) -> bool:
    """True if any parameter or buffer holds a NaN or an infinity."""
    for tensor in list(model.parameters()) + list(model.buffers()):
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            return True
    return False


def rng_state() -> dict[str, Any]:
    """Python, numpy, torch and (when present) every CUDA device's RNG state."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Put every RNG back where :func:`rng_state` found it."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _durable_save(obj: Any, path: Path) -> None:
    with open(path, "wb") as fh:
        torch.save(obj, fh)
        fh.flush()
        os.fsync(fh.fileno())


def is_sharded_checkpoint(path: Path) -> bool:
    """Written by :func:`save_sharded_checkpoint` (weights in ``dcp/``, not ``model.pt``)."""
    return (Path(path) / SHARDED_DIR / ".metadata").is_file()


def list_checkpoints(root: str | os.PathLike[str]) -> list[Path]:
    """Complete checkpoints under ``root`` (whole or sharded), oldest first."""
    found = complete_numbered_dirs(root, _STEP_DIR, (STATE_FILE,))
    return [p for _, p in found if (p / MODEL_FILE).is_file() or is_sharded_checkpoint(p)]


def latest_checkpoint(root: str | os.PathLike[str]) -> Path | None:
    found = list_checkpoints(root)
    return found[-1] if found else None


def save_checkpoint(
    root: str | os.PathLike[str],
    model: torch.nn.Module,
    resume: ResumeState,
    optimization: dict[str, Any] | None = None,
    *,
    keep_last: int = 3,
) -> Path | None:
    """Write ``<root>/step-<resume.step>/`` atomically; None (nothing written) on bad weights.

    ``keep_last`` > 0 deletes all but the newest N complete checkpoints afterwards.
    """
    if model_has_nonfinite(model):
        return None
    root = Path(root)
    final = root / f"step-{int(resume.step):07d}"
    with saving(final):  # a full disk or a read-only directory: one line naming the path
        root.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(root, "step-")  # never a complete checkpoint
    with atomic_dir(final, sync=True) as tmp:
        weights = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
        _durable_save(weights, tmp / MODEL_FILE)
        state = {"resume": asdict(resume), "optimization": optimization, "rng": rng_state()}
        _durable_save(state, tmp / STATE_FILE)
    if keep_last > 0:
        for old_ckpt in list_checkpoints(root)[:-keep_last]:
            shutil.rmtree(old_ckpt, ignore_errors=True)
    return final


def load_checkpoint(
    path: str | os.PathLike[str], model: torch.nn.Module, *, strict: bool = True
) -> Checkpoint:
    """Load the weights of checkpoint ``path`` into ``model``; return the rest.

    RNG states are returned, not applied: the caller restores them (with
    :func:`restore_rng_state`) once everything that consumes randomness is built.
    """
    path = Path(path)
    weights = torch.load(path / MODEL_FILE, map_location="cpu", weights_only=True)
    model.load_state_dict(weights, strict=strict)
    state = torch.load(path / STATE_FILE, map_location="cpu", weights_only=False)
    return Checkpoint(
        path=path,
        resume=ResumeState(**state["resume"]),
        optimization=state.get("optimization"),
        rng=state["rng"],
    )


def export_policy(
    model: torch.nn.Module,
    tokenizer: Any,
    out: str | os.PathLike[str],
    fmt: str = "auto",
) -> Path:
    """Export weights: ``hf`` directory, MiniMind ``pth`` file, or ``auto`` (by origin).

    ``auto`` writes a ``.pth`` when the policy was loaded from a MiniMind checkpoint,
    an HF directory otherwise. Both are written atomically.
    """
    from agentrl.models.loading import policy_origin

    if model_has_nonfinite(model):
        raise ValueError("refusing to export weights that contain NaN or inf")
    if fmt == "auto":
        fmt = "pth" if policy_origin(model) == "minimind" else "hf"
    out = Path(out)
    if fmt == "pth":
        from agentrl.models.minimind import export_pth

        return export_pth(model, out)
    if fmt != "hf":
        raise ValueError(f"unknown export format {fmt!r} (auto, hf, pth)")
    with saving(out):
        out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_dir(out) as tmp:
        model.save_pretrained(str(tmp))
        if tokenizer is not None:
            tokenizer.save_pretrained(str(tmp))
    return out


# ---------------------------------------------------------------- sharded (FSDP) checkpoints


def _dist_ready() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def _rank() -> int:
    return torch.distributed.get_rank() if _dist_ready() else 0


def _barrier() -> None:
    if _dist_ready():
        torch.distributed.barrier()


@torch.no_grad()
def _nonfinite_anywhere(model: torch.nn.Module) -> bool:
    """`model_has_nonfinite` over every rank's shards (a collective under torchrun)."""
    bad = False
    for tensor in list(model.parameters()) + list(model.buffers()):
        local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
        if local.is_floating_point() and not bool(torch.isfinite(local).all()):
            bad = True
            break
    if _dist_ready():
        flag = torch.tensor([1 if bad else 0], dtype=torch.int64)
        if torch.distributed.get_backend() == "nccl":
            flag = flag.cuda()
        torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
        bad = bool(flag.item())
    return bad


def _sharded_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, pending_grads: bool
) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import (
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    state: dict[str, Any] = {
        "model": get_model_state_dict(model),
        "optim": get_optimizer_state_dict(model, optimizer),
    }
    if pending_grads:
        state["grads"] = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    return state


def save_sharded_checkpoint(
    root: str | os.PathLike[str],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    resume: ResumeState,
    optimization: dict[str, Any],
    *,
    keep_last: int = 3,
) -> Path | None:
    """Every rank writes its shards with `torch.distributed.checkpoint`; rank 0 the rest.

    Collective: every rank calls it. The checkpoint is ``step-N/dcp/`` (weights, optimizer
    state and, mid-accumulation, the pending gradient, resharded on load to any number of
    ranks) plus ``step-N/state.pt`` (``optimization`` without the optimizer state, RNG
    states, counters). It appears under its final name only when every rank has written.
    """
    import torch.distributed.checkpoint as dcp

    if _nonfinite_anywhere(model):
        return None
    root = Path(root)
    final = root / f"step-{int(resume.step):07d}"
    tmp = root / f".tmp-{final.name}-sharded"  # one name that every rank computes
    if _rank() == 0:
        root.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(root, "step-")
        tmp.mkdir()
    _barrier()
    pending = int(optimization.get("pending", 0)) > 0
    dcp.save(_sharded_state(model, optimizer, pending), checkpoint_id=str(tmp / SHARDED_DIR))
    if _rank() == 0:
        rest = {k: v for k, v in optimization.items() if k not in ("optimizer", "pending_grads")}
        state = {"resume": asdict(resume), "optimization": rest, "rng": rng_state()}
        _durable_save(state, tmp / STATE_FILE)
        fsync_tree(tmp)
        replace_dir(tmp, final)
        fsync_dir(root)
        if keep_last > 0:
            for old_ckpt in list_checkpoints(root)[:-keep_last]:
                shutil.rmtree(old_ckpt, ignore_errors=True)
    _barrier()
    return final


def load_sharded_checkpoint(
    path: str | os.PathLike[str], model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> Checkpoint:
    """Load a sharded checkpoint into ``model`` and ``optimizer``, sharded or whole, on any
    number of ranks (one process included); the returned ``optimization`` holds the rest of
    the optimization state (scheduler, counters) and sets ``pending_grads`` on the model."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    path = Path(path)
    state = torch.load(path / STATE_FILE, map_location="cpu", weights_only=False)
    rest = dict(state.get("optimization") or {})
    pending = int(rest.get("pending", 0)) > 0
    target = _sharded_state(model, optimizer, False)
    if pending:
        target["grads"] = {
            n: torch.zeros_like(p) for n, p in model.named_parameters() if p.requires_grad
        }
    dcp.load(target, checkpoint_id=str(path / SHARDED_DIR))
    set_model_state_dict(model, target["model"])
    set_optimizer_state_dict(model, optimizer, target["optim"])
    for name, p in model.named_parameters():
        grad = target.get("grads", {}).get(name)
        p.grad = grad if pending and grad is not None else None
    return Checkpoint(
        path=path, resume=ResumeState(**state["resume"]), optimization=rest, rng=state["rng"]
    )
