"""Losses, reductions and KL estimators against values worked out by hand.

Every expected number is written as the arithmetic that produces it, from the
definitions (PPO clip, decoupled PPO, GSPO, the reductions, k1/k2/k3), not by
calling the code under test.
"""

from __future__ import annotations

import math

import pytest
import torch
from agentrl.rl.advantages import ADVANTAGE_ESTIMATORS
from agentrl.rl.losses import (
    KL_ESTIMATORS,
    OBJECTIVE_BY_LEVEL,
    OBJECTIVES,
    PROXIMAL_POLICIES,
    REDUCTIONS,
    ClipRange,
    LossConfig,
    behaviour_correction,
    clipped_surrogate,
    kl_penalty,
    masked_stats,
    no_correction,
    objective_for_level,
    policy_loss,
    reduce_loss,
    register_reduction,
    resolve_prox_logps,
    staleness_weights,
)

LN = math.log


def t(*rows: list[float]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32)


def cfg(**kw) -> LossConfig:
    base = {"use_decoupled_ppo": False, "loss_reduction": "token"}
    return LossConfig(**{**base, **kw})


# ----------------------------- PPO clip -----------------------------


def test_clipped_surrogate_takes_the_pessimistic_side() -> None:
    ratio = t([1.5, 0.5, 1.0], [1.5, 0.5, 1.0])
    out = clipped_surrogate(ratio, torch.tensor([1.0, -1.0]), 0.2, 0.2)
    # A=+1: min(1.5, 1.2)=1.2, min(0.5, 0.8)=0.5, 1 ; A=-1: min(-1.5,-1.2)=-1.5, min(-.5,-.8)=-.8
    torch.testing.assert_close(out, t([1.2, 0.5, 1.0], [-1.5, -0.8, -1.0]))


def test_ppo_loss_clip_fractions_and_token_mean() -> None:
    old = torch.zeros(2, 3)
    logps = t([LN(1.5), LN(0.5), 0.0], [LN(1.5), LN(0.5), 0.0]).requires_grad_()
    res = policy_loss(logps, old, torch.tensor([1.0, -1.0]), torch.ones(2, 3), cfg())
    # per-token loss = -surrogate: row 1 [-1.2, -0.5, -1], row 2 [1.5, 0.8, 1]
    torch.testing.assert_close(res.per_token_loss, t([-1.2, -0.5, -1.0], [1.5, 0.8, 1.0]))
    # token mean: (-1.2 - 0.5 - 1 + 1.5 + 0.8 + 1) / 6 = 0.6 / 6
    assert res.loss.item() == pytest.approx(0.1, abs=1e-6)
    m = res.metrics
    assert m["policy/clip_frac_high"] == pytest.approx(1 / 6)  # r=1.5 with A>0
    assert m["policy/clip_frac_low"] == pytest.approx(1 / 6)  # r=0.5 with A<0
    assert m["policy/clip_frac_total"] == pytest.approx(2 / 6)
    assert m["policy/ratio_clip_frac"] == pytest.approx(4 / 6)  # any side: outside the band
    # approx_kl_old = mean(logp - old) = (2 ln 1.5 + 2 ln 0.5) / 6
    assert m["policy/approx_kl_old"] == pytest.approx((2 * LN(1.5) + 2 * LN(0.5)) / 6, abs=1e-6)
    assert m["policy/old_current_abs_delta"] == pytest.approx(
        (2 * LN(1.5) - 2 * LN(0.5)) / 6, abs=1e-6
    )


def test_clip_higher_widens_only_the_upper_side() -> None:
    logps = t([LN(1.5), LN(0.5)])
    res = policy_loss(
        logps,
        torch.zeros(1, 2),
        torch.tensor([1.0]),
        torch.ones(1, 2),
        cfg(epsilon=0.2, epsilon_high=0.28),
    )
    # min(1.5, 1.28) = 1.28 ; min(0.5, 0.8) = 0.5
    torch.testing.assert_close(res.per_token_loss, t([-1.28, -0.5]))
    # epsilon_high unset (None) or 0 (the config's "same as epsilon") -> 1.2 both sides
    assert LossConfig(epsilon=0.2, epsilon_high=0.0).upper_epsilon == 0.2
    assert LossConfig(epsilon=0.2).upper_epsilon == 0.2


def test_ratio_log_is_clamped_at_ten() -> None:
    res = policy_loss(t([50.0]), t([0.0]), torch.tensor([-1.0]), t([1.0]), cfg())
    # ratio = e^10 (clamped), A=-1: min(-e^10, -1.2) = -e^10 -> loss e^10
    assert res.loss.item() == pytest.approx(math.exp(10), rel=1e-5)


# ----------------------------- decoupled PPO -----------------------------


def test_loglinear_prox_interpolates_towards_version_minus_one() -> None:
    old, cur = t([-2.0, -2.0, -2.0, -2.0, -2.0]), t([-1.0, -1.0, -1.0, -1.0, -1.0])
    versions = torch.tensor([[1, 3, 2, -1, 0]])
    prox = resolve_prox_logps(old, cur, versions, current_version=3)
    # alpha = (V-1-v)/max(V-v,1), clamped: v=1 -> 1/2 ; v=3 -> -1 -> 0 ; v=2 -> 0 ; v=-1 -> keep
    # v=0 -> 2/3 ; prox = old + alpha (cur - old)
    torch.testing.assert_close(prox, t([-1.5, -2.0, -2.0, -2.0, -2.0 + 2 / 3]))
    torch.testing.assert_close(resolve_prox_logps(old, cur, versions, 3, "behavior"), old)
    with pytest.raises(ValueError):
        resolve_prox_logps(old, cur, versions, 3, "other")


def _decoupled_case(**kw):
    # token a: behaviour -2 at version 1, current -1 -> prox -1.5
    # token b: fresh (version 3), behaviour -1.2, current -1 -> prox -1.2
    logps = t([-1.0, -1.0]).requires_grad_()
    return policy_loss(
        logps,
        t([-2.0, -1.2]),
        torch.tensor([1.0]),
        torch.ones(1, 2),
        cfg(use_decoupled_ppo=True, **kw),
        token_versions=torch.tensor([[1, 3]]),
        current_version=3,
    )


def test_decoupled_ppo_weights_the_clipped_ratio_by_the_capped_behaviour_weight() -> None:
    res = _decoupled_case(behav_imp_weight_cap=1.5)
    # a: ratio e^(-1+1.5)=e^0.5=1.6487 -> clip 1.2 ; weight e^(-1.5+2)=e^0.5 -> cap 1.5
    #    surrogate 1.5 * 1.2 = 1.8
    # b: ratio e^(-1+1.2)=e^0.2=1.2214 -> clip 1.2 ; weight e^0 = 1 -> surrogate 1.2
    torch.testing.assert_close(res.per_token_loss, t([-1.8, -1.2]))
    assert res.loss.item() == pytest.approx(-1.5)
    assert res.metrics["policy/behav_imp_weight_cap_frac"] == pytest.approx(0.5)
    # without a cap the weight stays e^0.5: surrogate e^0.5 * 1.2
    res = _decoupled_case(behav_imp_weight_cap=0.0)
    assert res.per_token_loss[0, 0].item() == pytest.approx(-math.exp(0.5) * 1.2, rel=1e-6)


def test_m2_masking_drops_tokens_far_from_the_proximal_policy() -> None:
    res = _decoupled_case(m2_threshold=0.2)
    # a: (old - prox)^2 = (-2 + 1.5)^2 = 0.25 > 0.2 -> masked ; b: 0 -> kept
    assert res.mask.tolist() == [[0.0, 1.0]]
    assert res.loss.item() == pytest.approx(-1.2)
    assert res.metrics["policy/m2_mask_frac"] == pytest.approx(0.5)


def test_clipped_tokens_get_no_gradient_even_through_the_behaviour_weight() -> None:
    logps = t([-1.0, -1.0]).requires_grad_()
    res = policy_loss(
        logps,
        t([-2.0, -1.2]),
        torch.tensor([1.0]),
        torch.ones(1, 2),
        cfg(use_decoupled_ppo=True, behav_imp_weight_cap=0.0),
        token_versions=torch.tensor([[1, 3]]),
        current_version=3,
    )
    # A=+1 and both ratios (e^0.5, e^0.2) exceed 1.2: both sit on the clipped side, so the
    # gradient is zero; the proximal log-probs and the weight e^(prox-old) must not add one.
    res.loss.backward()
    assert logps.grad.tolist() == [[0.0, 0.0]]


def test_decoupled_gradient_flows_only_through_the_ratio() -> None:
    logps = t([-1.0]).requires_grad_()
    res = policy_loss(
        logps,
        t([-2.0]),
        torch.tensor([-1.0]),
        t([1.0]),
        cfg(use_decoupled_ppo=True, behav_imp_weight_cap=0.0),
        token_versions=torch.tensor([[1]]),
        current_version=3,
    )
    # prox = -1.5, r = e^0.5 (A<0: unclipped side min(-r, -1.2) = -r), w = e^0.5 (no grad)
    # loss = w * r ; d loss / d logp = w * r = e^0.5 * e^0.5 = e
    res.loss.backward()
    assert logps.grad.item() == pytest.approx(math.e, rel=1e-5)


def test_decoupled_without_token_versions_treats_tokens_as_fresh() -> None:
    # fresh tokens: prox = behaviour, so decoupled PPO equals plain PPO (weight 1)
    logps, old = t([-1.0, -1.0]), t([-1.1, -0.9])
    adv, mask = torch.tensor([1.0]), torch.ones(1, 2)
    plain = policy_loss(logps, old, adv, mask, cfg())
    decoupled = policy_loss(logps, old, adv, mask, cfg(use_decoupled_ppo=True), current_version=5)
    torch.testing.assert_close(decoupled.per_token_loss, plain.per_token_loss)


# ----------------------------- GSPO -----------------------------


def test_sequence_level_ratio_is_the_masked_mean_log_ratio() -> None:
    logps = t([0.2, 0.4, 5.0]).requires_grad_()
    mask = t([1.0, 1.0, 0.0])
    c = cfg(importance_sampling_level="sequence", loss_reduction="sequence")
    res = policy_loss(logps, torch.zeros(1, 3), torch.tensor([-1.0]), mask, c)
    r = math.exp(0.3)  # exp((0.2 + 0.4) / 2); the masked 5.0 is ignored
    # A=-1: min(-r, -1.2) = -r -> per-token loss r on the two trained tokens, row mean r
    assert res.loss.item() == pytest.approx(r, rel=1e-6)
    assert res.metrics["policy/ratio_mean"] == pytest.approx(r, rel=1e-6)
    res.loss.backward()
    # d r / d logp_j = r / 2 for each trained token, 0 for the masked one
    torch.testing.assert_close(logps.grad, t([r / 2, r / 2, 0.0]))


def test_sequence_level_ratio_is_clipped_as_a_whole() -> None:
    c = cfg(importance_sampling_level="sequence")
    res = policy_loss(t([0.2, 0.4]), torch.zeros(1, 2), torch.tensor([1.0]), torch.ones(1, 2), c)
    # r = e^0.3 = 1.35 > 1.2 with A=+1 -> both tokens clipped at 1.2
    torch.testing.assert_close(res.per_token_loss, t([-1.2, -1.2]))
    assert res.metrics["policy/clip_frac_high"] == 1.0


# ----------------------------- reductions -----------------------------

LOSS = t([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0])
MASK = t([1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0])  # lengths 3, 1, 0


@pytest.mark.parametrize(
    ("mode", "kwargs", "expected"),
    [
        ("token", {}, (1 + 2 + 3 + 4) / 4),
        ("sequence", {}, (2 + 4) / 2),  # row means 2 and 4, the empty row left out
        ("grpo", {}, (2 + 4 + 0) / 3),  # the empty row counts as 0
        ("bnpo", {}, 10 / 4),
        ("dr_grpo", {"max_completion_length": 4}, 10 / (3 * 4)),
        ("dapo", {"global_tokens": 8}, 10 / 8),
        ("dapo", {}, 10 / 4),  # without a global count: this batch's tokens
    ],
)
def test_reductions(mode: str, kwargs: dict, expected: float) -> None:
    loss, num, den = reduce_loss(LOSS, MASK, mode, **kwargs)
    assert loss.item() == pytest.approx(expected)
    assert (num / den).item() == pytest.approx(expected)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token", (1 + 2 + 3 + 0.5 * 4) / (3 + 0.5)),
        ("sequence", (2 * 1 + 4 * 0.5) / (1 + 0.5)),
        ("grpo", (2 + 0.5 * 4 + 0) / 3),
        ("bnpo", (1 + 2 + 3 + 0.5 * 4) / 4),
    ],
)
def test_reductions_apply_row_weights(mode: str, expected: float) -> None:
    loss, _, _ = reduce_loss(LOSS, MASK, mode, torch.tensor([1.0, 0.5, 1.0]))
    assert loss.item() == pytest.approx(expected)


def test_sequence_reduction_floors_the_weight_sum_at_one_like_the_seed() -> None:
    # one row, mean (2 + 4)/2 = 3, weight 0.65: 3 * 0.65 / max(0.65, 1)
    loss, _, _ = reduce_loss(t([2.0, 4.0]), t([1.0, 1.0]), "sequence", torch.tensor([0.65]))
    assert loss.item() == pytest.approx(1.95)


def test_all_empty_rows_reduce_to_zero_with_a_gradient_path() -> None:
    per_token = t([1.0, 2.0]).requires_grad_()
    for mode in ("token", "sequence", "grpo", "bnpo", "dapo"):
        loss, _, _ = reduce_loss(per_token, torch.zeros(1, 2), mode)
        assert loss.item() == 0.0
        assert loss.requires_grad
    with pytest.raises(ValueError, match="unknown loss_reduction"):
        reduce_loss(per_token, torch.ones(1, 2), "mean")


def test_staleness_discount_per_row() -> None:
    w, m = staleness_weights(torch.tensor([5, 4, 2, 6]), current_version=5, discount=0.5)
    # staleness 0, 1, 3, 0 (a newer row is not negative): 0.5^0, 0.5^1, 0.5^3, 0.5^0
    assert w.tolist() == [1.0, 0.5, 0.125, 1.0]
    assert m["async/row_staleness_mean"] == 1.0
    assert m["async/row_weight_mean"] == pytest.approx((1 + 0.5 + 0.125 + 1) / 4)
    ones, _ = staleness_weights(torch.tensor([0, 1]), current_version=5, discount=1.0)
    assert ones.tolist() == [1.0, 1.0]


# ----------------------------- KL -----------------------------


@pytest.mark.parametrize(
    ("estimator", "delta", "expected"),
    [
        ("k1", 0.5, -0.5),
        ("k2", 0.5, 0.125),  # 0.5^2 / 2
        ("k3", 0.5, math.exp(0.5) - 1 - 0.5),
        ("k1", -2.0, 2.0),
        ("k2", -2.0, 2.0),  # 4 / 2
        ("k3", -2.0, math.exp(-2.0) - 1 + 2.0),
    ],
)
def test_kl_estimators(estimator: str, delta: float, expected: float) -> None:
    # delta = log pi_ref - log pi ; logps -1, ref -1 + delta
    kl, saturated = kl_penalty(t([-1.0]), t([-1.0 + delta]), estimator)
    assert kl.item() == pytest.approx(expected, rel=1e-5)
    assert not saturated.any()


def test_k3_is_bounded_and_reports_saturation() -> None:
    kl, saturated = kl_penalty(t([-60.0, -1.0]), t([-10.0, -1.0]), "k3")
    # delta 50 is bounded at 20: e^20 - 1 - 20 ; delta 0: 0
    assert kl[0, 0].item() == pytest.approx(math.exp(20) - 21, rel=1e-5)
    assert kl[0, 1].item() == 0.0
    assert saturated.tolist() == [[True, False]]
    assert torch.isfinite(kl).all()


def test_k3_expm1_form_is_non_negative_near_zero() -> None:
    kl, _ = kl_penalty(
        torch.tensor([[0.0]], dtype=torch.float64),
        torch.tensor([[1e-6]], dtype=torch.float64),
        "k3",
    )
    # e^d - 1 - d ~ d^2/2 = 5e-13
    assert kl.item() == pytest.approx(5e-13, rel=1e-3)


def test_kl_penalty_enters_the_loss_with_beta_and_metrics() -> None:
    logps, ref = t([-1.0, -1.0]), t([-0.5, -61.0])
    res = policy_loss(
        logps, logps.detach(), torch.tensor([0.0]), torch.ones(1, 2), cfg(), beta=0.1, ref_logps=ref
    )
    k3_a = math.exp(0.5) - 1.5  # delta 0.5
    k3_b = math.exp(-60.0) - 1 + 60.0  # delta -60 (not saturated: only large positive is)
    # A=0 so the surrogate is 0: loss = 0.1 * mean(k3)
    assert res.loss.item() == pytest.approx(0.1 * (k3_a + k3_b) / 2, rel=1e-5)
    assert res.metrics["policy/kl_ref"] == pytest.approx((k3_a + k3_b) / 2, rel=1e-5)
    assert res.metrics["policy/kl_ref_saturation"] == 0.0
    res = policy_loss(
        logps,
        logps.detach(),
        torch.tensor([0.0]),
        torch.ones(1, 2),
        cfg(),
        beta=0.1,
        ref_logps=t([-0.5, 30.0]),
    )
    assert res.metrics["policy/kl_ref_saturation"] == 0.5


def test_beta_zero_or_no_reference_adds_no_penalty() -> None:
    logps = t([-1.0])
    for kwargs in ({"beta": 0.0, "ref_logps": t([-100.0])}, {"beta": 0.5}):
        res = policy_loss(logps, logps, torch.tensor([1.0]), t([1.0]), cfg(), **kwargs)
        assert res.loss.item() == pytest.approx(-1.0)  # ratio 1, A=1


# ----------------------------- metrics -----------------------------


def test_masked_stats_mean_and_percentiles() -> None:
    values = t([1.0, 2.0, 3.0, 4.0, 5.0, 100.0])
    mask = t([1.0, 1.0, 1.0, 1.0, 1.0, 0.0])
    s = masked_stats(values, mask, "x")
    # linear interpolation over 5 values: p05 at 0.2 -> 1.2 ; p95 at 3.8 -> 4.8
    assert s == pytest.approx({"x_mean": 3.0, "x_p05": 1.2, "x_p50": 3.0, "x_p95": 4.8})
    assert masked_stats(values, torch.zeros(1, 6), "x")["x_p50"] == 0.0


def test_entropy_and_length_metrics_use_the_final_mask() -> None:
    res = policy_loss(
        t([0.0, 0.0, 0.0]),
        torch.zeros(1, 3),
        torch.tensor([1.0]),
        t([1.0, 1.0, 0.0]),
        cfg(),
        entropy=t([1.0, 2.0, 9.0]),
    )
    assert res.metrics["policy/entropy"] == pytest.approx(1.5)
    assert res.metrics["length/avg_completion_tokens"] == 2.0
    assert res.metrics["policy/valid_completion_rows"] == 1.0


# ----------------------------- the parts on their own -----------------------------

CLIP = ClipRange(low=0.2, high=0.2, log_ratio=10.0)


def test_objectives_are_registered_by_name_and_chosen_by_level() -> None:
    assert OBJECTIVE_BY_LEVEL == {"token": "ppo_clip", "sequence": "gspo"}
    assert objective_for_level("sequence") is OBJECTIVES["gspo"]
    with pytest.raises(ValueError, match="unknown importance_sampling_level"):
        objective_for_level("row")


def test_ppo_clip_objective_on_its_own() -> None:
    # anchor 0: ratios 1.5 and 0.5 ; A = +1: min(1.5, 1.2) = 1.2, min(0.5, 0.8) = 0.5
    out = OBJECTIVES["ppo_clip"](
        t([LN(1.5), LN(0.5)]), torch.zeros(1, 2), torch.tensor([1.0]), torch.ones(1, 2), CLIP
    )
    torch.testing.assert_close(out.per_token_loss, t([-1.2, -0.5]))
    torch.testing.assert_close(out.ratio, t([1.5, 0.5]))


def test_gspo_objective_shares_one_ratio_per_row() -> None:
    # row mean log-ratio over trained tokens (0.1 + 0.3) / 2 = 0.2: both tokens use e^0.2,
    # the untrained third token too (it is masked later); A = -1: min(-r, -0.8) = -r
    out = OBJECTIVES["gspo"](
        t([0.1, 0.3, 9.0]), torch.zeros(1, 3), torch.tensor([-1.0]), t([1.0, 1.0, 0.0]), CLIP
    )
    r = math.exp(0.2)
    torch.testing.assert_close(out.ratio, t([r, r, r]))
    torch.testing.assert_close(out.per_token_loss, t([r, r, r]))


def test_behaviour_correction_on_its_own() -> None:
    # token a: behaviour -2 at version 1 of 3, current -1 -> prox -1.5, weight e^0.5 -> cap 1.5
    # token b: fresh (version 3): prox = behaviour -1.2, weight 1
    fix = behaviour_correction(
        t([-2.0, -1.2]),
        t([-1.0, -1.0]),
        torch.ones(1, 2),
        token_versions=torch.tensor([[1, 3]]),
        current_version=3,
        method="loglinear",
        weight_cap=1.5,
        m2_threshold=0.2,
        log_ratio_clip=10.0,
    )
    torch.testing.assert_close(fix.anchor_logps, t([-1.5, -1.2]))
    torch.testing.assert_close(fix.weights, t([1.5, 1.0]))
    # M2: (old - prox)^2 = 0.25 > 0.2 masks token a
    assert fix.mask.tolist() == [[0.0, 1.0]]
    assert fix.stats["policy/behav_imp_weight_cap_frac"].item() == 0.5
    assert fix.stats["policy/m2_mask_frac"].item() == 0.5
    assert not fix.weights.requires_grad


def test_no_correction_anchors_at_the_behaviour_policy() -> None:
    mask = t([1.0, 0.0])
    fix = no_correction(t([float("nan"), -1.0]), mask)
    assert fix.anchor_logps.tolist() == [[0.0, -1.0]]  # a missing log-prob reads as 0
    assert fix.weights.tolist() == [[1.0, 1.0]] and fix.mask is mask
    assert all(v.item() == 0.0 for v in fix.stats.values())


def test_reductions_return_device_tensors_and_a_new_one_can_be_registered() -> None:
    _, num, den = reduce_loss(LOSS, MASK, "grpo")
    assert torch.is_tensor(den) and den.dim() == 0 and den.item() == 3.0
    assert num.item() == pytest.approx(2 + 4)

    @register_reduction("row_sum_test")
    def row_sum(loss, mask, weights, **_):
        return (loss * mask).sum(), torch.ones(())

    try:
        loss, _, _ = reduce_loss(LOSS, MASK, "row_sum_test")
        assert loss.item() == 10.0
    finally:
        del REDUCTIONS["row_sum_test"]


def test_kl_estimators_are_registered() -> None:
    assert tuple(KL_ESTIMATORS) == ("k1", "k2", "k3")
    with pytest.raises(ValueError, match="unknown kl_estimator"):
        kl_penalty(t([0.0]), t([0.0]), "k4")


def test_masked_stats_agree_with_torch_quantile() -> None:
    gen = torch.Generator().manual_seed(3)
    values = torch.randn(4, 9, generator=gen)
    mask = (torch.rand(4, 9, generator=gen) > 0.4).float()
    picked = values[mask.bool()]
    want = torch.quantile(picked, torch.tensor([0.05, 0.5, 0.95]))
    s = masked_stats(values, mask, "x")
    got = torch.stack([s["x_p05"], s["x_p50"], s["x_p95"]])
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(s["x_mean"], picked.mean())


def test_policy_loss_metrics_are_detached_scalar_tensors() -> None:
    logps = t([-1.0, -0.5]).requires_grad_()
    res = policy_loss(
        logps,
        t([-1.1, -0.4]),
        torch.tensor([1.0]),
        torch.ones(1, 2),
        LossConfig(),
        beta=0.1,
        ref_logps=t([-1.0, -1.0]),
        entropy=t([1.0, 2.0]),
    )
    assert res.metrics and all(
        torch.is_tensor(v) and v.dim() == 0 and not v.requires_grad for v in res.metrics.values()
    )
    assert res.denominator.dim() == 0


# ----------------------------- config choices -----------------------------


@pytest.mark.parametrize(
    ("option", "registry"),
    [
        ("loss_reduction", REDUCTIONS),
        ("importance_sampling_level", OBJECTIVE_BY_LEVEL),
        ("kl_estimator", KL_ESTIMATORS),
        ("prox_logp_method", PROXIMAL_POLICIES),
        ("advantage_mode", ADVANTAGE_ESTIMATORS),
    ],
)
def test_config_accepts_exactly_the_registered_names(option: str, registry: dict) -> None:
    from agentrl.config import resolve

    for name in registry:
        assert getattr(resolve(preset="compat", overrides={option: name}), option) == name
    with pytest.raises(ValueError, match=option):
        resolve(preset="compat", overrides={option: "not_registered"})
