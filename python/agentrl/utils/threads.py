"""How many CPU threads torch may use.

Models as small as the tiny preset gain little from intra-op threads, and threads beyond
the cores a process may run on spin-wait for each other: measured on two cores shared
with other jobs, 10 RL steps took 402 s with two threads and 13 s with one. On the same
two cores when idle, two threads beat one (20 RL steps: 19.4 s against 25.6 s; SFT:
6.5 against 4 steps/s). So a request is honoured but never exceeds the usable cores.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

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


@contextmanager
def cpu_threads(requested: int) -> Iterator[int]:
    """Within the block the calling thread runs torch ops on ``requested`` threads (0: as
    it is), capped at the usable cores; the previous count is restored after.

    torch keeps the count per calling thread (OpenMP's and MKL's thread-local settings), so
    a rollout thread can decode on one thread while the training thread keeps two. Why
    fewer: a decode step of a small model is a chain of tiny kernels, and splitting each
    across threads costs more in synchronisation than it saves (measured for the tiny
    preset on two cores: 48 decode steps of 16 rows took 0.83 s on two threads, 0.54 s on
    one). On this CPU a forward gives bit-identical logits on one or two threads.
    """
    before = torch.get_num_threads()
    wanted = min(requested, usable_cores()) if requested > 0 else before
    if wanted == before:
        yield before
        return
    torch.set_num_threads(wanted)
    try:
        yield wanted
    finally:
        torch.set_num_threads(before)


__all__ = ["cpu_threads", "set_cpu_threads", "usable_cores"]
