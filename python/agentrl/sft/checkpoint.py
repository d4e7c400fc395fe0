"""The warm start's checkpoints are the RL trainer's: one format, one writer.

A checkpoint is ``checkpoints/step-NNNNNNN/`` holding ``model.pt`` and ``state.pt``, written
by :func:`agentrl.training.checkpoint.save_checkpoint` (atomic, fsync'ed, never of NaN
weights, the newest ``keep_last`` kept); the warm start's own state (optimizer, data
position, elapsed time, its config) rides in the state file's ``optimization`` slot, the
RNG states beside it. What RL trains from is the published HF directory
(:func:`publish_into`), written once at the end.

A LoRA run (a peft model) checkpoints the adapter alone (its optimizer state covers only the
adapter too) and publishes the merged full weights, an ordinary model that `agentrl train`
and `agentrl eval` load as they load any other, with the adapter alone beside it in
``adapter/``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import torch

from agentrl.errors import UsageError
from agentrl.models.lora import base_model_of, is_lora_model, merged_state_dict
from agentrl.training import checkpoint as rl_ckpt
from agentrl.utils.atomic import replace_dir, saving

# What a checkpoint of the earlier warm-start format held instead of model.pt.
_EARLIER_STATE_FILE = "trainer_state.pt"
# Where a LoRA run publishes its adapter alone, inside the run directory.
ADAPTER_DIR = "adapter"


def _save_hf(model: torch.nn.Module, tokenizer: Any, directory: Path) -> None:
    """save_pretrained for model and tokenizer, without transformers' per-shard progress bar;
    a LoRA model as its merged weights under the base model's names, plus ``adapter/``."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        if is_lora_model(model):
            merged = merged_state_dict(model)
            base_model_of(model).save_pretrained(str(directory), state_dict=merged)
            model.save_pretrained(str(directory / ADAPTER_DIR))
        else:
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
                if item.is_dir():  # the adapter of a LoRA run: replaced whole
                    replace_dir(item, out_dir / item.name)
                else:
                    os.replace(item, out_dir / item.name)
            staging.rmdir()
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def save_checkpoint(
    root: Path,
    step: int,
    model: torch.nn.Module,
    tokenizer: Any,
    state: dict[str, Any],
    keep_last: int = 2,
) -> Path | None:
    """Write checkpoint ``step`` under ``root``; None (nothing written) on NaN weights.

    ``tokenizer`` is not part of a checkpoint (it does not change while training); it is
    published with the model at the end.
    """
    del tokenizer
    resume = rl_ckpt.ResumeState(step=int(step))
    return rl_ckpt.save_checkpoint(root, model, resume, dict(state), keep_last=keep_last)


def list_checkpoints(root: Path) -> list[Path]:
    """Complete checkpoints under ``root``, oldest first; one of the earlier format is a
    usage error (it cannot be resumed exactly by this version), not silently skipped."""
    found = rl_ckpt.list_checkpoints(root)
    root = Path(root)
    earlier = sorted(root.glob(f"step-*/{_EARLIER_STATE_FILE}")) if root.is_dir() else []
    if earlier and not found:
        raise UsageError(
            f"{earlier[-1].parent}: a warm-start checkpoint of an earlier agentrl version; "
            f"remove {root} to train the warm start again"
        )
    return found


def load_trainer_state(path: Path) -> dict[str, Any]:
    """The warm start's state in checkpoint ``path``, with its step and RNG states."""
    state = torch.load(Path(path) / rl_ckpt.STATE_FILE, map_location="cpu", weights_only=False)
    own = dict(state.get("optimization") or {})
    return {**own, "step": int(state["resume"]["step"]), "rng": state["rng"]}


def load_weights(model: torch.nn.Module, path: Path) -> None:
    """Copy the weights saved in checkpoint ``path`` into ``model``, strictly."""
    weights = torch.load(Path(path) / rl_ckpt.MODEL_FILE, map_location="cpu", weights_only=True)
    model.load_state_dict(weights, strict=True)


# The RNG states, as the RL trainer saves and restores them.
rng_state = rl_ckpt.rng_state
set_rng_state = rl_ckpt.restore_rng_state
