"""agentrl: reinforcement learning that teaches language models to use tools.

The package root is the library's front door: ``agentrl.Trainer``, ``agentrl.run_training``
and ``agentrl.TrainConfig`` are loaded on first use, so that ``import agentrl`` (and the
commands that need no trainer, such as ``agentrl score``) stay light.
"""

from __future__ import annotations

from typing import Any

from agentrl._core import __version__

_LAZY = {
    "Trainer": "agentrl.trainer",
    "TrainResult": "agentrl.trainer",
    "run_training": "agentrl.trainer",
    "TrainConfig": "agentrl.config",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentrl' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = ["TrainConfig", "TrainResult", "Trainer", "__version__", "run_training"]
