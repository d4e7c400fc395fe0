"""State-dict checks shared by every rollout engine's weight update.

Weights reach a rollout engine from a trainer whose model may be wrapped by DDP
(``module.``) or torch.compile (``_orig_mod.``); the rollout model is not, so the
prefixes are removed before names are matched. Weights holding a NaN or an infinity are
never loaded: sampling from them would only spread the failure into the rollouts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrl.utils.tensors import has_nonfinite

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


__all__ = ["has_nonfinite", "strip_wrapper_prefixes"]
