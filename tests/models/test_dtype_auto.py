"""``--dtype auto``: bfloat16 on CUDA and on CPUs with AMX or AVX512-BF16, float32 elsewhere,
detected from torch's CPU dispatch or the kernel's CPU flags, and said once when a run starts."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import torch
from agentrl.models import precision, resolve_dtype

from tests.fakes.runs import short_run_config

_nothing = contextlib.nullcontext


def _cpu(monkeypatch: pytest.MonkeyPatch, capability: str, flags: set[str]) -> None:
    monkeypatch.setattr(precision, "cpu_capability", lambda: capability)
    monkeypatch.setattr(precision, "cpu_flags", lambda *_a: frozenset(flags))


def test_auto_is_bfloat16_on_a_cpu_with_amx_flags(monkeypatch: pytest.MonkeyPatch):
    _cpu(monkeypatch, "AVX512", {"avx512f", "amx_bf16", "amx_tile"})
    chosen = precision.auto_dtype("cpu")
    assert chosen.describe() == "dtype auto -> bfloat16 (CPU has AMX)"
    assert resolve_dtype("auto", "cpu") == torch.bfloat16


def test_auto_is_bfloat16_when_torch_dispatches_to_amx(monkeypatch: pytest.MonkeyPatch):
    _cpu(monkeypatch, "AMX", set())
    assert precision.auto_dtype("cpu").dtype == "bfloat16"


def test_auto_is_bfloat16_on_a_cpu_with_avx512_bf16(monkeypatch: pytest.MonkeyPatch):
    _cpu(monkeypatch, "AVX512", {"avx512f", "avx512_bf16"})
    chosen = precision.auto_dtype("cpu")
    assert chosen.describe() == "dtype auto -> bfloat16 (CPU has AVX512-BF16)"


def test_auto_is_float32_on_a_cpu_without_a_bfloat16_unit(monkeypatch: pytest.MonkeyPatch):
    # Plain AVX512, or half the AMX set, does not count.
    _cpu(monkeypatch, "AVX512", {"avx512f", "amx_tile"})
    chosen = precision.auto_dtype("cpu")
    assert chosen.dtype == "float32"
    assert chosen.describe() == (
        "dtype auto -> float32 (CPU without a bfloat16 unit, torch reports AVX512)"
    )
    assert resolve_dtype("auto", "cpu") == torch.float32


def test_auto_is_bfloat16_on_cuda_whatever_the_cpu(monkeypatch: pytest.MonkeyPatch):
    _cpu(monkeypatch, "AVX2", set())
    assert precision.auto_dtype("cuda:0").describe() == "dtype auto -> bfloat16 (CUDA)"


def test_cpu_flags_are_read_from_cpuinfo(tmp_path: Path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 amx_bf16 amx_tile\n\n", encoding="utf-8")
    assert {"amx_bf16", "amx_tile"} <= precision.cpu_flags(info)
    assert precision.cpu_flags(tmp_path / "missing") == frozenset()


def test_a_run_with_dtype_auto_loads_the_detected_dtype_and_says_so(
    run_files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from agentrl.assembly.models import load_models, run_dtype
    from agentrl.training.models import autocast_factory

    _cpu(monkeypatch, "AVX512", {"amx_bf16", "amx_tile"})
    cfg = short_run_config(run_files, tmp_path, "auto", dtype="auto", device="cpu")
    lines: list[str] = []
    models = load_models(cfg, lines.append)
    assert lines.count("dtype auto -> bfloat16 (CPU has AMX)") == 1
    assert {p.dtype for p in models.policy.parameters()} == {torch.bfloat16}
    assert run_dtype(cfg) == "bfloat16"
    _cpu(monkeypatch, "AVX2", set())
    assert run_dtype(cfg) == "float32"
    # CUDA autocast follows the detected dtype (bfloat16), never float16 for "auto".
    with pytest.warns(UserWarning) if not torch.cuda.is_available() else _nothing():
        assert autocast_factory(torch.device("cuda"), "auto")().fast_dtype == torch.bfloat16


def test_the_tiny_preset_stays_float32():
    from agentrl.config import resolve

    assert resolve(preset="tiny").dtype == "float32"
    assert resolve(preset="tiny", overrides={"dtype": "auto"}).dtype == "auto"
