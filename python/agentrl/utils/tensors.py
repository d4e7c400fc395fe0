"""Checks on tensors that weights, gradients and logits share (checkpoints, syncs, steps)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import torch


def all_finite(tensors: Iterable[torch.Tensor]) -> bool:
    """True when no element of ``tensors`` is a NaN or an infinity.

    One host read for all of them. On an accelerator the largest magnitude of each tensor
    (an infinity norm: a maximum, so no finite value overflows it, and NaN propagates) in
    one fused call per device. Plain CPU tensors take the smallest and largest value of
    each instead (NaN propagates to both): torch's CPU infinity norm runs tensor by tensor
    and was 7x slower (2.4 against 0.33 ms for the tiny preset's 47 weights, two threads).
    """
    by_device: dict[torch.device, list[torch.Tensor]] = defaultdict(list)
    on_cpu: list[torch.Tensor] = []
    for t in tensors:
        if not t.numel():
            continue
        if t.device.type == "cpu" and type(t) in (torch.Tensor, torch.nn.Parameter):
            on_cpu.extend(torch.aminmax(t.detach()))
        else:
            by_device[t.device].append(t.detach())
    peaks = [
        torch.stack([p.float() for p in torch._foreach_norm(group, float("inf"))]).max()
        for group in by_device.values()
    ]
    if on_cpu:  # float64 holds every float dtype's values, so no finite one overflows
        peaks.append(torch.stack([v.double() for v in on_cpu]).abs().max())
    if not peaks:
        return True
    first = peaks[0].device
    return bool(torch.isfinite(torch.stack([p.to(first) for p in peaks])).all())


def has_nonfinite(state: Mapping[str, Any]) -> bool:
    """True when any floating tensor of ``state`` holds a NaN or an infinity.

    Weights like that are never saved, exported or loaded into a rollout engine: they
    would only spread a failed update further.
    """
    return not all_finite(t for t in state.values() if torch.is_tensor(t) and t.is_floating_point())


def all_in_range(t: torch.Tensor, low: float, high: float) -> bool:
    """True when every value of CPU tensor ``t`` lies in ``[low, high]`` (so none is NaN).

    One min/max reduction, exact (NaN fails both comparisons): on the CPU far cheaper than
    the full-size passes it lets a caller skip (replacing non-finite values, clamping),
    which leave such a tensor unchanged. False off the CPU, where reading the answer would
    stall the device and those passes are cheap.
    """
    if t.device.type != "cpu" or not t.numel():
        return False
    lo, hi = torch.aminmax(t)
    return bool((lo >= low) & (hi <= high))


__all__ = ["all_finite", "all_in_range", "has_nonfinite"]
