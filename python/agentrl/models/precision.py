"""``--dtype auto``: the weight dtype the hardware computes fastest in, detected, not assumed.

bfloat16 on CUDA, and on CPUs with AMX (Advanced Matrix Extensions: tile instructions that
multiply bfloat16 matrices several times faster than float32); float32 everywhere else,
where bfloat16 saves memory but the matmuls are emulated or only partly accelerated.

AMX is read from two places: the instruction set torch's CPU kernels were dispatched to
(``torch.backends.cpu.get_cpu_capability()``, which names AMX on builds that use it), and
the kernel's CPU flags (``amx_bf16`` and ``amx_tile`` in ``/proc/cpuinfo``, Linux). Either
is enough: the flags say the CPU has the unit, and oneDNN, which runs torch's bfloat16
matmuls on the CPU, uses it whatever the dispatch name says.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = ["AutoDtype", "auto_dtype", "cpu_capability", "cpu_flags", "cpu_has_amx"]

_CPUINFO = Path("/proc/cpuinfo")
_AMX_FLAGS = frozenset({"amx_bf16", "amx_tile"})


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


@dataclass(frozen=True)
class AutoDtype:
    """What ``--dtype auto`` became, and why (the run logs :meth:`describe` once)."""

    dtype: str
    reason: str

    def describe(self) -> str:
        return f"dtype auto -> {self.dtype} ({self.reason})"


def auto_dtype(device: str | torch.device | None = None) -> AutoDtype:
    """bfloat16 on CUDA and on CPUs with AMX, float32 elsewhere. ``None``: the device a
    run would pick (CUDA when present)."""
    if device is None:
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        dev = torch.device(device)
    if dev.type == "cuda":
        return AutoDtype("bfloat16", "CUDA")
    if dev.type == "cpu":
        if cpu_has_amx():
            return AutoDtype("bfloat16", "CPU has AMX")
        have = cpu_capability() or "unknown"
        return AutoDtype("float32", f"CPU without AMX, torch reports {have}")
    return AutoDtype("float32", f"no bfloat16 rule for device type {dev.type!r}")
