"""The finiteness and range checks that let weights, gradients and logits skip work."""

from __future__ import annotations

import torch
from agentrl.rl.logprobs import sanitize_logits as training_sanitize
from agentrl.rollout.sampling import sanitize_logits as sampling_sanitize
from agentrl.utils.tensors import all_finite, all_in_range, has_nonfinite

NAN, INF = float("nan"), float("inf")


def test_all_finite_finds_any_nan_or_infinity_in_any_dtype() -> None:
    clean = [torch.randn(4, 3), torch.randn(5, dtype=torch.bfloat16), torch.empty(0)]
    assert all_finite(clean)
    for bad in (NAN, INF, -INF):
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            poisoned = torch.zeros(7, dtype=dtype)
            poisoned[3] = bad
            assert not all_finite([*clean, poisoned]), (bad, dtype)
    assert all_finite([])


def test_huge_finite_values_are_finite() -> None:
    # A 2-norm of these overflows float32; the largest magnitude does not.
    assert all_finite([torch.full((1000,), 3.0e38)])
    assert not has_nonfinite({"w": torch.full((1000,), 3.0e38), "step": 3})


def test_float64_parameters_and_views_are_checked_in_their_own_precision() -> None:
    # Finite in float64 but beyond float32: converting before the check would call it inf.
    assert all_finite([torch.full((10,), 1.0e300, dtype=torch.float64)])
    weight = torch.nn.Parameter(torch.zeros(4, 6))
    assert all_finite([weight])
    with torch.no_grad():
        weight[2, 5] = NAN
    assert not all_finite([weight])
    strided = torch.zeros(6, 8)
    strided[4, 3] = -INF
    assert not all_finite([strided[:, 1::2]])
    assert all_finite([strided[:, ::2]])


def test_dtypes_and_layouts_without_a_minimum_are_still_checked() -> None:
    poisoned = torch.tensor([1.0, NAN, 2.0])
    assert not all_finite([poisoned.to(torch.complex64)])
    assert all_finite([torch.ones(3, dtype=torch.complex64)])
    assert not all_finite([poisoned.to_sparse()])
    assert all_finite([torch.ones(2, 2).to_sparse()])
    if hasattr(torch, "float8_e4m3fn"):
        assert all_finite([torch.ones(4).to(torch.float8_e4m3fn)])
        assert not has_nonfinite({"w": torch.ones(4).to(torch.float8_e4m3fn)})


def test_all_in_range_is_exact_at_the_bounds_and_fails_on_nan() -> None:
    t = torch.tensor([-80.0, 0.0, 80.0])
    assert all_in_range(t, -80.0, 80.0)
    assert not all_in_range(t, -80.0, 79.9)
    assert not all_in_range(torch.tensor([0.0, NAN]), -1e9, 1e9)
    assert not all_in_range(torch.empty(0), -1.0, 1.0)
    # Off the CPU it answers False without reading the tensor (a read would stall a device).
    assert not all_in_range(torch.zeros(4, device="meta"), -1.0, 1.0)


def test_in_range_logits_come_back_unchanged_by_both_sanitizers() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 50, generator=gen) * 20
    assert torch.equal(training_sanitize(logits), logits)
    clean, bad = sampling_sanitize(logits)
    assert torch.equal(clean, logits) and not bool(bad.any()) and bad.shape == (6,)
    # Out of range: the slow path clamps, and marks only the non-finite row.
    logits[2, 7], logits[4, 1] = 500.0, NAN
    clean, bad = sampling_sanitize(logits)
    assert clean.abs().max() <= 80.0 and bad.tolist() == [False] * 4 + [True, False]
    assert training_sanitize(logits)[2, 7] == 80.0
