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


def deterministic_cpu_kernels(enabled: bool, device: torch.device | str | None) -> None:
    """On the CPU, pick kernels that give the same bits on every run (``enabled``) or
    torch's fastest (not); other devices are left as they are.

    With more than one thread, some CPU backward kernels (a gather's scatter-add over an
    expanded index among them) add in an order that varies from run to run: the same seed
    then gives weights that differ in the last bits after the first step, and figures that
    drift apart over a run. The deterministic kernels cost little on the CPU (measured in
    docs/tuning.md).
    """
    if device is None or torch.device(device).type == "cpu":
        torch.use_deterministic_algorithms(enabled)


__all__ = ["deterministic_cpu_kernels", "set_cpu_threads", "usable_cores"]
