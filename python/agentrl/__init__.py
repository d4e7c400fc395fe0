"""agentrl: reinforcement learning that teaches language models to use tools.

The package root is the library's front door: ``agentrl.Trainer``, ``agentrl.run_training``
and ``agentrl.TrainConfig`` are loaded on first use, so that ``import agentrl`` (and the
commands that need no trainer, such as ``agentrl score``) stay light.
"""

from __future__ import annotations

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
