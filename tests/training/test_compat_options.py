"""Reference behaviours offered behind options (docs/compat.md): one rollout thread for
the torch engine under ddp, separate reference weights, lenient prompt loading, a partial
accumulation window applied at the end, the completion length as a generation budget, the
turn's end token trained on, the reference's .pth at each save, and the step report's
cumulative trained tokens and reward spread; and two differences compat.md states (GRPO
advantages clipped, prompts passed to reward functions as messages)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from types import SimpleNamespace

import pytest
import torch
from agentrl.assembly.models import load_models
from agentrl.assembly.prompts import load_prompts
from agentrl.assembly.task import build_tools, episode_config
from agentrl.commands.eval import EVAL_OPTIONS
from agentrl.config import add_config_arguments, config_from_args, resolve
from agentrl.errors import UsageError
from agentrl.models import load_policy
from agentrl.models.tiny import build_model, save_preset
from agentrl.observability import read_metrics
from agentrl.placement.adapters import adapter_for
from agentrl.placement.base import RolloutSetup
from agentrl.placement.ddp import one_torch_worker
from agentrl.rl.advantages import AdvantageConfig, compute_advantages
from agentrl.rl.optim import OptimConfig, Optimization
from agentrl.rollout.episodes import run_episodes
from agentrl.tools import builtin_registry
from agentrl.trainer import Trainer
from agentrl.training.scoring import reward_arguments
from agentrl.training.step_metrics import reward_metrics

from tests.fakes.engines import ScriptedEngine, tool_call
from tests.fakes.models import SMALL_SPEC, small_tokenizer
from tests.fakes.runs import short_run_config
from tests.fakes.trajectories import column_trajectory


def test_torch_engine_under_ddp_rolls_out_with_one_thread_and_says_so() -> None:
    said: list[str] = []

    def setup(**options):
        config = resolve(overrides=options)
        return RolloutSetup(config, None, None, None, None, said.append)  # type: ignore[arg-type]

    clamped = one_torch_worker(setup(async_workers=3))
    assert clamped.config.async_workers == 1
    assert len(said) == 1 and "async_workers 3 -> 1" in said[0] and "warning" in said[0]
    for options in ({"async_workers": 1}, {"async_workers": 3, "rollout_engine": "vllm"}):
        kept = setup(**options)
        assert one_torch_worker(kept) is kept
    assert len(said) == 1


def test_reference_model_path_gives_the_reference_its_own_weights(run_files, tmp_path):
    tokenizer = small_tokenizer()
    other_spec = dataclasses.replace(SMALL_SPEC, seed=SMALL_SPEC.seed + 1)
    save_preset(build_model(other_spec, len(tokenizer)), tokenizer, tmp_path / "other")
    config = short_run_config(
        run_files, tmp_path, "refpath", reference_model_path=str(tmp_path / "other")
    )
    models = load_models(config, print)
    other, _ = load_policy(str(tmp_path / "other"), "float32", "cpu")
    theirs, ours = other.state_dict(), models.reference.state_dict()
    assert all(torch.equal(theirs[k], ours[k]) for k in theirs)
    policy = models.policy.state_dict()
    assert any(not torch.equal(policy[k], ours[k]) for k in policy)
    assert not any(p.requires_grad for p in models.reference.parameters())
    plain = load_models(config.replace(reference_model_path=""), print).reference.state_dict()
    assert all(torch.equal(policy[k], plain[k]) for k in policy)
    with pytest.raises(UsageError, match="reference_model_path"):
        adapter_for(config.replace(lora_rank=4))


def test_lenient_prompts_keep_the_lines_strict_loading_skips(run_files, tmp_path):
    record = json.loads((run_files / "prompts.jsonl").read_text("utf-8").splitlines()[0])
    odd = dict(record, messages=[{"role": "narrator", "content": "2+3?"}, 7])
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(record) + "\n" + json.dumps(odd) + "\n", encoding="utf-8")
    kept = {}
    for lenient in (0, 1):
        config = resolve(overrides={"data_path": str(path), "lenient_prompts": lenient})
        train, _ = load_prompts(config, build_tools(config), print)
        kept[lenient] = len(train)
    assert kept == {0: 1, 1: 2}
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, EVAL_OPTIONS)  # `agentrl eval` takes it too
    assert config_from_args(parser.parse_args(["--lenient_prompts", "1"])).lenient_prompts


def _steps(model: torch.nn.Linear, config: OptimConfig, grads: list[float]) -> Optimization:
    optimization = Optimization(model, config, total_steps=len(grads))
    for g in grads:
        optimization.begin()
        optimization.backward((model.weight * g).sum())
        optimization.finish()
    return optimization


def test_a_flushed_partial_window_steps_on_the_mean_of_its_gradients() -> None:
    torch.manual_seed(0)
    a, b = torch.nn.Linear(3, 1, bias=False), torch.nn.Linear(3, 1, bias=False)
    b.load_state_dict(a.state_dict())
    options = dict(learning_rate=0.1, grad_clip=0.0)
    partial = _steps(a, OptimConfig(accumulation_steps=4, **options), [1.0, 3.0])
    assert partial.pending == 2 and partial.opt_step == 0
    report = partial.flush()
    assert report is not None and report.stepped and partial.opt_step == 1
    assert partial.pending == 0 and partial.flush() is None
    whole = _steps(b, OptimConfig(accumulation_steps=2, **options), [1.0, 3.0])
    assert whole.opt_step == 1
    assert torch.allclose(a.weight, b.weight)


@pytest.mark.slow
def test_flush_accumulation_applies_the_last_window_at_the_end_of_the_run(
    run_files, tmp_path, capfd
):
    done = {}
    for flush in (0, 1):
        config = short_run_config(
            run_files,
            tmp_path,
            f"flush{flush}",
            total_steps=1,
            max_gen_len=8,
            accumulation_steps=2,
            flush_accumulation=flush,
        )
        trainer = Trainer(config)
        trainer.run()
        done[flush] = (trainer.optimization.opt_step, trainer.optimization.pending)
    assert done == {0: (0, 1), 1: (1, 0)}
    log = "".join(capfd.readouterr())
    assert "the last 1 step(s)' gradient is not applied" in log
    assert "the last 1 step(s)' gradient applied (flush_accumulation)" in log


def test_max_completion_length_caps_what_an_episode_generates() -> None:
    config = episode_config(resolve(overrides={"max_completion_length": 30, "max_turns": 4}))
    assert config.max_response_tokens == 30
    assert episode_config(resolve()).max_response_tokens == 0
    sample = {"messages": [{"role": "user", "content": "2+3"}], "tools": None, "gt": ["5"]}
    call = tool_call("calculate_math", '{"expression": "2+3"}')
    engine = ScriptedEngine(lambda _turn, _context: call)
    (group,) = run_episodes(engine, [sample], builtin_registry(), config=config)
    (trajectory,) = group.trajectories
    generated = sum(trajectory.response_mask)  # the tool's result may run past it
    assert 0 < generated <= 30 and trajectory.unfinished
    assert len(trajectory.turn_outputs) < 4  # the budget, not max_turns, ended it


def test_the_step_report_has_the_reward_spread() -> None:
    scores = SimpleNamespace(rewards=torch.tensor([1.0, 2.0, 3.0, 4.0]), means={}, functions={})
    metrics = reward_metrics(scores, 0.0)  # type: ignore[arg-type]
    assert metrics["reward/std"] == pytest.approx(1.118034, abs=1e-6)  # population, as there


@pytest.mark.slow
def test_the_step_report_counts_trained_tokens_over_the_run(run_files, tmp_path):
    seen: list[float] = []

    def count(trainer, step, outcome):
        seen.append(float(outcome.batch.loss_mask.sum()))

    config = short_run_config(run_files, tmp_path, "tokens", total_steps=2, max_gen_len=8)
    Trainer(config, callbacks=[count]).run()
    records = [
        r for r in read_metrics(tmp_path / "tokens" / "metrics.jsonl") if r["kind"] == "train"
    ]
    assert [r["train/trained_tokens"] for r in records] == [seen[0], seen[0] + seen[1]]
    assert seen[0] > 0


def test_grpo_advantages_stay_clipped_at_adv_clip_unless_it_is_0() -> None:
    rewards = torch.tensor([10.0] + [0.0] * 15)  # one outlier in a group of 16: (r - mean) / std
    groups = torch.zeros(16, dtype=torch.long)
    clipped, _ = compute_advantages(rewards, groups, AdvantageConfig(advantage_mode="grpo"))
    assert clipped.max().item() == 3.0  # the default adv_clip, as in every advantage mode
    free, _ = compute_advantages(
        rewards, groups, AdvantageConfig(advantage_mode="grpo", adv_clip=0.0)
    )
    assert free.max().item() == pytest.approx(15**0.5, rel=1e-3)  # the GRPO reference's value


def test_keep_eos_trains_on_the_token_that_ended_the_turn() -> None:
    sample = {"messages": [{"role": "user", "content": "2+3"}], "tools": None, "gt": ["5"]}
    ends = {}
    for keep in (0, 1):
        config = episode_config(resolve(overrides={"keep_eos": keep, "max_turns": 1}))
        assert config.keep_eos is bool(keep)
        engine = ScriptedEngine(lambda _turn, _context: "<answer>5</answer>")
        (group,) = run_episodes(engine, [sample], builtin_registry(), config=config)
        (trajectory,) = group.trajectories
        ends[keep] = (trajectory.response_ids[-1], trajectory.response_mask[-1])
    eos = engine.tokenizer.eos_token_id
    assert ends[1] == (eos, 1) and ends[0][0] != eos


@pytest.mark.slow
def test_save_pth_writes_the_weights_where_the_reference_does(run_files, tmp_path):
    config = short_run_config(run_files, tmp_path, "pth", total_steps=1, max_gen_len=8)
    result = Trainer(config.replace(save_pth=1)).run()
    (written,) = tmp_path.glob("*.pth")
    hidden = SMALL_SPEC.hidden_size
    assert written.name == f"pth_{hidden}.pth"  # save_dir/<run name>_<hidden size>.pth
    weights = torch.load(written, weights_only=True)
    saved = torch.load(result.checkpoint / "model.pt", weights_only=True)
    assert {v.dtype for v in weights.values()} == {torch.float16}
    assert all(torch.equal(weights[k], saved[k].half()) for k in saved)
    with pytest.raises(UsageError, match="save_pth"):
        adapter_for(config.replace(save_pth=1, lora_rank=4))


def test_reward_functions_get_each_prompt_as_its_messages() -> None:
    prompts, *_ = reward_arguments([column_trajectory("<answer>5</answer>", {}, ["5"])], None)
    assert prompts == [[{"role": "user", "content": "q"}]]  # not the rendered prompt text "p"
