"""Atomic HF-directory checkpoints with the trainer state needed for an exact resume.

A checkpoint is `checkpoints/step-NNNNNNN/`: the model and tokenizer as an ordinary HF
directory (loadable by `load_policy`) plus `trainer_state.pt` (optimizer, scheduler, step,
data position, RNG states). It is written under a temporary name and renamed into place,
so a crash never leaves a half-written checkpoint that resume would pick up.
"""

from __future__ import annotations

import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import torch

from agentrl.utils.atomic import atomic_dir, complete_numbered_dirs, saving
from agentrl.utils.tensors import has_nonfinite

STATE_FILE = "trainer_state.pt"
_STEP_RE = re.compile(r"^step-(\d+)$")


def _save_hf(model: torch.nn.Module, tokenizer: Any, directory: Path) -> None:
    """save_pretrained for model and tokenizer, without transformers' per-shard progress bar."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model.save_pretrained(str(directory))
        tokenizer.save_pretrained(str(directory))
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def publish_into(model: torch.nn.Module, tokenizer: Any, out_dir: Path) -> None:
    """Place model + tokenizer files directly in `out_dir`, next to files that must stay.

    Each file is written in a temp dir first and moved with `os.replace`, so a reader sees
    either the old or the new version of every file, never a truncated one.
    """
    out_dir = Path(out_dir)
    staging = out_dir / f".publish-{os.getpid()}"
    try:
        with saving(out_dir):
            out_dir.mkdir(parents=True, exist_ok=True)
            if staging.exists():
                shutil.rmtree(staging)
            _save_hf(model, tokenizer, staging)
            for item in staging.iterdir():
                os.replace(item, out_dir / item.name)
            staging.rmdir()
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def rng_state() -> dict[str, Any]:
    """Python and torch RNG states (CUDA too when present)."""
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    root: Path,
    step: int,
    model: torch.nn.Module,
    tokenizer: Any,
    state: dict[str, Any],
    keep_last: int = 2,
) -> Path | None:
    """Write checkpoint `step` under `root`; returns None (and writes nothing) on NaN weights."""
    if has_nonfinite(model.state_dict()):
        return None
    root = Path(root)
    final = root / f"step-{step:07d}"
    with saving(final):  # a full disk or a read-only directory: one line naming the path
        root.mkdir(parents=True, exist_ok=True)
    with atomic_dir(final) as tmp:
        _save_hf(model, tokenizer, tmp)
        torch.save({**state, "step": step, "rng": rng_state()}, tmp / STATE_FILE)
    for old in list_checkpoints(root)[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(root: Path) -> list[Path]:
    """Complete checkpoints under `root`, oldest first."""
    return [path for _, path in complete_numbered_dirs(root, _STEP_RE, [STATE_FILE])]


def load_trainer_state(path: Path) -> dict[str, Any]:
    """The trainer state of checkpoint dir `path` (weights are loaded separately)."""
    return torch.load(Path(path) / STATE_FILE, map_location="cpu", weights_only=False)


def load_weights(model: torch.nn.Module, path: Path) -> None:
    """Copy the weights saved in checkpoint dir `path` into `model`, strictly."""
    from safetensors.torch import load_file

    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{path}: no .safetensors weights in checkpoint")
    sd: dict[str, torch.Tensor] = {}
    for file in files:
        sd.update(load_file(str(file)))
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not (tied and k == "lm_head.weight")]
    if missing or unexpected:
        raise ValueError(
            f"{path}: checkpoint does not match the model (missing {missing[:3]}, "
            f"unexpected {unexpected[:3]})"
        )
    if tied:
        model.tie_weights()
