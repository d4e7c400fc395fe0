"""Checks on tensors that weights, gradients and logits share (checkpoints, syncs, steps)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import torch

# Dtypes whose CPU extremes torch computes directly. Dense floating CPU tensors are checked
# by their extremes; any other (complex, sparse, a tensor subclass such as DTensor, another
# device) takes the infinity-norm path.
_EXTREMES_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def all_finite(tensors: Iterable[torch.Tensor]) -> bool:
    """True when no element of ``tensors`` is a NaN or an infinity.

    One host read for all of them. On an accelerator the largest magnitude of each tensor
    (an infinity norm: a maximum, so no finite value overflows it, and NaN propagates) in
    one fused call per device. Plain CPU tensors take the smallest and largest value of
    each instead (NaN propagates to both): torch's CPU infinity norm runs tensor by tensor
    and was 7x slower (2.4 against 0.33 ms for the tiny preset's 47 weights, two threads).
    """
    by_device: dict[torch.device, list[torch.Tensor]] = defaultdict(list)
    extremes: list[torch.Tensor] = []
    for t in tensors:
        if not t.numel():
            continue
        if _by_extremes(t):
            # float8 has no CPU reductions of its own; float32 holds its values exactly.
            values = t.detach() if t.dtype in _EXTREMES_DTYPES else t.detach().float()
            extremes.extend(torch.aminmax(values))
        else:
            by_device[t.device].append(t.detach())
    # Each device answers finite-or-not on its own; only booleans travel.
    verdicts = [
        torch.isfinite(
            torch.stack([p.float() for p in torch._foreach_norm(group, float("inf"))])
        ).all()
        for group in by_device.values()
    ]
    if extremes:  # float64 holds every one of these dtypes' values: none overflows
        verdicts.append(torch.isfinite(torch.stack([v.double() for v in extremes])).all())
    if not verdicts:
        return True
    first = verdicts[0].device
    return bool(torch.stack([v.to(first) for v in verdicts]).all())


def _by_extremes(t: torch.Tensor) -> bool:
    return (
        t.device.type == "cpu"
        and type(t) in (torch.Tensor, torch.nn.Parameter)
        and t.layout == torch.strided
        and t.is_floating_point()
    )


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
