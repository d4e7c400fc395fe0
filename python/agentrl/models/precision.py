"""``--dtype auto``: the weight dtype the hardware computes fastest in, detected, not assumed.

bfloat16 on CUDA, and on CPUs with native bfloat16 matrix instructions: AMX (Advanced Matrix
Extensions, tiles that multiply bfloat16 matrices several times faster than float32) or
AVX512-BF16 (bfloat16 dot products in the vector unit). float32 everywhere else, where
bfloat16 saves memory but its matmuls are converted back and forth, often slower.

On a 2-core AVX512-BF16 CPU without AMX, a forward and backward pass of a 135M model over
4x512 tokens took 10-11 s in bfloat16 against 20-24 s in float32 (docs/real-models.md), so
that unit counts too. Training in bfloat16 keeps float32 master weights in the optimizer.

The units are read from two places: the instruction set torch's CPU kernels were dispatched
to (``torch.backends.cpu.get_cpu_capability()``, which names AMX on builds that use it), and
the kernel's CPU flags (``/proc/cpuinfo``, Linux): ``amx_bf16`` with ``amx_tile``, or
``avx512_bf16``. Either is enough: the flags say the CPU has the unit, and oneDNN, which runs
torch's bfloat16 matmuls on the CPU, uses it whatever the dispatch name says.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = [
    "AutoDtype",
    "auto_dtype",
    "cpu_bf16_unit",
    "cpu_capability",
    "cpu_flags",
    "cpu_has_amx",
]

_CPUINFO = Path("/proc/cpuinfo")
_AMX_FLAGS = frozenset({"amx_bf16", "amx_tile"})
_AVX512_BF16 = "avx512_bf16"


def cpu_capability() -> str:
    """The instruction set torch's CPU kernels run with (``AVX512``, ``AVX2``, ...)."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except (AttributeError, RuntimeError):  # torch builds without the query
        return ""


def cpu_flags(cpuinfo: Path = _CPUINFO) -> frozenset[str]:
    """The CPU feature flags the kernel reports (empty where there is no /proc/cpuinfo)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def cpu_has_amx() -> bool:
    """Whether this CPU has AMX bfloat16 tiles (torch's dispatch or the kernel's flags)."""
    return "AMX" in cpu_capability().upper() or cpu_flags() >= _AMX_FLAGS


def cpu_bf16_unit() -> str:
    """The native bfloat16 matrix unit of this CPU: ``AMX``, ``AVX512-BF16`` or ``""``."""
    if cpu_has_amx():
        return "AMX"
    if _AVX512_BF16 in cpu_flags():
        return "AVX512-BF16"
    return ""


@dataclass(frozen=True)
class AutoDtype:
    """What ``--dtype auto`` became, and why (the run logs :meth:`describe` once)."""

    dtype: str
    reason: str

    def describe(self) -> str:
        return f"dtype auto -> {self.dtype} ({self.reason})"


def auto_dtype(device: str | torch.device | None = None) -> AutoDtype:
    """bfloat16 on CUDA and on CPUs with AMX or AVX512-BF16, float32 elsewhere. ``None``:
    the device a run would pick (CUDA when present)."""
    if device is None:
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        dev = torch.device(device)
    if dev.type == "cuda":
        return AutoDtype("bfloat16", "CUDA")
    if dev.type == "cpu":
        unit = cpu_bf16_unit()
        if unit:
            return AutoDtype("bfloat16", f"CPU has {unit}")
        have = cpu_capability() or "unknown"
        return AutoDtype("float32", f"CPU without a bfloat16 unit, torch reports {have}")
    return AutoDtype("float32", f"no bfloat16 rule for device type {dev.type!r}")
