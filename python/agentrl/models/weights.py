"""Policy weights into a model that is already built: a rollout engine's weight update.

Weights come as a state dict, a module, or a path: an HF directory of ``*.safetensors``
(or ``*.bin``) shards, one ``.safetensors`` file, or a ``torch.save`` file (a training
checkpoint's ``{"model": ...}`` too). Names lose the prefixes of DDP and torch.compile
(the trainer's model may be wrapped, the rollout model is not); weights holding a NaN or an
infinity are never loaded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from agentrl.utils.tensors import has_nonfinite

WeightSource = Mapping[str, torch.Tensor] | torch.nn.Module | str | os.PathLike[str]

_WRAPPER_PREFIXES = ("module.", "_orig_mod.")


def strip_wrapper_prefixes(state: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` with the name prefixes of DDP and torch.compile removed (repeats too)."""
    out = {}
    for key, value in state.items():
        name = key
        for prefix in _WRAPPER_PREFIXES:
            while name.startswith(prefix):
                name = name[len(prefix) :]
        out[name] = value
    return out


def state_dict_of(source: WeightSource) -> dict[str, Any]:
    """The state dict ``source`` holds, wrapper prefixes removed."""
    if isinstance(source, torch.nn.Module):
        return strip_wrapper_prefixes(source.state_dict())
    if isinstance(source, Mapping):
        return strip_wrapper_prefixes(source)
    path = Path(source)
    if path.is_dir():
        found = sorted(path.glob("*.safetensors")) or sorted(path.glob("*.bin"))
        if not found:
            raise FileNotFoundError(f"no .safetensors or .bin weights in {path}")
        state: dict[str, Any] = {}
        for part in found:
            state.update(state_dict_of(part))
        return state
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return strip_wrapper_prefixes(load_file(str(path)))
    loaded = torch.load(str(path), map_location="cpu", weights_only=True)
    if isinstance(loaded, Mapping) and isinstance(loaded.get("model"), Mapping):
        loaded = loaded["model"]
    if not isinstance(loaded, Mapping):
        raise ValueError(f"{path} does not hold a state dict")
    return strip_wrapper_prefixes(loaded)


def load_weights(model: torch.nn.Module, source: WeightSource, *, strict: bool = False) -> bool:
    """Load ``source`` into ``model``; False, with the model left alone, when any floating
    tensor is not finite. No matching name at all, or (``strict``) a name the model does
    not have, is a ValueError."""
    state = state_dict_of(source)
    if has_nonfinite(state):
        return False
    with torch.no_grad():
        own = model.state_dict()
        if not any(k in own for k in state):
            raise ValueError(
                "no parameter of the given weights matches the rollout model "
                f"(first given key: {next(iter(state), None)!r})"
            )
        result = model.load_state_dict(state, strict=strict)
    unexpected = list(getattr(result, "unexpected_keys", []))
    if unexpected and strict:
        raise ValueError(f"unexpected weight names: {unexpected[:5]}")
    return True


__all__ = ["WeightSource", "load_weights", "state_dict_of", "strip_wrapper_prefixes"]
