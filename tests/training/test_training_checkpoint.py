"""Run checkpoints: atomic under a crash, keep-last-N, NaN weights refused, exact resume."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from agentrl.errors import SaveError
from agentrl.rl.losses import LossConfig, policy_loss
from agentrl.rl.optim import OptimConfig, Optimization
from agentrl.training import checkpoint as ckpt
from agentrl.training.checkpoint import (
    ResumeState,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
)


def _model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def test_round_trip_restores_weights_optimizer_counters_and_rng(tmp_path: Path) -> None:
    model = _model()
    opt = Optimization(model, OptimConfig(learning_rate=1e-2, accumulation_steps=1), 10)
    opt.begin()
    opt.backward(model(torch.ones(2, 4)).pow(2).sum())
    opt.finish()
    resume = ResumeState(
        step=7,
        opt_step=1,
        policy_version=3,
        reward_baseline=1.25,
        beta=0.042,
        beta_ema=0.07,
        extra={"data_pos": 11},
    )
    random.seed(5)
    np.random.seed(5)
    torch.manual_seed(5)
    path = save_checkpoint(tmp_path, model, resume, opt.state_dict())
    assert path == tmp_path / "step-0000007"
    after_save = (random.random(), float(np.random.rand()), float(torch.rand(1)))

    fresh = _model(seed=1)
    fresh_opt = Optimization(fresh, OptimConfig(learning_rate=1e-2, accumulation_steps=1), 10)
    loaded = load_checkpoint(path, fresh)
    fresh_opt.load_state_dict(loaded.optimization)
    restore_rng_state(loaded.rng)
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == after_save
    assert loaded.resume == resume
    for (k, a), b in zip(model.state_dict().items(), fresh.state_dict().values(), strict=True):
        assert torch.equal(a, b), k
    assert fresh_opt.opt_step == 1
    assert fresh_opt.scheduler.state_dict() == opt.scheduler.state_dict()
    sa, sb = opt.optimizer.state_dict()["state"], fresh_opt.optimizer.state_dict()["state"]
    assert all(torch.equal(sa[i]["exp_avg"], sb[i]["exp_avg"]) for i in sa)


def test_crash_mid_write_leaves_the_previous_checkpoint_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _model()
    first = save_checkpoint(tmp_path, model, ResumeState(step=1))
    real_save = ckpt._durable_save

    def crash_on_state(obj, path: Path) -> None:
        if path.name == ckpt.STATE_FILE:
            path.write_bytes(b"half a pickle")
            raise OSError("disk full")
        real_save(obj, path)

    monkeypatch.setattr(ckpt, "_durable_save", crash_on_state)
    with torch.no_grad():
        model[0].weight.add_(1.0)
    with pytest.raises(SaveError, match=r"cannot save .*step-0000002: disk full"):
        save_checkpoint(tmp_path, model, ResumeState(step=2))
    assert list_checkpoints(tmp_path) == [first]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-0000001"]
    restored = _model(seed=3)
    assert load_checkpoint(first, restored).resume.step == 1
    assert torch.equal(restored[0].weight, _model()[0].weight)


def test_a_killed_writer_leaves_only_an_ignored_temp_dir(tmp_path: Path) -> None:
    model = _model()
    save_checkpoint(tmp_path, model, ResumeState(step=1))
    # What a SIGKILL between the two files leaves behind: a temp dir with one file.
    orphan = tmp_path / ".tmp-step-0000002-99999"
    orphan.mkdir()
    (orphan / ckpt.MODEL_FILE).write_bytes(b"partial")
    # A step dir missing its state file is not a checkpoint either.
    (tmp_path / "step-0000003").mkdir()
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-0000001"]
    save_checkpoint(tmp_path, model, ResumeState(step=4))
    assert not orphan.exists()
    assert latest_checkpoint(tmp_path) == tmp_path / "step-0000004"


def test_keep_last_n(tmp_path: Path) -> None:
    model = _model()
    for step in range(1, 6):
        save_checkpoint(tmp_path, model, ResumeState(step=step), keep_last=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-0000004", "step-0000005"]


def test_resaving_a_step_replaces_it(tmp_path: Path) -> None:
    model = _model()
    save_checkpoint(tmp_path, model, ResumeState(step=2, beta=0.1))
    save_checkpoint(tmp_path, model, ResumeState(step=2, beta=0.2))
    assert load_checkpoint(tmp_path / "step-0000002", _model()).resume.beta == 0.2
    assert [p.name for p in tmp_path.iterdir()] == ["step-0000002"]


def test_non_finite_weights_are_never_saved(tmp_path: Path) -> None:
    model = _model()
    with torch.no_grad():
        model[2].bias[1] = float("nan")
    assert save_checkpoint(tmp_path, model, ResumeState(step=1)) is None
    assert list(tmp_path.iterdir()) == []


# ---------------- a stopped-and-resumed run continues exactly ----------------


def _train_step(model, opt: Optimization, config: LossConfig) -> float:
    """One RL-shaped step on random data drawn from the global RNGs."""
    x = torch.randn(4, 4)
    logps = torch.log_softmax(model(x), dim=-1)
    actions = torch.randint(0, 3, (4,))
    taken = logps.gather(1, actions[:, None])  # [4, 1]: one "token" per row
    behavior = (taken.detach() + 0.1 * torch.randn(4, 1)).clamp(max=0)
    adv = torch.tensor([random.gauss(0, 1) for _ in range(4)])
    res = policy_loss(taken, behavior, adv, torch.ones(4, 1), config)
    opt.begin()
    opt.backward(res.loss)
    opt.finish()
    return float(res.loss.detach())


def test_stop_after_step_k_and_resume_reproduces_step_k_plus_1(tmp_path: Path) -> None:
    cfg = OptimConfig(learning_rate=1e-2, accumulation_steps=2, grad_clip=1.0)
    loss_cfg = LossConfig(loss_reduction="token", use_decoupled_ppo=False)

    def fresh():
        model = _model()
        return model, Optimization(model, cfg, total_steps=8)

    random.seed(0)
    torch.manual_seed(0)
    model, opt = fresh()
    straight = [_train_step(model, opt, loss_cfg) for _ in range(4)]
    straight_params = [p.detach().clone() for p in model.parameters()]

    random.seed(0)
    torch.manual_seed(0)
    model, opt = fresh()
    for _ in range(3):  # stop mid accumulation window
        _train_step(model, opt, loss_cfg)
    path = save_checkpoint(tmp_path, model, ResumeState(step=3), opt.state_dict())
    random.seed(123)  # the interrupted process's RNG goes elsewhere
    torch.manual_seed(123)

    model, opt = fresh()
    loaded = load_checkpoint(path, model)
    opt.load_state_dict(loaded.optimization)
    restore_rng_state(loaded.rng)
    assert _train_step(model, opt, loss_cfg) == straight[3]
    # step 4 closes the accumulation window: the update used step 3's saved gradient too
    assert opt.opt_step == 2
    for p, q in zip(model.parameters(), straight_params, strict=True):
        assert torch.equal(p, q)


# ---------------- export ----------------


def _tiny_qwen3():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
    )
    return Qwen3ForCausalLM(config)


def test_export_writes_an_hf_directory_atomically(tmp_path: Path) -> None:
    from transformers import Qwen3ForCausalLM

    model = _tiny_qwen3()
    out = ckpt.export_policy(model, None, tmp_path / "policy")
    assert (out / "config.json").is_file()
    ckpt.export_policy(model, None, tmp_path / "policy")  # replacing an export is fine
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy"]
    again = Qwen3ForCausalLM.from_pretrained(str(out))
    for (k, a), b in zip(model.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), k


def test_export_of_a_minimind_policy_is_a_pth_and_nan_weights_are_refused(tmp_path: Path) -> None:
    model = _tiny_qwen3()
    model.config.agentrl_origin = "minimind"
    out = ckpt.export_policy(model, None, tmp_path / "policy.pth")
    sd = torch.load(out, weights_only=True)
    assert sd["lm_head.weight"].dtype == torch.float16
    with torch.no_grad():
        model.lm_head.weight[0, 0] = float("inf")
    with pytest.raises(ValueError, match="NaN or inf"):
        ckpt.export_policy(model, None, tmp_path / "bad", fmt="hf")
