"""Optimisation: skipped steps change nothing, micro-batches add up, schedule and clipping."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from agentrl.rl.losses import REDUCTIONS, LossConfig, policy_loss, reduction_denominator
from agentrl.rl.optim import (
    OptimConfig,
    Optimization,
    build_optimizer,
    build_scheduler,
    merge_microbatch_metrics,
)
from agentrl.training.minibatch import row_chunks


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Linear(3, 2)


def _loss(model: torch.nn.Module, scale: float = 1.0) -> torch.Tensor:
    x = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
    return (model(x) ** 2).sum() * scale


def _state(opt: Optimization, model: torch.nn.Module):
    return copy.deepcopy(
        {
            "params": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "optim": opt.optimizer.state_dict(),
            "sched": opt.scheduler.state_dict(),
            "opt_step": opt.opt_step,
            "pending": opt.pending,
            "grads": [None if p.grad is None else p.grad.clone() for p in model.parameters()],
        }
    )


def _assert_same(a, b) -> None:
    assert a["opt_step"] == b["opt_step"] and a["pending"] == b["pending"]
    assert a["sched"] == b["sched"]
    for k in a["params"]:
        assert torch.equal(a["params"][k], b["params"][k]), k
    for ga, gb in zip(a["grads"], b["grads"], strict=True):
        assert (ga is None and gb is None) or torch.equal(ga, gb)
    sa, sb = a["optim"]["state"], b["optim"]["state"]
    assert sa.keys() == sb.keys()
    for i in sa:
        for name in sa[i]:
            assert torch.equal(torch.as_tensor(sa[i][name]), torch.as_tensor(sb[i][name]))


def _run_step(opt: Optimization, loss: torch.Tensor, skip: str | None = None):
    opt.begin()
    opt.backward(loss)
    return opt.finish(skip)


def test_nan_loss_skips_the_update_and_touches_nothing() -> None:
    model = _model()
    opt = Optimization(model, OptimConfig(learning_rate=1e-2, accumulation_steps=1), 10)
    assert _run_step(opt, _loss(model)).stepped  # optimizer now has Adam moments
    before = _state(opt, model)
    report = _run_step(opt, _loss(model, float("nan")))
    assert not report.stepped
    assert report.skipped is not None and "non-finite loss" in report.skipped
    _assert_same(before, _state(opt, model))


def test_nan_gradient_with_finite_loss_is_skipped_too() -> None:
    model = _model()
    opt = Optimization(model, OptimConfig(learning_rate=1e-2, accumulation_steps=1), 10)
    _run_step(opt, _loss(model))
    before = _state(opt, model)
    handle = model.weight.register_hook(lambda g: g * float("nan"))
    report = _run_step(opt, _loss(model))
    handle.remove()
    assert report.skipped == "non-finite gradient"
    _assert_same(before, _state(opt, model))


def test_a_skipped_step_keeps_the_gradient_accumulated_before_it() -> None:
    cfg = OptimConfig(learning_rate=1e-2, accumulation_steps=2, grad_clip=0.0)
    model, ref = _model(), _model()
    opt, ref_opt = Optimization(model, cfg, 10), Optimization(ref, cfg, 10)
    # run: clean A, NaN B (skipped), hard-KL-stopped C (skipped), clean D -> one step on A + D
    assert not _run_step(opt, _loss(model, 1.0)).stepped
    assert _run_step(opt, _loss(model, float("inf"))).skipped
    assert _run_step(opt, _loss(model, 3.0), skip="KL too high").skipped == "KL too high"
    assert _run_step(opt, _loss(model, 2.0)).stepped
    # reference: clean A and D only
    _run_step(ref_opt, _loss(ref, 1.0))
    assert _run_step(ref_opt, _loss(ref, 2.0)).stepped
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    assert opt.opt_step == ref_opt.opt_step == 1


def test_gradient_is_divided_by_accumulation_steps() -> None:
    model = torch.nn.Linear(1, 1, bias=False)
    opt = Optimization(model, OptimConfig(accumulation_steps=4, grad_clip=0.0), 10)
    opt.begin()
    opt.backward(model.weight.sum() * 8.0)  # d/dw = 8, / 4 steps
    opt.finish()
    assert model.weight.grad.item() == pytest.approx(2.0)


def test_grad_norm_is_reported_before_clipping() -> None:
    model = torch.nn.Linear(2, 1, bias=False)
    opt = Optimization(model, OptimConfig(accumulation_steps=1, grad_clip=0.5), 10)
    w = model.weight
    report = _run_step(opt, 3.0 * w[0, 0] + 4.0 * w[0, 1])
    assert report.grad_norm == pytest.approx(5.0)  # sqrt(3^2 + 4^2)


def test_adamw_and_cosine_schedule_to_a_tenth() -> None:
    model = _model()
    cfg = OptimConfig(learning_rate=1e-3, weight_decay=0.01, accumulation_steps=2)
    opt = build_optimizer(model, cfg)
    assert opt.param_groups[0]["betas"] == (0.9, 0.95)
    assert opt.param_groups[0]["weight_decay"] == 0.01
    sched = build_scheduler(opt, total_steps=8, config=cfg)  # T_max = ceil(8/2) = 4
    lrs = []
    for _ in range(4):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    # eta_min + (lr - eta_min) (1 + cos(pi k / 4)) / 2, eta_min = 1e-4
    expected = [1e-4 + 9e-4 * (1 + math.cos(math.pi * k / 4)) / 2 for k in (1, 2, 3, 4)]
    assert lrs == pytest.approx(expected)
    assert lrs[-1] == pytest.approx(1e-4)


def test_adam_options_reach_the_optimizer_and_epsilon_damps_tiny_gradients() -> None:
    cfg = OptimConfig(
        learning_rate=1e-2, weight_decay=0.0, adam_beta1=0.5, adam_beta2=0.9, adam_epsilon=1e-3
    )
    moved = []
    for eps in (1e-8, 1e-3):
        model = _model()
        opt = build_optimizer(model, OptimConfig(**{**cfg.__dict__, "adam_epsilon": eps}))
        assert opt.param_groups[0]["betas"] == (0.5, 0.9) and opt.param_groups[0]["eps"] == eps
        w = next(model.parameters())
        before = w.detach().clone()
        (1e-6 * w.sum()).backward()  # a gradient far below epsilon on every weight
        opt.step()
        moved.append(float((w.detach() - before).abs().max()))
    assert moved[0] == pytest.approx(1e-2, rel=2e-2)  # Adam: about lr, whatever the size
    assert moved[1] < 1e-4  # epsilon 1e-3: lr * 1e-6 / (1e-6 + 1e-3) ~ 1e-5


def test_warmup_climbs_linearly_then_follows_the_cosine() -> None:
    model = _model()
    cfg = OptimConfig(learning_rate=1e-3, accumulation_steps=1, warmup_steps=3)
    opt = build_optimizer(model, cfg)
    sched = build_scheduler(opt, total_steps=7, config=cfg)
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(7):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    # warm-up: lr * (k + 1) / 3 for k = 0, 1, 2; then cosine over the 4 remaining steps
    cosine = [1e-4 + 9e-4 * (1 + math.cos(math.pi * k / 4)) / 2 for k in range(5)]
    assert lrs == pytest.approx([1e-3 / 3, 2e-3 / 3, 1e-3, *cosine])
    resumed = build_scheduler(build_optimizer(_model(), cfg), total_steps=7, config=cfg)
    resumed.load_state_dict(sched.state_dict())
    assert resumed.get_last_lr() == pytest.approx([1e-4])


def test_min_lr_ratio_sets_where_the_cosine_ends_and_one_holds_the_rate() -> None:
    for floor, expected in ((1.0, [1e-3] * 5), (0.5, [1e-3, 8.75e-4, 6.25e-4, 5e-4])):
        cfg = OptimConfig(learning_rate=1e-3, accumulation_steps=1, min_lr_ratio=floor)
        opt = build_optimizer(_model(), cfg)
        sched = build_scheduler(opt, total_steps=len(expected) - 1, config=cfg)
        lrs = [opt.param_groups[0]["lr"]]
        for _ in expected[1:]:
            opt.step()
            sched.step()
            lrs.append(opt.param_groups[0]["lr"])
        assert lrs == pytest.approx(expected)


@pytest.mark.parametrize("mode", sorted(REDUCTIONS))
@pytest.mark.parametrize("level", ["token", "sequence"])
def test_weighted_microbatches_equal_the_full_batch(mode: str, level: str) -> None:
    gen = torch.Generator().manual_seed(1)
    rows, width = 5, 6
    mask = torch.zeros(rows, width)
    for i, n in enumerate([6, 1, 0, 4, 3]):  # unequal lengths and one empty row
        mask[i, :n] = 1.0
    logps = (-torch.rand(rows, width, generator=gen)).requires_grad_()
    old = (logps.detach() + 0.3 * torch.randn(rows, width, generator=gen)).clamp(max=0)
    adv = torch.randn(rows, generator=gen)
    weights = torch.tensor([1.0, 0.5, 1.0, 0.25, 1.0])
    versions = torch.tensor([[2] * width, [1] * width, [2] * width, [0] * width, [2] * width])
    config = LossConfig(
        loss_reduction=mode, importance_sampling_level=level, max_completion_length=8
    )
    kw = {"beta": 0.05, "current_version": 2, "global_tokens": float(mask.sum())}
    ref = -torch.rand(rows, width, generator=gen)

    full = policy_loss(
        logps,
        old,
        adv,
        mask,
        config,
        ref_logps=ref,
        row_weights=weights,
        token_versions=versions,
        **kw,
    )
    (full_grad,) = torch.autograd.grad(full.loss, logps)

    # The training step's cut (rows of similar length together) and its sum: each
    # micro-batch's numerator over the whole batch's denominator.
    chunks = row_chunks(mask.sum(dim=1), 2)
    total = reduction_denominator(
        mask, mode, weights, max_completion_length=8, global_tokens=kw["global_tokens"]
    )
    total_loss = torch.zeros(())
    for c in chunks:
        part = policy_loss(
            logps[c],
            old[c],
            adv[c],
            mask[c],
            config,
            ref_logps=ref[c],
            row_weights=weights[c],
            token_versions=versions[c],
            **kw,
        )
        total_loss = total_loss + part.numerator / total
    (chunk_grad,) = torch.autograd.grad(total_loss, logps)
    torch.testing.assert_close(total_loss, full.loss.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(chunk_grad, full_grad, rtol=1e-5, atol=1e-6)


def test_microbatch_metrics_merge_by_row_or_token_share() -> None:
    merged = merge_microbatch_metrics(
        [
            ({"policy/clip_frac_low": 0.5, "adv/mean": 1.0, "len_max": 3.0}, 0.25, 0.75),
            ({"policy/clip_frac_low": 0.1, "adv/mean": 2.0, "len_max": 5.0}, 0.75, 0.25),
        ]
    )
    assert merged["policy/clip_frac_low"] == pytest.approx(0.5 * 0.75 + 0.1 * 0.25)
    assert merged["adv/mean"] == pytest.approx(1.0 * 0.25 + 2.0 * 0.75)
    assert merged["len_max"] == 5.0


def test_microbatch_metrics_merge_tensors_without_leaving_the_device() -> None:
    merged = merge_microbatch_metrics(
        [
            (
                {"policy/clip_frac_low": torch.tensor(0.5), "len_max": torch.tensor(3.0)},
                0.25,
                torch.tensor(0.75),
            ),
            (
                {"policy/clip_frac_low": torch.tensor(0.1), "len_max": torch.tensor(5.0)},
                0.75,
                torch.tensor(0.25),
            ),
        ]
    )
    assert all(torch.is_tensor(v) for v in merged.values())
    assert merged["policy/clip_frac_low"].item() == pytest.approx(0.5 * 0.75 + 0.1 * 0.25)
    assert merged["len_max"].item() == 5.0


def test_state_round_trip_keeps_a_half_accumulated_gradient() -> None:
    cfg = OptimConfig(learning_rate=1e-2, accumulation_steps=2, grad_clip=0.0)
    model = _model()
    opt = Optimization(model, cfg, 10)
    _run_step(opt, _loss(model))
    _run_step(opt, _loss(model))  # one optimizer step
    _run_step(opt, _loss(model))  # half of the next window
    saved = copy.deepcopy(opt.state_dict())
    twin = copy.deepcopy(model)
    for p in twin.parameters():
        p.grad = None
    twin_opt = Optimization(twin, cfg, 10)
    twin_opt.load_state_dict(saved)
    assert twin_opt.pending == 1 and twin_opt.opt_step == 1
    _run_step(opt, _loss(model))
    _run_step(twin_opt, _loss(twin))
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


@pytest.mark.parametrize("grad_clip", [0.0, 1.0])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_clip_and_step_steps_nothing_on_a_non_finite_gradient(grad_clip: float, bad: float) -> None:
    from agentrl.rl.optim import clip_and_step

    weights = [torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2))]
    optimizer = torch.optim.SGD(weights, lr=0.1)
    weights[0].grad = torch.tensor([0.5, bad, 0.5])
    weights[1].grad = torch.ones(2)
    stepped, _ = clip_and_step(weights, optimizer, None, grad_clip)
    assert not stepped
    assert all(w.grad is None for w in weights)
    assert torch.equal(weights[0].detach(), torch.ones(3))
    weights[0].grad, weights[1].grad = torch.ones(3), torch.ones(2)
    stepped, norm = clip_and_step(weights, optimizer, None, grad_clip)
    assert stepped and (norm == pytest.approx(5**0.5) if grad_clip else norm == 0.0)
    assert not torch.equal(weights[0].detach(), torch.ones(3))
