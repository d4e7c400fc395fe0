"""Compiling a causal LM's decoder layers for training steps (`agentrl sft --compile`).

A small model's step is mostly elementwise work around its matrix products (norms, rotary
embeddings, activations, residuals), each a separate kernel in eager mode. `torch.compile`
fuses them. Layers are compiled one by one, in place (`nn.Module.compile`): the model keeps
its modules, its state-dict keys and its output layer, so everything that looks inside it
(the output-layer split of `agentrl.training.forward`, checkpoints, `save_pretrained`)
works unchanged. Shapes are dynamic (sequence lengths change from batch to batch); a batch
of one row (a shared prefix) and of several are compiled apart, so the per-function
recompile limit is raised to leave room for every layer's variants.

Generation runs eagerly (`eager_generation`): decoding one token at a time with a growing
cache would compile yet more variants for a few evaluation calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from agentrl.errors import UsageError
from agentrl.models.errors import UnsupportedArchitectureError
from agentrl.models.layers import decoder_layers

# Compiled variants per layer the recompile limit leaves room for (one-row and several-row
# batches, with and without a cache, and some slack).
VARIANTS_PER_LAYER = 8


def compile_decoder_layers(model: torch.nn.Module) -> int:
    """Compile every decoder layer of ``model`` in place; returns how many.

    Raises `UnsupportedArchitectureError` (a user error, and a ``ValueError``) for a model
    whose decoder blocks `decoder_layers` cannot find: nothing is compiled then, rather than
    some other part of it; and a `UsageError` on a CPU without a C++ compiler, before the
    first step would fail on it.
    """
    parameter = next(model.parameters(), None)
    reason = missing_compiler(parameter.device if parameter is not None else torch.device("cpu"))
    if reason is not None:
        raise UsageError(f"--compile: {reason}; install one (g++) or leave --compile off")
    layers = decoder_layers(model)
    if not layers:
        raise UnsupportedArchitectureError(
            f"--compile needs a causal LM whose decoder layers it can find (model.model.layers "
            f"or the like); {type(model).__name__} has none"
        )
    config = torch._dynamo.config
    config.recompile_limit = max(config.recompile_limit, VARIANTS_PER_LAYER * len(layers))
    for layer in layers:
        layer.compile(dynamic=True)
    return len(layers)


def missing_compiler(device: torch.device) -> str | None:
    """Why `torch.compile` cannot build kernels for ``device`` on this machine; None when
    it can. Compiled CPU code is C++ that inductor builds with the system's compiler."""
    if device.type != "cpu":
        return None
    from torch._inductor.cpp_builder import get_cpp_compiler

    try:
        get_cpp_compiler()
    except Exception as exc:  # inductor raises its own error type when none is found
        return f"no C++ compiler for torch.compile's CPU kernels ({exc})"
    return None


@contextmanager
def eager_generation() -> Iterator[None]:
    """Within the block compiled modules run their eager code (no compilation)."""
    with torch.compiler.set_stance("force_eager"):
        yield


__all__ = ["compile_decoder_layers", "eager_generation", "missing_compiler"]
