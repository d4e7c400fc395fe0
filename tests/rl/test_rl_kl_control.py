"""The adaptive beta controller and the hard KL stop, step by step by hand."""

from __future__ import annotations

import math

import pytest
from agentrl.rl.kl_control import (
    BetaConfig,
    BetaController,
    control_metric_key,
    hard_kl_stop,
    update_beta,
)

# decay 0 makes the EMA equal to the observation, so each case isolates one beta update.
NO_EMA = {"beta_ema_decay": 0.0, "beta_update_interval": 1, "kl_target": 0.06}


def step(beta: float, observed: float, opt_step: int = 1, **kw) -> tuple[float, float]:
    return update_beta(beta, 0.06, observed, opt_step, BetaConfig(**{**NO_EMA, **kw}))


def test_beta_rises_by_sqrt_of_the_excess_capped_at_1_12() -> None:
    # ema 0.0752 > 1.25 * 0.06 = 0.075: ratio 0.0752/0.06 = 1.25333, sqrt = 1.11952
    beta, ema = step(0.03, 0.0752)
    assert ema == pytest.approx(0.0752)
    assert beta == pytest.approx(0.03 * math.sqrt(0.0752 / 0.06))
    # far above: the ratio caps at 1.12^2, the multiplier at 1.12
    assert step(0.03, 1.0)[0] == pytest.approx(0.03 * 1.12)


def test_beta_falls_by_at_most_1_over_1_12_and_stops_at_beta_min() -> None:
    # ema 0.03 < 0.8 * 0.06 = 0.048: ratio 2 -> capped 1.2544 -> multiplier 1/1.12
    assert step(0.03, 0.03)[0] == pytest.approx(0.03 / 1.12)
    # ema 0.047: ratio 0.06/0.047 = 1.2766 -> capped too
    assert step(0.03, 0.047)[0] == pytest.approx(0.03 / 1.12)
    # 0.0105 / 1.12 = 0.009375 < beta_min 0.01
    assert step(0.0105, 0.0, beta_min=0.01)[0] == 0.01


def test_beta_inside_the_dead_band_does_not_move() -> None:
    for observed in (0.048, 0.06, 0.075):
        assert step(0.03, observed)[0] == 0.03


def test_beta_is_capped_at_beta_max() -> None:
    # 0.079 * 1.12 = 0.08848 > 0.08
    assert step(0.079, 1.0, beta_max=0.08)[0] == 0.08


def test_ema_blends_every_step_and_beta_moves_only_on_the_interval() -> None:
    cfg = BetaConfig(beta=0.03, kl_target=0.06, beta_ema_decay=0.9, beta_update_interval=4)
    ctl = BetaController(cfg)
    assert ctl.ema == 0.06  # starts at the target
    metrics = {"policy/old_current_abs_delta": 0.3}
    # step 1: ema = 0.9 * 0.06 + 0.1 * 0.3 = 0.084 ; 1 % 4 != 0 -> beta unchanged
    assert ctl.update(metrics, opt_step=1) == pytest.approx(0.084)
    assert ctl.beta == 0.03
    # steps 2, 3: 0.9*0.084+0.03 = 0.1056 ; 0.9*0.1056+0.03 = 0.12504
    ctl.update(metrics, 2)
    ctl.update(metrics, 3)
    assert ctl.beta == 0.03
    # step 4: ema = 0.9 * 0.12504 + 0.03 = 0.142536 > 0.075 -> beta * 1.12
    assert ctl.update(metrics, 4) == pytest.approx(0.142536)
    assert ctl.beta == pytest.approx(0.0336)


def test_auto_tune_off_tracks_the_ema_only() -> None:
    beta, ema = step(0.03, 1.0, beta_auto_tune=False)
    assert (beta, ema) == (0.03, 1.0)


def test_non_finite_values_do_not_poison_the_controller() -> None:
    cfg = BetaConfig(**{**NO_EMA, "beta_ema_decay": 0.5})
    # a NaN observation counts as 0: ema = 0.5 * 0.06 + 0.5 * 0 = 0.03
    assert update_beta(0.03, 0.06, float("nan"), 1, cfg)[1] == pytest.approx(0.03)
    # a NaN EMA restarts from the observation
    assert update_beta(0.03, float("nan"), 0.2, 1, cfg)[1] == 0.2


def test_control_metric_names() -> None:
    assert control_metric_key("kl_ref") == "policy/kl_ref"
    assert control_metric_key("approx_kl_old") == "policy/approx_kl_old_abs"
    assert control_metric_key("old_current_abs_delta") == "policy/old_current_abs_delta"
    ctl = BetaController(BetaConfig(beta_control_metric="kl_ref"))
    assert ctl.control_value({"policy/kl_ref": 0.2, "policy/old_current_abs_delta": 9}) == 0.2


def test_hard_stop_triggers_past_mult_times_target_and_says_why() -> None:
    cfg = BetaConfig(kl_target=0.06, hard_kl_stop_mult=8.0)
    # limit 0.06 * 8 = 0.48
    assert hard_kl_stop(0.49, cfg)
    assert not hard_kl_stop(0.47, cfg)
    assert not hard_kl_stop(100.0, BetaConfig(hard_kl_stop_mult=0.0))
    ctl = BetaController(cfg)
    message = ctl.should_stop({"policy/old_current_abs_delta": 0.5, "policy/kl_ref": 0.1})
    assert message is not None and "0.5000 > 0.4800" in message
    assert ctl.should_stop({"policy/old_current_abs_delta": 0.1}) is None


def test_state_round_trip() -> None:
    ctl = BetaController(BetaConfig())
    ctl.beta, ctl.ema = 0.042, 0.123
    other = BetaController(BetaConfig())
    other.load_state_dict(ctl.state_dict())
    assert (other.beta, other.ema) == (0.042, 0.123)
