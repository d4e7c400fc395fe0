"""How many CPU threads torch may use.

Models as small as the tiny preset gain little from intra-op threads, and threads beyond
the cores a process may run on spin-wait for each other, which slows a run down many
times over. So a request is honoured but never exceeds the usable cores (the measurements:
docs/tuning.md, "Why the presets hold their values").
"""

from __future__ import annotations

import os

import torch


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def set_cpu_threads(requested: int) -> int:
    """Use ``requested`` threads, capped at the usable cores; 0 keeps torch's choice.

    Returns the thread count torch now uses.
    """
    if requested > 0:
        torch.set_num_threads(min(requested, usable_cores()))
    return torch.get_num_threads()


__all__ = ["set_cpu_threads", "usable_cores"]
