"""Publishing policy weights for a rollout server to load (SGLang `update_weights_from_disk`).

A server reads the weights from a directory while the trainer keeps training, possibly
on another machine over a shared filesystem. A half-written directory must therefore
never carry a name the server could be told to load: each version is written under a
temporary name, its files fsync'ed, then renamed into place (``v00000042``), and only then
is the server told its path. ``LATEST`` names the newest complete version (replaced
atomically too), so a restarted server or a person can find it. Old versions are pruned,
keeping the newest ``keep``.

Weights of a LoRA policy (a peft model) are published merged, under the base model's
parameter names: the server serves a plain model.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from agentrl.models.weights import strip_wrapper_prefixes
from agentrl.utils.atomic import atomic_dir, complete_numbered_dirs, remove_stale_temps
from agentrl.utils.tensors import has_nonfinite

LATEST_FILE = "LATEST"
WEIGHTS_FILE = "model.safetensors"
_VERSION_DIR = re.compile(r"^v(\d{8,})$")


def policy_state_dict(source: torch.nn.Module | Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The plain-model state dict of ``source`` (LoRA merged in, wrapper prefixes removed)."""
    if isinstance(source, Mapping):
        return strip_wrapper_prefixes(source)
    model = source
    for attr in ("module", "_orig_mod"):  # DDP and torch.compile wrappers
        while hasattr(model, attr) and isinstance(getattr(model, attr), torch.nn.Module):
            model = getattr(model, attr)
    from agentrl.models.lora import is_lora_model, merged_state_dict

    if is_lora_model(model):
        return merged_state_dict(model)
    return strip_wrapper_prefixes(model.state_dict())


def _write_weights(
    tmp: Path, state: Mapping[str, Any], model_config: Any, config_dir: str | None
) -> None:
    """An HF-style directory: config files (when known) plus ``model.safetensors``."""
    from safetensors.torch import save_file

    # Independent contiguous CPU copies: safetensors refuses tensors that share storage
    # (tied embeddings), and GPU tensors must come to host memory anyway.
    tensors = {
        k: v.detach().to("cpu").contiguous().clone() for k, v in state.items() if torch.is_tensor(v)
    }
    save_file(tensors, str(tmp / WEIGHTS_FILE), metadata={"format": "pt"})
    if model_config is not None and hasattr(model_config, "save_pretrained"):
        model_config.save_pretrained(str(tmp))
    elif config_dir:
        for name in ("config.json", "generation_config.json"):
            src = Path(config_dir) / name
            if src.is_file():
                shutil.copyfile(src, tmp / name)


def model_config_of(model: torch.nn.Module | Mapping[str, Any]) -> Any:
    """The HF config of the (base) model behind ``model``, or None."""
    if not isinstance(model, torch.nn.Module):
        return None
    from agentrl.models.lora import base_model_of

    config = getattr(base_model_of(model), "config", None)
    return config if hasattr(config, "save_pretrained") else None


def version_dir_name(version: int) -> str:
    return f"v{int(version):08d}"


def published_versions(shared_dir: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """Complete published versions under ``shared_dir``, oldest first."""
    return complete_numbered_dirs(shared_dir, _VERSION_DIR, (WEIGHTS_FILE,))


def latest_published(shared_dir: str | os.PathLike[str]) -> Path | None:
    """The directory ``LATEST`` names, when it is complete."""
    pointer = Path(shared_dir) / LATEST_FILE
    try:
        name = json.loads(pointer.read_text(encoding="utf-8"))["dir"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    path = Path(shared_dir) / str(name)
    return path if (path / WEIGHTS_FILE).is_file() else None


def publish_weights(
    source: torch.nn.Module | Mapping[str, Any],
    shared_dir: str | os.PathLike[str],
    version: int,
    *,
    keep: int = 2,
    config_dir: str | None = None,
    model_config: Any = None,
) -> Path:
    """Write ``source``'s weights as ``<shared_dir>/v<version>`` atomically; its path.

    ``model_config`` (default: ``source``'s HF config) is saved beside the weights; for a
    bare state dict without it, ``config.json`` is copied from ``config_dir`` when given.
    ``keep`` > 0 prunes all but the newest ``keep`` versions (never the one just written).
    """
    root = Path(shared_dir)
    root.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(root, "v")  # left by a crash mid-publish
    name = version_dir_name(version)
    final = root / name
    with atomic_dir(final, sync=True) as tmp:
        state = policy_state_dict(source)
        config = model_config if model_config is not None else model_config_of(source)
        _write_weights(tmp, state, config, config_dir)
    pointer_tmp = root / f".tmp-{LATEST_FILE}-{os.getpid()}"
    pointer_tmp.write_text(json.dumps({"dir": name, "version": int(version)}), encoding="utf-8")
    os.replace(pointer_tmp, root / LATEST_FILE)
    if keep > 0:
        for old_version, path in published_versions(root)[:-keep]:
            if old_version != int(version):
                shutil.rmtree(path, ignore_errors=True)
    return final


__all__ = [
    "LATEST_FILE",
    "WEIGHTS_FILE",
    "has_nonfinite",
    "latest_published",
    "model_config_of",
    "policy_state_dict",
    "publish_weights",
    "published_versions",
    "version_dir_name",
]
