"""agentrl: reinforcement learning that teaches language models to use tools.

The package root is the library's front door: ``agentrl.Trainer``, ``agentrl.run_training``
and ``agentrl.TrainConfig`` are loaded on first use, so that ``import agentrl`` (and the
commands that need no trainer, such as ``agentrl score``) stay light.
"""

from __future__ import annotations

import os

# CPU tensors of 2 MiB and more on transparent huge pages: torch reads this once, at its
# first allocation, so it is set before anything of agentrl's imports torch. Without it,
# each large temporary (the output layer's logits, a gradient) costs a page fault every
# 4 KiB on first touch, and the training step runs 1.2-1.4x slower (docs/tuning.md,
# `benches/bench_huge_pages.py`). THP_MEM_ALLOC_ENABLE=0 in the environment turns it off.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

from agentrl._core import __version__
from agentrl.utils.imports import lazy_attributes

_LAZY = {
    "Trainer": "agentrl.trainer",
    "TrainResult": "agentrl.trainer",
    "run_training": "agentrl.trainer",
    "TrainConfig": "agentrl.config",
}


__getattr__ = lazy_attributes("agentrl", _LAZY)


__all__ = ["TrainConfig", "TrainResult", "Trainer", "__version__", "run_training"]
