"""Pieces of the trainer loop: micro-batching, scoring, eval decoding, stops, model specs."""

from __future__ import annotations

import copy
import sys
import time
from collections import Counter

import pytest
import torch
from agentrl.assembly.models import hardware_notes, model_spec
from agentrl.assembly.settings import config_sections
from agentrl.config import resolve
from agentrl.models.tiny import build_model
from agentrl.rl.kl_control import BetaConfig, BetaController
from agentrl.rl.optim import OptimConfig, Optimization
from agentrl.rollout import EpisodeConfig, SamplingParams, Trajectory
from agentrl.training.evaluation import eval_episode_config
from agentrl.training.scoring import score_trajectories
from agentrl.training.signals import StopRequest
from agentrl.training.step import StepSettings, host_floats, row_chunks, train_on_groups

from tests.fakes.models import SMALL_SPEC, cpu_models, rolled_out_batch


@pytest.fixture(scope="module")
def tiny(small_tokenizer):
    return build_model(SMALL_SPEC, len(small_tokenizer)), small_tokenizer


def test_row_chunks_group_similar_lengths_and_cover_every_row_once():
    lens = torch.tensor([5, 50, 7, 48, 6, 49])
    chunks = row_chunks(lens, 2)
    assert [lens[c].tolist() for c in chunks] == [[50, 49], [48, 7], [6, 5]]
    assert [c.tolist() for c in row_chunks(lens, 0)] == [list(range(6))]


def _prepared_step(tiny, micro: int, beta: float = 0.03, **options):
    """A rolled-out batch on a tiny model, and a call that trains one step on it.

    With ``beta`` 0 the models are laid out as `reference_model` does with the KL off:
    the policy stands in for the reference.
    """
    model, tokenizer = tiny
    overrides = {"bc_coef": 0.0, "loss_reduction": "token", "beta": beta, **options}
    config = resolve(preset="compat", overrides=overrides)
    loss, advantage, bc = config_sections(config)
    groups = rolled_out_batch(model, tokenizer, prompts=6, num_generations=3, max_new_tokens=10)
    models = cpu_models(model, tokenizer)
    if beta == 0:
        models.reference = models.policy
    settings = StepSettings(
        loss,
        advantage,
        bc,
        config.reward,
        num_generations=3,
        max_total_len=512,
        strict_group_packing=True,
        stale_discount=0.65,
        micro_batch_size=micro,
    )
    # Two-step accumulation: the gradient stays in .grad, where it can be compared
    # exactly (after an Adam step, float noise in near-zero coordinates is amplified).
    opt = Optimization(models.policy, OptimConfig(accumulation_steps=2), 4)

    control = BetaController(BetaConfig(beta=beta, beta_auto_tune=beta > 0))

    def step():
        out = train_on_groups(
            groups,
            step=1,
            current_version=0,
            reward_baseline=0.0,
            settings=settings,
            models=models,
            optimization=opt,
            beta=control,
        )
        return out, models

    return step


@pytest.mark.slow
def test_micro_batches_give_the_full_batch_update(tiny):
    results = []
    for micro in (0, 2):
        out, models = _prepared_step(tiny, micro)()
        assert out.report is not None and out.report.skipped is None
        grads = {n: p.grad.clone() for n, p in models.policy.named_parameters()}
        results.append((out.metrics, grads))
    (whole, g_whole), (micro, g_micro) = results
    assert micro["loss/total"] == pytest.approx(whole["loss/total"], rel=1e-5, abs=1e-7)
    assert micro["reward/mean"] == whole["reward/mean"]
    scale = max(float(g.abs().max()) for g in g_whole.values())
    for key in g_whole:
        torch.testing.assert_close(g_micro[key], g_whole[key], rtol=1e-4, atol=1e-6 * scale)


@pytest.mark.parametrize("beta", [0.0, 0.03])
def test_no_reference_forward_when_the_kl_penalty_is_off(tiny, beta):
    """With beta 0 each micro-batch runs one decoder forward (the policy's); with a KL
    penalty a second one, the reference's."""
    step = _prepared_step(tiny, 2, beta=beta)
    calls: Counter[str] = Counter()
    decoder = type(tiny[0].model)
    original = decoder.forward

    def counted(self, *args, **kwargs):
        calls["grad" if torch.is_grad_enabled() else "no_grad"] += 1
        return original(self, *args, **kwargs)

    decoder.forward = counted
    try:
        out, _ = step()
    finally:
        decoder.forward = original
    assert out.report is not None and out.report.skipped is None
    # 6 rows, 2 per micro-batch; without a KL term the rows of zero advantage are skipped.
    idle = out.metrics["train/idle_rows"]
    assert idle == 0 if beta else 0 <= idle <= 5
    assert calls["grad"] == -(-(6 - idle) // 2)
    assert calls["no_grad"] == (0 if beta == 0 else 3)


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_rows_without_advantage_are_skipped_and_the_update_is_the_same(tiny, monkeypatch, level):
    """With no KL term, a row whose advantage is zero adds nothing to the gradient of an
    advantage-weighted objective: training leaves it out, and the gradient is the same."""
    import agentrl.training.step as step_module

    real = step_module.compute_advantages

    def some_zero(*args, **kwargs):
        advantages, metrics = real(*args, **kwargs)
        fixed = torch.linspace(-1.0, 1.0, advantages.numel())  # none of them zero
        fixed[[0, 3]] = 0.0
        return fixed.to(advantages), metrics

    monkeypatch.setattr(step_module, "compute_advantages", some_zero)
    decoder = type(tiny[0].model)
    original = decoder.forward
    results = []
    for skip in (True, False):
        if not skip:
            monkeypatch.setattr(step_module, "advantage_weighted", lambda level: False)
        calls: Counter[str] = Counter()

        def counted(self, *args, calls=calls, **kwargs):
            calls["forward"] += torch.is_grad_enabled()  # training's, not the rollout's
            return original(self, *args, **kwargs)

        monkeypatch.setattr(decoder, "forward", counted)
        out, models = _prepared_step(tiny, 1, beta=0.0, importance_sampling_level=level)()
        monkeypatch.setattr(decoder, "forward", original)
        assert out.report is not None and out.report.skipped is None
        grads = {n: p.grad.clone() for n, p in models.policy.named_parameters()}
        results.append((out, grads, calls["forward"]))
    (skipped, g_skipped, n_skipped), (whole, g_whole, n_whole) = results
    assert (n_skipped, n_whole) == (4, 6)  # one row per micro-batch
    assert skipped.metrics["train/idle_rows"] == 2.0 and whole.metrics["train/idle_rows"] == 0
    assert skipped.tokens.seen.tolist() == [False, True, True, False, True, True]
    assert skipped.metrics["loss/total"] == pytest.approx(whole.metrics["loss/total"], abs=1e-7)
    scale = max(float(g.abs().max()) for g in g_whole.values())
    assert scale > 0
    for key in g_whole:
        torch.testing.assert_close(g_skipped[key], g_whole[key], rtol=1e-5, atol=1e-7 * scale)


def test_every_row_runs_with_a_kl_term_or_an_objective_not_weighted_by_the_advantage():
    from agentrl.rl.losses import advantage_weighted, register_objective
    from agentrl.rl.losses.objectives import OBJECTIVE_BY_LEVEL, OBJECTIVES, ppo_clip
    from agentrl.training.minibatch import gradient_rows

    advantages = torch.tensor([0.0, 1.0, 0.0, -1.0])
    mask = torch.ones(4, 3)
    assert gradient_rows(advantages, mask, skippable=True).tolist() == [1, 3]
    assert gradient_rows(advantages, mask, skippable=False).tolist() == [0, 1, 2, 3]
    assert gradient_rows(torch.zeros(4), mask, skippable=True).tolist() == [0]
    per_token = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 0.5], [2.0, 0.0, 0.0], [0.0] * 3])
    mask[1, 2] = 0  # row 1's only nonzero advantage is on an untrained token
    assert gradient_rows(per_token, mask, skippable=True).tolist() == [2]
    assert advantage_weighted("token") and advantage_weighted("sequence")
    try:
        register_objective("mine", level="mine")(ppo_clip)  # not declared weighted
        assert not advantage_weighted("mine")
    finally:
        OBJECTIVES.pop("mine"), OBJECTIVE_BY_LEVEL.pop("mine")


_HOST_READS = ("item", "tolist", "__float__", "__int__", "__bool__", "__index__")


# Reads only a CPU tensor ever gets (it answers False elsewhere without reading), so
# never a device stall: not counted.
_CPU_ONLY_READERS = ("all_in_range",)


def _count_host_reads(monkeypatch, run):
    """Run ``run()`` counting tensor-to-host reads made by agentrl code, by file."""
    counts: Counter[str] = Counter()
    for name in _HOST_READS:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, **kwargs):
            code = sys._getframe(1).f_code
            caller = code.co_filename
            if (
                "agentrl" in caller
                and "site-packages" not in caller
                and code.co_name not in _CPU_ONLY_READERS
            ):
                counts[caller.split("agentrl")[-1]] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    try:
        out = run()
    finally:
        monkeypatch.undo()
    return out, counts


@pytest.mark.slow
def test_a_step_reads_its_metrics_on_the_host_once(tiny, monkeypatch):
    """Loss metrics stay tensors until one conversion per step (``host_floats``).

    Before, every micro-batch read about 28 values on the host (a device stall each on
    an accelerator). What remains per micro-batch: the optimizer's finite-loss check and
    the slice width, read from a host copy of the row lengths.
    """
    single, one = _count_host_reads(monkeypatch, _prepared_step(tiny, 0))
    split, three = _count_host_reads(monkeypatch, _prepared_step(tiny, 2))
    assert single[0].metrics["pack/rows"] == 6.0  # 6 rows: 1 micro-batch, then 3
    for files in (one, three):
        assert not [f for f in files if "/rl/losses/" in f or f.endswith("forward.py")], files
    per_extra_micro_batch = (sum(three.values()) - sum(one.values())) / 2
    assert per_extra_micro_batch <= 2, (one, three)
    assert sum(one.values()) <= 20, one
    assert split[0].metrics["loss/total"] == pytest.approx(
        single[0].metrics["loss/total"], rel=1e-5, abs=1e-7
    )


def test_host_floats_converts_tensors_and_keeps_floats():
    out = host_floats({"a": torch.tensor(0.5), "b": 2.0, "c": torch.tensor([3], dtype=torch.long)})
    assert out == {"a": 0.5, "b": 2.0, "c": 3.0}
    assert all(type(v) is float for v in out.values())


def test_scores_carry_the_reward_detail_columns():
    traj = Trajectory(
        prompt="",
        messages=[{"role": "user", "content": "What is 2+3?"}],
        tools=None,
        gt=["5"],
        completion='<tool_call>{"name": "calculate_math", "arguments": '
        '{"expression": "2+3"}}</tool_call>\n<answer>5</answer>',
        context="",
        prompt_ids=[1],
        tool_events=[
            {
                "ok": True,
                "name": "calculate_math",
                "args": {"expression": "2+3"},
                "result": {"value": 5.0, "result": "5"},
                "canonical": True,
            }
        ],
    )
    wrong = copy.deepcopy(traj)
    wrong.completion = "<answer>6</answer>"
    wrong.tool_events = []
    scores = score_trajectories([traj, wrong], resolve(preset="compat").reward, step=1000)
    assert scores.details[0]["exact_match"] == 1.0 and scores.details[1]["exact_match"] == 0.0
    assert scores.rewards[0] > scores.rewards[1]
    assert scores.means["exact_match"] == 0.5


def test_eval_decoding_is_greedy_with_the_eval_length():
    base = EpisodeConfig(
        max_new_tokens=192, thinking_ratio=0.5, sampling=SamplingParams.compat_defaults()
    )
    cfg = eval_episode_config(base, temperature=0.0, max_gen_len=64)
    assert cfg.sampling.is_greedy and cfg.max_new_tokens == 64 and cfg.thinking_ratio == 0.0
    assert eval_episode_config(base, 0.0, 0).max_new_tokens == 192  # 0: the rollout length


def test_time_limit_requests_a_stop():
    stop = StopRequest(max_time=0.01, log=lambda _: None)
    time.sleep(0.02)
    assert stop.requested and "time limit" in (stop.reason or "")
    assert not StopRequest(log=lambda _: None).requested


def test_model_spec_follows_the_checkpoint_naming_unless_given():
    assert model_spec(resolve(preset="compat")) == "../out/full_sft_768.pth"
    moe = resolve(preset="compat", overrides={"use_moe": 1, "from_weight": "rl"})
    assert model_spec(moe) == "../out/rl_768_moe.pth"
    assert model_spec(resolve(preset="compat", overrides={"model": "tiny"})) == "tiny"


def test_options_for_missing_hardware_are_accepted_with_a_note():
    config = resolve(preset="compat", overrides={"device": "cuda:3", "rollout_engine": "vllm"})
    notes = hardware_notes(config)
    assert any("no CUDA device" in n for n in notes) != torch.cuda.is_available()
    quiet = {"device": "cpu", "num_threads": 1}
    assert hardware_notes(resolve(preset="compat", overrides=quiet)) == []


def test_a_rollout_thread_beside_training_on_a_shared_cpu_is_named(monkeypatch):
    from agentrl.assembly import models as setup

    monkeypatch.setattr(setup, "usable_cores", lambda: 2)
    both = {"device": "cpu", "async_workers": 1, "num_threads": 2}
    notes = hardware_notes(resolve(preset="compat", overrides=both))
    assert len(notes) == 1 and "--async_workers 0" in notes[0] and "2 torch threads" in notes[0]
    for fix in ({"async_workers": 0}, {"num_threads": 1}, {"rollout_engine": "vllm"}):
        assert hardware_notes(resolve(preset="compat", overrides={**both, **fix})) == []
    # Under torchrun's trainer/rollout split rank 0 only trains, the others only roll out.
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    split = {**both, "multi_gpu_mode": "trainer_rollout"}
    assert hardware_notes(resolve(preset="compat", overrides=split)) == []
    assert (
        len(hardware_notes(resolve(preset="compat", overrides={**split, "multi_gpu_mode": "ddp"})))
        == 1
    )


def test_masked_forward_matches_full_logits_with_the_same_gradient(tiny):
    from types import SimpleNamespace

    from agentrl.rl.logprobs import token_logps
    from agentrl.training.forward import masked_logps, split_output_layer

    model, _ = tiny
    model = copy.deepcopy(model).train()
    assert split_output_layer(model) is not None
    ids = torch.randint(3, 200, (3, 12))
    attn = torch.ones_like(ids)
    attn[2, 9:] = 0
    mask = torch.zeros(3, 11)
    mask[0, 4:] = 1
    mask[1, 2:7] = 1
    mask[2, 5:8] = 1
    # Every position's logits, normalised over the whole vocabulary: what the split path
    # (hidden states of the trained positions only) must equal.
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1]
    logps, entropy = token_logps(
        logits.reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1), with_entropy=True
    )
    full = SimpleNamespace(logps=logps.view(3, 11), entropy=entropy.view(3, 11))
    part = masked_logps(model, ids, attn, mask, with_entropy=True)
    torch.testing.assert_close(part.logps * mask, full.logps * mask, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(part.entropy * mask, full.entropy * mask, rtol=1e-5, atol=1e-6)
    assert bool((part.logps[mask == 0] == 0).all())
    grads = []
    for out in (full, part):
        model.zero_grad()
        (out.logps * mask).sum().backward(retain_graph=True)
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], rtol=1e-4, atol=1e-6)


def test_summary_line_reports_rl_time_apart_from_the_warm_start():
    from pathlib import Path

    from agentrl.commands.train import summary_line
    from agentrl.trainer import TrainResult

    before = {"eval/exact_match": 0.795, "eval/tasks": 200.0, "eval/tool_success_rate": 0.951}
    after = {"eval/exact_match": 0.8, "eval/tasks": 200.0, "eval/tool_success_rate": 0.953}
    evals = (before, after)
    result = TrainResult(Path("runs/x"), 300, 300, None, 624.0, *evals, warm_start_seconds=438.0)
    line = summary_line(result)
    assert line.startswith("finished: 300/300 steps in 3.1 min (after a 7.3 min warm start")
    assert "79.5% -> 80.0% on 200 tasks" in line and "95.1% -> 95.3%" in line
    result.warm_start_seconds, result.stopped = 0.0, "SIGINT"
    line = summary_line(result)
    assert line.startswith("stopped early (SIGINT): 300/300 steps in 10.4 min;")
    assert "warm start" not in line
