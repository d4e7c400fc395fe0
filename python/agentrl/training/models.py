"""The models a training process holds, and how its forwards autocast.

:class:`Models` bundles the trained policy (what checkpoints and syncs read), what training
forwards call (the policy, maybe compiled), the reference (KL anchor) and the rollout copy;
`agentrl.assembly` loads them from the run's config.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from agentrl.models.precision import auto_dtype

Log = Callable[[str], None]
AutocastFactory = Callable[[], contextlib.AbstractContextManager[Any]]


@dataclass
class Models:
    policy: torch.nn.Module  # the trained weights (what checkpoints and syncs read)
    forward: torch.nn.Module  # what training forwards call: the policy, maybe compiled
    reference: torch.nn.Module
    rollout: torch.nn.Module
    tokenizer: Any
    device: torch.device
    autocast: AutocastFactory
    spec: str
    warm_start_seconds: float = 0.0  # spent running `agentrl sft` first, if it ran


def autocast_factory(device: torch.device, dtype: str) -> AutocastFactory:
    """Autocast to the configured half dtype on CUDA (the weights are held in it already,
    but autocast keeps its float32 ops: softmax, norms); the CPU computes in the weights'
    dtype. ``auto`` is resolved for `device`."""
    if dtype == "auto":
        dtype = auto_dtype(device).dtype
    if device.type != "cuda" or dtype == "float32":
        return contextlib.nullcontext
    amp = torch.bfloat16 if dtype == "bfloat16" else torch.float16
    return lambda: torch.autocast("cuda", dtype=amp)


__all__ = ["AutocastFactory", "Log", "Models", "autocast_factory"]
