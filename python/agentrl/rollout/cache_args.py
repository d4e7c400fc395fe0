"""How a model's forward takes and returns its KV cache, across transformers versions.

Kept free of transformers imports, so that the engine module loads without it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import torch

# The forward argument (and output field) of a KV cache: transformers 5's name first.
CACHE_NAMES = ("cache", "past_key_values")


def forward_kwarg_names(model: torch.nn.Module) -> set[str]:
    """Keyword arguments ``model.forward`` declares (empty when it cannot be inspected)."""
    try:
        return set(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return set()


def cache_kwarg(model: torch.nn.Module) -> str:
    """The forward argument that takes a KV cache: ``cache`` in transformers 5, else the
    old name."""
    names = forward_kwarg_names(model)
    return next((n for n in CACHE_NAMES if n in names), CACHE_NAMES[-1])


def output_cache(output: Any) -> Any:
    """The KV cache of a forward output (``cache`` in transformers 5, else the old name)."""
    for name in CACHE_NAMES:
        value = output.get(name) if isinstance(output, Mapping) else getattr(output, name, None)
        if value is not None:
            return value
    return None


__all__ = ["CACHE_NAMES", "cache_kwarg", "forward_kwarg_names", "output_cache"]
