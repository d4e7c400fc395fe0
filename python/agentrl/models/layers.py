"""Where a causal LM keeps its repeated decoder blocks: what FSDP shards one by one and
`--compile` compiles one by one."""

from __future__ import annotations

from typing import Any

import torch

# Attribute paths of the block list: HF causal LMs, bare decoders, GPT-2 style, peft-wrapped.
_LAYER_PATHS = ("model.layers", "layers", "transformer.h", "base_model.model.model.layers")


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The decoder blocks of ``model`` in order ([] when none of the known paths holds a
    ``ModuleList``)."""
    for path in _LAYER_PATHS:
        node: Any = model
        for name in path.split("."):
            node = getattr(node, name, None)
            if node is None:
                break
        if isinstance(node, torch.nn.ModuleList):
            return list(node)
    return []


__all__ = ["decoder_layers"]
