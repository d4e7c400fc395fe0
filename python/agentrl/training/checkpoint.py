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

from agentrl.utils.atomic import atomic_dir, complete_numbered_dirs, remove_stale_temps

__all__ = [
    "Checkpoint",
    "ResumeState",
    "export_policy",
    "latest_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "model_has_nonfinite",
    "restore_rng_state",
    "rng_state",
    "save_checkpoint",
]

MODEL_FILE = "model.pt"
STATE_FILE = "state.pt"
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


def list_checkpoints(root: str | os.PathLike[str]) -> list[Path]:
    """Complete checkpoints under ``root``, oldest first."""
    return [p for _, p in complete_numbered_dirs(root, _STEP_DIR, (MODEL_FILE, STATE_FILE))]


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
    root.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(root, "step-")  # never a complete checkpoint
    final = root / f"step-{int(resume.step):07d}"
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
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_dir(out) as tmp:
        model.save_pretrained(str(tmp))
        if tokenizer is not None:
            tokenizer.save_pretrained(str(tmp))
    return out
