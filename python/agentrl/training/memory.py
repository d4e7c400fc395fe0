"""Memory options of a run: activation recomputation, a reference kept on the CPU, peaks.

- ``--gradient_checkpointing 1``: each decoder layer keeps only its input in the forward
  pass and recomputes its activations in backward (HF ``gradient_checkpointing_enable``,
  non-reentrant); the gradient is unchanged, activation memory shrinks from all layers'
  intermediates to one layer's.
- ``--ref_offload 1``: the reference policy (the KL anchor, frozen) lives in CPU memory
  and visits the device for each of its forwards (:class:`OffloadedReference`): a full
  copy of the weights less on the accelerator, for a host-to-device copy per micro-batch.
- ``perf/peak_mem_mb``: the step's peak of CUDA memory allocated by tensors on a GPU (the
  counter is reset after each read); on the CPU, the process's peak resident set size so
  far (the kernel keeps only a lifetime peak).
"""

from __future__ import annotations

import resource
import sys
from typing import Any

import torch


def enable_gradient_checkpointing(model: torch.nn.Module) -> None:
    """Recompute activations in backward; a model that cannot is an error, not ignored."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ValueError(
            f"gradient_checkpointing=1: {type(model).__name__} does not support activation "
            "checkpointing (HF models with supports_gradient_checkpointing do)"
        )
    newer = getattr(model, "activation_checkpointing_enable", None)  # transformers >= 5.x
    if newer is not None:
        newer(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


class OffloadedReference(torch.nn.Module):
    """A frozen model kept on the CPU, moved to ``device`` for each forward and back."""

    def __init__(self, model: torch.nn.Module, device: torch.device) -> None:
        super().__init__()
        self.model = model.to("cpu")
        self.device = torch.device(device)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped model's state dict (the wrapper adds no prefix: checkpoints and
        ``ref_from_rl_checkpoint`` read and write it as the policy's)."""
        return self.model.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        return self.model.load_state_dict(state_dict, strict=strict, assign=assign)

    @torch.no_grad()
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        self.model.to(self.device)
        try:
            return self.model(*args, **kwargs)
        finally:
            self.model.to("cpu")


def peak_memory_mb(device: torch.device) -> float:
    """Peak memory in MiB since the last call on CUDA; peak RSS of the process on the CPU."""
    if device.type == "cuda" and torch.cuda.is_available():
        peak = torch.cuda.max_memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        return peak / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 2**10  # bytes vs KiB


__all__ = ["OffloadedReference", "enable_gradient_checkpointing", "peak_memory_mb"]
