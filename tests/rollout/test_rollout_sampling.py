"""Sampling filters against hand-computed distributions, and the two log-probs."""

from __future__ import annotations

import math

import pytest
import torch
from agentrl.rollout.sampling import (
    SamplingParams,
    apply_repetition_penalty,
    draw_tokens,
    sample_tokens,
    sampling_logits,
    sampling_probs,
    sanitize_logits,
)


def _logits_of(probs: list[float]) -> torch.Tensor:
    return torch.log(torch.tensor([probs], dtype=torch.float32))


def _close(actual: torch.Tensor, expected: list[float], tol: float = 1e-6) -> None:
    assert torch.allclose(actual.flatten(), torch.tensor(expected), atol=tol), actual


def test_top_k_keeps_the_k_largest_renormalised() -> None:
    logits = torch.tensor([[3.0, 2.0, 1.0, 0.0]])
    probs = sampling_probs(logits, SamplingParams(top_k=2))
    e = math.exp(1.0)
    _close(probs, [e / (e + 1), 1 / (e + 1), 0.0, 0.0])


def test_top_p_keeps_tokens_until_mass_first_exceeds_p() -> None:
    logits = _logits_of([0.5, 0.3, 0.15, 0.05])
    # Mass before the third token is 0.8 > 0.7: tokens 3 and 4 go.
    _close(sampling_probs(logits, SamplingParams(top_p=0.7)), [0.625, 0.375, 0.0, 0.0])
    # With p = 0.85 the third token stays (0.8 before it), the fourth goes (0.95 before it).
    _close(
        sampling_probs(logits, SamplingParams(top_p=0.85)),
        [0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0.0],
    )


def test_top_p_always_keeps_the_most_likely_token() -> None:
    logits = _logits_of([0.9, 0.1])
    _close(sampling_probs(logits, SamplingParams(top_p=0.05)), [1.0, 0.0])


def test_min_p_drops_tokens_below_a_share_of_the_top_probability() -> None:
    logits = _logits_of([0.5, 0.3, 0.15, 0.05])
    # Threshold 0.2 * 0.5 = 0.1: only the 0.05 token goes.
    _close(
        sampling_probs(logits, SamplingParams(min_p=0.2)),
        [0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0.0],
    )


def test_temperature_divides_logits() -> None:
    logits = torch.tensor([[1.0, 0.0]])
    e2 = math.exp(2.0)
    _close(sampling_probs(logits, SamplingParams(temperature=0.5)), [e2 / (e2 + 1), 1 / (e2 + 1)])


def test_repetition_penalty_divides_positive_and_multiplies_negative_seen_logits() -> None:
    logits = torch.tensor([[2.0, -1.0, 1.0]])
    seen = torch.tensor([[True, True, False]])
    _close(apply_repetition_penalty(logits, seen, 2.0), [1.0, -2.0, 1.0])


def test_filters_apply_after_penalty_and_temperature() -> None:
    # Penalty turns [2, 1.5, 0] into [1, 1.5, 0]; then top-k 1 keeps token 1.
    logits = torch.tensor([[2.0, 1.5, 0.0]])
    seen = torch.tensor([[True, False, False]])
    params = SamplingParams(top_k=1, repetition_penalty=2.0)
    _close(sampling_probs(logits, params, seen), [0.0, 1.0, 0.0])


def test_greedy_takes_argmax_with_zero_sampling_logp() -> None:
    logits = torch.tensor([[0.1, 2.0, 0.3], [5.0, 1.0, 0.0]])
    out = sample_tokens(logits, SamplingParams(greedy=True))
    assert out.tokens.tolist() == [1, 0]
    assert out.sample_logps.tolist() == [0.0, 0.0]
    _close(out.logps, torch.log_softmax(logits, -1)[[0, 1], [1, 0]].tolist())


def test_sampling_frequencies_match_the_filtered_distribution() -> None:
    logits = _logits_of([0.4, 0.3, 0.2, 0.1]).repeat(20000, 1)
    params = SamplingParams(temperature=1.0, top_p=0.6)  # keeps the first two: 4/7, 3/7
    gen = torch.Generator().manual_seed(0)
    out = sample_tokens(logits, params, generator=gen)
    freq = torch.bincount(out.tokens, minlength=4).float() / 20000
    _close(freq, [4 / 7, 3 / 7, 0.0, 0.0], tol=0.015)


def test_behaviour_logp_is_raw_policy_and_sample_logp_is_filtered() -> None:
    raw = [0.4, 0.3, 0.2, 0.1]
    logits = _logits_of(raw).repeat(64, 1)
    params = SamplingParams(temperature=0.5, top_k=2)
    out = sample_tokens(logits, params, generator=torch.Generator().manual_seed(1))
    filtered = torch.tensor([0.16, 0.09]) / 0.25  # squares of the top two, renormalised
    for token, logp, slp in zip(out.tokens, out.logps, out.sample_logps, strict=True):
        assert token.item() in (0, 1)
        assert logp.item() == pytest.approx(math.log(raw[token]), abs=1e-5)
        assert slp.item() == pytest.approx(math.log(filtered[token].item()), abs=1e-5)


def test_the_raw_distribution_skips_no_draw_and_reuses_its_log_softmax() -> None:
    # Temperature 1, no penalty, no filter: the short path gives exactly what drawing from
    # the softmax with every check, and a second log-softmax, give.
    logits = torch.randn(16, 300, generator=torch.Generator().manual_seed(5)) * 4
    out = sample_tokens(
        logits, SamplingParams(temperature=1.0), generator=torch.Generator().manual_seed(9)
    )
    clean, _ = sanitize_logits(logits)
    tokens, fallback = draw_tokens(
        torch.softmax(clean, dim=-1), torch.Generator().manual_seed(9), 0
    )
    log_probs = torch.log_softmax(clean, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    assert torch.equal(out.tokens, tokens) and not fallback.any() and not out.fallback_rows.any()
    assert torch.equal(out.sample_logps, log_probs) and torch.equal(out.logps, log_probs)


def test_sampling_logits_never_hands_back_the_callers_tensor() -> None:
    logits = torch.randn(2, 9)
    out = sampling_logits(logits, SamplingParams(temperature=1.0))
    assert out is not logits and torch.equal(out, logits)
    out.zero_()
    assert logits.abs().sum() > 0


def test_seeded_sampling_is_reproducible() -> None:
    logits = torch.randn(8, 50, generator=torch.Generator().manual_seed(3))
    params = SamplingParams(temperature=0.9, top_p=0.9)
    a = sample_tokens(logits, params, generator=torch.Generator().manual_seed(7)).tokens
    b = sample_tokens(logits, params, generator=torch.Generator().manual_seed(7)).tokens
    assert torch.equal(a, b)


def test_non_finite_logits_are_sanitised_and_flagged() -> None:
    logits = torch.tensor(
        [[float("nan"), 1.0, 0.0], [float("inf"), 0.0, 0.0], [0.0, 1.0, float("-inf")]]
    )
    clean, bad = sanitize_logits(logits)
    assert bad.tolist() == [True, True, True]
    _close(clean, [0.0, 1.0, 0.0, 30.0, 0.0, 0.0, 0.0, 1.0, -30.0])
    out = sample_tokens(logits, SamplingParams(), generator=torch.Generator().manual_seed(0))
    assert out.nonfinite_rows.tolist() == [True, True, True]
    assert torch.isfinite(out.logps).all() and (out.logps <= 0).all()
    assert out.tokens[1].item() == 0  # +inf became the dominant logit


def test_clean_rows_are_not_flagged() -> None:
    _, bad = sanitize_logits(torch.tensor([[1.0, 2.0], [1e30, -1e30]]))
    assert bad.tolist() == [False, False]


def test_collapsed_row_falls_back_to_the_fallback_token() -> None:
    probs = torch.tensor([[0.0, 0.0, 0.0], [0.2, 0.8, 0.0]])
    tokens, collapsed = draw_tokens(probs, torch.Generator().manual_seed(0), fallback_token_id=2)
    assert collapsed.tolist() == [True, False]
    assert tokens[0].item() == 2 and tokens[1].item() in (0, 1)


def test_a_uniform_draw_of_zero_never_lets_a_column_without_mass_win(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # U = 0 everywhere: an unguarded -log U would be inf, p / inf = 0 for every column,
    # and the arg-max would fall on column 0, which has no mass.
    monkeypatch.setattr(torch.Tensor, "uniform_", lambda self, generator=None: self.zero_())
    tokens, collapsed = draw_tokens(torch.tensor([[0.0, 0.3, 0.7]]), None, fallback_token_id=0)
    assert not collapsed.any() and tokens.item() == 2


@pytest.mark.parametrize(
    "kwargs",
    [{"temperature": -1.0}, {"top_p": 0.0}, {"top_p": 1.5}, {"min_p": 2.0}, {"top_k": -1}],
)
def test_invalid_sampling_params_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        SamplingParams(**kwargs)  # type: ignore[arg-type]


def test_top_k_with_top_p_draws_from_the_same_distribution_as_the_full_filter() -> None:
    torch.manual_seed(0)
    row = torch.randn(1, 300) * 2
    params = SamplingParams(temperature=0.8, top_k=6, top_p=0.9, min_p=0.05)
    expected = sampling_probs(row, params)[0]
    assert int((expected > 0).sum()) <= 6
    out = sample_tokens(row.repeat(30000, 1), params, generator=torch.Generator().manual_seed(2))
    freq = torch.bincount(out.tokens, minlength=300).float() / 30000
    assert torch.allclose(freq, expected, atol=0.012)
    logp = torch.log(expected[out.tokens[:50]])
    assert torch.allclose(out.sample_logps[:50], logp, atol=1e-5)


def test_top_k_keeps_every_token_tied_at_the_threshold() -> None:
    logits = torch.tensor([[2.0, 1.0, 1.0, 1.0, 0.0]])
    probs = sampling_probs(logits, SamplingParams(top_k=2))
    e = math.exp(1.0)
    _close(probs, [e / (e + 3), 1 / (e + 3), 1 / (e + 3), 1 / (e + 3), 0.0])
    out = sample_tokens(
        logits.repeat(4000, 1), SamplingParams(top_k=2), generator=torch.Generator().manual_seed(0)
    )
    assert set(out.tokens.tolist()) == {0, 1, 2, 3}


def test_draws_do_not_depend_on_the_probabilities_dtype() -> None:
    # The noise is float32 whatever the dtype: half-precision noise has 256 levels or fewer
    # below 1, and its ties and rounding would bend the race.
    probs = torch.softmax(torch.randn(512, 40, generator=torch.Generator().manual_seed(1)), -1)
    half = probs.to(torch.bfloat16)
    drawn_half, _ = draw_tokens(half, torch.Generator().manual_seed(0), fallback_token_id=0)
    drawn_full, _ = draw_tokens(half.float(), torch.Generator().manual_seed(0), fallback_token_id=0)
    assert torch.equal(drawn_half, drawn_full)
