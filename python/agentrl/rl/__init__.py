"""The RL math: packing, advantages, losses, KL control, the BC loss, optimisation.
Pure functions over tensors and masks, no file or model I/O (checkpoints and BC
demonstrations live in `agentrl.training`); the trainer loop composes them.

Each module's options live in a dataclass whose field names are the command-line flag
names, so :func:`config_from` can fill one from an argparse namespace or a dict.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

T = TypeVar("T")


def config_from(cls: type[T], source: Any) -> T:
    """Build dataclass ``cls`` from the same-named attributes (or keys) of ``source``.

    Missing names keep the dataclass defaults, so a namespace with extra flags is fine.
    """
    if not is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    values = {}
    for f in fields(cls):
        if isinstance(source, dict):
            if f.name in source:
                values[f.name] = source[f.name]
        elif hasattr(source, f.name):
            values[f.name] = getattr(source, f.name)
    return cls(**values)


__all__ = ["config_from"]
