"""Paths the reference agent trainer has that only a broken run would otherwise show: the
compiled training forward, the reference reloaded from an RL checkpoint, pad falling back
to EOS, out-of-vocabulary prompt ids, the trainer/rollout staleness rule, the initial queue
fill, the trainer/rollout queue size, weight syncs every few optimizer steps, the background
workers' prompt choice, the
NCCL-to-gloo fallback and the reward parser deciding which calls run (docs/compat.md)."""

from __future__ import annotations

import dataclasses
import random
import threading
from collections import deque
from types import SimpleNamespace

import pytest
import torch
from agentrl.assembly import models as models_module
from agentrl.assembly.task import episode_config
from agentrl.config import resolve
from agentrl.observability import read_metrics
from agentrl.placement import runtime
from agentrl.placement.rollout_ranks import GatheredSource
from agentrl.placement.split import split_queue_groups, split_version_gap
from agentrl.rollout.async_rollout import AsyncRollout
from agentrl.rollout.engine import TorchEngine
from agentrl.rollout.episodes import run_episodes
from agentrl.rollout.sampling import SamplingParams
from agentrl.tools import builtin_registry
from agentrl.trainer import Trainer
from agentrl.training.step import pack_batch
from agentrl.trajectory import RolloutGroup

from tests.fakes.engines import ScriptedEngine
from tests.fakes.models import tiny_model, tiny_tokenizer
from tests.fakes.runs import short_run_config
from tests.fakes.trajectories import column_trajectory


def _short(run_files, tmp_path, name: str, **overrides):
    values = dict(total_steps=1, max_gen_len=8)
    return short_run_config(run_files, tmp_path, name, **{**values, **overrides})


def _train_records(run_dir) -> list[dict]:
    return [r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "train"]


@pytest.mark.slow
def test_use_compile_trains_through_the_compiled_policy(run_files, tmp_path, monkeypatch):
    compiled: list[torch.nn.Module] = []

    class Counting(torch.nn.Module):  # stands in for torch.compile's wrapper: no compiler
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner, self.calls = inner, 0

        def forward(self, *args, **kwargs):
            self.calls += 1
            return self.inner(*args, **kwargs)

    def fake_compile(module):
        compiled.append(Counting(module))
        return compiled[-1]

    monkeypatch.setattr(models_module.torch, "compile", fake_compile)
    trainer = Trainer(_short(run_files, tmp_path, "compiled", use_compile=1))
    assert trainer.run().steps_done == 1
    (wrapper,) = compiled
    assert wrapper.inner is trainer.models.policy and trainer.models.forward is wrapper
    assert wrapper.calls > 0  # the training forward went through it


@pytest.mark.slow
def test_ref_from_rl_checkpoint_loads_the_reference_from_the_checkpoint(run_files, tmp_path):
    first = Trainer(_short(run_files, tmp_path, "ref")).run()
    saved = torch.load(first.checkpoint / "model.pt", weights_only=True)
    kept = {}
    for flag in (0, 1):
        trainer = Trainer(
            _short(run_files, tmp_path, "ref", from_resume=1, ref_from_rl_checkpoint=flag)
        )
        trainer.run()
        kept[flag] = trainer.models.reference.state_dict()
    name = next(k for k in saved if k in kept[1] and saved[k].is_floating_point())
    moved = [k for k in saved if k in kept[0] and not torch.equal(saved[k], kept[0][k])]
    assert moved, "one step at lr 1e-3 moved no weight: the test would prove nothing"
    assert all(torch.equal(saved[k], kept[1][k].to(saved[k].dtype)) for k in [*moved, name])


def test_pad_falls_back_to_eos_when_the_tokenizer_has_none() -> None:
    short = column_trajectory("a", {}, [])
    longer = dataclasses.replace(
        short,
        response_ids=[5, 6, 7, 8, 9],
        response_mask=[1, 0, 1, 1, 1],
        response_logps=[-0.1, 0.0, -0.2, -0.3, -0.4],
        response_versions=[0, -1, 0, 0, 0],
    )
    group = RolloutGroup("p", 0, 0, [short, longer], 0.0)
    settings = SimpleNamespace(num_generations=2, max_total_len=64, strict_group_packing=True)
    eos = 2
    padded = {}
    for pad in (None, 0):
        tokenizer = SimpleNamespace(pad_token_id=pad, eos_token_id=eos)
        models = SimpleNamespace(tokenizer=tokenizer, device=torch.device("cpu"))
        batch = pack_batch([group], settings, models)
        outside = batch.attention_mask == 0
        assert int(outside.sum()) == 2  # the shorter row, padded to the longer
        padded[pad] = set(batch.input_ids[outside].tolist())
    assert padded == {None: {eos}, 0: {0}}


def test_out_of_vocabulary_prompt_ids_become_the_fallback_token_and_are_counted() -> None:
    tok = tiny_tokenizer()
    engine = TorchEngine(tiny_model(seed=4), tok, seed=0)
    vocab = engine.model.get_input_embeddings().weight.shape[0]
    prompt = tok("1+1", add_special_tokens=False)["input_ids"]
    params = SamplingParams(greedy=True)
    bad = engine.generate([[*prompt, vocab + 7, -3]], params, max_new_tokens=6)[0]
    assert engine.stats["bad_prompt_ids"] == 2
    fallback = [*prompt, engine.fallback_token_id, engine.fallback_token_id]
    good = engine.generate([fallback], params, max_new_tokens=6)[0]
    assert engine.stats["bad_prompt_ids"] == 2
    assert bad.token_ids == good.token_ids


@pytest.mark.parametrize(
    ("head", "sync", "gap"),
    [(1, 1, 2), (1, 2, 4), (1, 3, 4), (3, 1, 3), (5, 4, 5), (0, 1, 2)],
)
def test_trainer_rollout_gap_is_the_reference_rule(head, sync, gap) -> None:
    config = resolve(overrides={"max_head_offpolicyness": head, "policy_sync_interval": sync})
    assert split_version_gap(config) == gap == max(head, min(max(2, 2 * sync), 4))
    assert split_version_gap(config.replace(max_version_gap=7)) == 7  # set: kept as given


@pytest.mark.parametrize(
    ("batch", "gap", "ranks", "groups"), [(2, 2, 1, 16), (2, 2, 3, 24), (4, 9, 1, 40)]
)
def test_trainer_rollout_queue_holds_the_reference_count(batch, gap, ranks, groups) -> None:
    config = resolve(overrides={"batch_size": batch})
    assert split_queue_groups(config, gap, ranks) == groups
    assert groups == max((gap + 1) * batch, batch * max(8, 4 * ranks))
    assert split_queue_groups(config.replace(max_queue_groups=5), gap, ranks) == 5


def _gathering(pending: int = 0) -> GatheredSource:
    """Rank 0's source of the trainer/rollout split without its process group: what it has
    gathered and what the rollout ranks last reported."""
    source = GatheredSource.__new__(GatheredSource)
    source.pending = deque([object()] * pending)
    source.counters = {"lagging_rounds": 0.0}
    source.remote, source.producers = [], 2
    return source


def test_trainer_rollout_says_when_the_queue_lags_and_reports_its_use() -> None:
    source, said = _gathering(), []
    source.log = said.append
    source._drop_stale = lambda: None
    source._fetch_round = lambda wanted, wait: source.pending.append(object())  # one a round
    assert source._fill(3, 0.0, training=True)
    assert source.counters["lagging_rounds"] == 2  # short after the first and second rounds
    assert len(said) == 1 and "rollout queue lagging behind the trainer" in said[0]
    assert source._fill(5, 0.0) and source.counters["lagging_rounds"] == 2  # the prefill: not
    source = _gathering(pending=2)
    source.remote = [{"queued": 3.0, "queue_capacity": 8.0}, {"queued": 1.0, "queue_capacity": 8.0}]
    assert source.stats()["global_queue_utilization"] == (3 + 1 + 2) / 16


@pytest.mark.slow
def test_prefill_waits_for_the_asked_groups_and_says_when_it_gives_up(
    run_files, tmp_path, monkeypatch, capfd
):
    seen = []
    wait = AsyncRollout.wait_until_ready

    def recording(self, groups, timeout):
        ready = wait(self, groups, timeout)
        seen.append((groups, timeout, ready, self.buffer.qsize()))
        return ready

    monkeypatch.setattr(AsyncRollout, "wait_until_ready", recording)
    background = dict(async_workers=1, max_queue_groups=8)
    config = _short(run_files, tmp_path, "prefill", prefill_queue_groups=3, **background)
    Trainer(config.replace(prefill_timeout_sec=120.0)).run()
    groups, timeout, ready, queued = seen[-1]
    assert (groups, timeout, ready) == (3, 120.0, True) and queued >= 3
    # Asked for more groups than fit in no time: the run says so and goes on.
    late = _short(run_files, tmp_path, "late", prefill_queue_groups=6, **background)
    result = Trainer(late.replace(prefill_timeout_sec=0.0)).run()
    assert seen[-1][:3] == (6, 0.0, False) and result.steps_done == 1
    log = "".join(capfd.readouterr())
    assert "rollout queue not filled to 6 groups in time; going on" in log


@pytest.mark.slow
def test_policy_syncs_every_interval_and_only_a_good_sync_bumps_the_version(
    run_files, tmp_path, monkeypatch, capfd
):
    every_two = _short(run_files, tmp_path, "sync2", total_steps=2, policy_sync_interval=2)
    Trainer(every_two).run()
    versions = [r["policy/version"] for r in _train_records(tmp_path / "sync2")]
    assert versions == [0.0, 1.0]  # no sync after step 1; one after step 2
    # The engine refuses the weights (as it does non-finite ones): the version stays.
    monkeypatch.setattr(TorchEngine, "update_weights", lambda self, *a, **k: False)
    Trainer(_short(run_files, tmp_path, "refused")).run()
    versions = [r["policy/version"] for r in _train_records(tmp_path / "refused")]
    assert versions == [0.0]
    log = "".join(capfd.readouterr())
    assert log.count("policy sync skipped: the trained weights are not finite") == 1


class _Scripted(random.Random):
    """random() from a list; randrange always 7."""

    def __init__(self, draws):
        super().__init__(0)
        self.draws = iter(draws)

    def random(self):
        return next(self.draws)

    def randrange(self, *args, **kwargs):
        return 7


def test_background_workers_take_prompts_half_in_order_half_at_random() -> None:
    state = SimpleNamespace(_index_lock=threading.Lock(), _next_index=0, dataset=list(range(10)))
    scripted = _Scripted([0.1, 0.9, 0.4, 0.5, 0.2])
    picks = [AsyncRollout._next_sample(state, scripted) for _ in range(5)]
    assert picks == [0, 7, 1, 7, 2]  # below 0.5: the next in order; else a random one
    rng = random.Random(11)
    state._next_index = 0
    picks = [AsyncRollout._next_sample(state, rng) for _ in range(4000)]
    in_order = state._next_index
    assert 0.45 < in_order / 4000 < 0.55
    assert set(picks) == set(range(10))


def test_nccl_that_cannot_start_falls_back_to_gloo(monkeypatch, tmp_path):
    for name, value in dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0").items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(29500 + random.Random().randrange(2000)))
    monkeypatch.setattr(runtime.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(runtime.torch.cuda, "set_device", lambda device: None)
    real = runtime.dist.init_process_group
    tried = []

    def init(backend, **kwargs):
        tried.append(backend)
        if backend == "nccl":
            raise RuntimeError("NCCL error: no usable device (injected)")
        return real(backend=backend, **kwargs)

    monkeypatch.setattr(runtime.dist, "init_process_group", init)
    said = []
    ctx = runtime.init_distributed("auto", 30.0, said.append, one_rank_too=True)
    try:
        assert tried == ["nccl", "gloo"] and ctx is not None and ctx.backend == "gloo"
        assert len(said) == 1 and "fell back" in said[0] and "injected" in said[0]
    finally:
        runtime.shutdown(ctx)


def test_call_parser_reward_runs_only_the_calls_the_reward_counts() -> None:
    fenced = '```json\n{"name": "calculate_math", "arguments": {"expression": "2+3"}}\n```'
    sample = {"messages": [{"role": "user", "content": "2+3"}], "tools": None, "gt": ["5"]}
    config = episode_config(resolve(overrides={"max_turns": 2, "call_parser": "reward"}))
    assert config.call_parser == "reward" and episode_config(resolve()).call_parser == "lenient"
    ran = {}
    for parser in ("lenient", "reward"):
        engine = ScriptedEngine(lambda turn, _c: fenced if turn == 0 else "<answer>5</answer>")
        config = episode_config(resolve(overrides={"max_turns": 2, "call_parser": parser}))
        (group,) = run_episodes(engine, [sample], builtin_registry(), config=config)
        ran[parser] = [len(t.tool_events) for t in group.trajectories]
    assert ran == {"lenient": [1], "reward": [0]}
