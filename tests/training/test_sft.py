"""Supervised warm start: loss masks, batching, the loop, checkpoints, greedy tool eval."""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
from pathlib import Path

import pytest
import torch
from agentrl.chat import apply_chat_template
from agentrl.models import load_policy
from agentrl.models.tiny import build_model
from agentrl.rollout.engine import Generation
from agentrl.sft import checkpoint as ckpt
from agentrl.sft.data import (
    Conversation,
    LoadStats,
    assistant_spans,
    bucketed_batches,
    build_examples,
    collate,
    read_conversations,
)
from agentrl.sft.pipeline import SFTRunOptions
from agentrl.sft.tasks import generated_demos, generated_heldout, tool_env
from agentrl.sft.train import SFTConfig, SFTResult, lr_factor, masked_loss_sum, train_sft

from tests.fakes.models import SMALL_SPEC

SPEC = SMALL_SPEC


@pytest.fixture(scope="module")
def tok(small_tokenizer):
    return small_tokenizer


@pytest.fixture(scope="module")
def env(tok):
    return tool_env(tok)


@pytest.fixture(scope="module")
def demos():
    return generated_demos(48, seed=5)


def _quiet(_: str) -> None:
    return None


# ---- masks ----


def test_mask_covers_exactly_the_assistant_turns(tok, env):
    calls = [{"name": "calculate_math", "arguments": {"expression": "12*3"}}]
    conv = Conversation(
        [
            {"role": "system", "content": "Use tools."},
            {"role": "user", "content": "Compute 12*3."},
            {"role": "assistant", "content": "", "tool_calls": calls},
            {"role": "tool", "content": '{"value":36.0,"result":"36"}'},
            {"role": "assistant", "content": "<answer>36</answer>"},
        ]
    )
    (example,) = build_examples([conv], tok, env.render, max_len=512)
    runs, current = [], []
    for token, flag in zip(example.input_ids, example.loss_mask, strict=True):
        if flag:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    decoded = [tok.decode(r) for r in runs]
    assert decoded == [
        '<tool_call>\n{"name": "calculate_math", "arguments": {"expression": "12*3"}}\n'
        "</tool_call><|im_end|>",
        "<answer>36</answer><|im_end|>",
    ]
    # Everything else (prompt, generation prompts, tool response) is context only.
    full = tok.decode(example.input_ids)
    assert full == env.render(conv.messages, None, False)


def test_piecewise_tokens_match_what_generation_sees(tok, env, demos):
    conv = demos[0]
    (example,) = build_examples([conv], tok, env.render, max_len=1024)
    first = example.loss_mask.index(1)
    prompt = env.render(conv.messages[:2], conv.tools, True)
    assert example.input_ids[:first] == tok(prompt, add_special_tokens=False)["input_ids"]


def test_fast_renderer_matches_the_jinja_template(tok, env, demos):
    for conv in demos[:10]:
        for cut in range(1, len(conv.messages) + 1):
            for generation in (False, True):
                jinja = apply_chat_template(tok, conv.messages[:cut], conv.tools, generation)
                assert env.render(conv.messages[:cut], conv.tools, generation) == jinja


def test_template_that_rewrites_history_gives_one_example_per_turn(tok):
    def forgetful(messages, tools, generation):
        # Like Qwen3's template: assistant turns before the last user turn lose their
        # content, so the full conversation no longer extends each turn's prefix.
        last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
        kept = [
            {**m, "content": "..."} if m["role"] == "assistant" and i < last_user else m
            for i, m in enumerate(messages)
        ]
        return apply_chat_template(tok, kept, tools, add_generation_prompt=generation)

    conv = Conversation(
        [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "first"},
            {"role": "user", "content": "b"},
            {"role": "assistant", "content": "second"},
        ]
    )
    pieces = assistant_spans(conv, forgetful, tok.eos_token)
    assert len(pieces) == 2
    assert [text[s:e] for text, ((s, e),) in pieces] == ["first<|im_end|>", "second<|im_end|>"]


def test_bad_demonstration_lines_are_counted_by_reason(tmp_path):
    good = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}
    lines = [
        json.dumps(good),
        "{broken",
        json.dumps([1, 2]),
        json.dumps({"messages": []}),
        json.dumps({"messages": [{"role": "user", "content": "only a prompt"}]}),
        json.dumps({"messages": [{"role": "wizard", "content": "x"}]}),
        json.dumps({**good, "tools": "{not json"}),
    ]
    path = tmp_path / "demos.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    stats = LoadStats()
    convs = read_conversations([path], stats)
    assert len(convs) == 1 and convs[0].messages[1] == {"role": "assistant", "content": "yo"}
    assert stats.loaded == 7 and stats.kept == 1
    assert dict(stats.dropped) == {
        "bad_json": 1,
        "not_an_object": 1,
        "no_messages": 1,
        "no_assistant_turn": 1,
        "unknown_role": 1,
        "bad_tools": 1,
    }


def test_too_long_examples_are_dropped_and_counted(tok, env, demos):
    stats = LoadStats()
    kept = build_examples(demos[:5], tok, env.render, max_len=40, stats=stats)
    assert kept == [] and stats.dropped["too_long"] == 5


# ---- batching ----


def test_buckets_respect_the_token_budget_and_cover_every_example():
    lengths = [5, 50, 7, 48, 6, 49, 30, 31] * 5
    batches = bucketed_batches(lengths, batch_tokens=100, max_batch=4, seed=3)
    seen = sorted(i for b in batches for i in b)
    assert seen == list(range(len(lengths)))
    for b in batches:
        assert len(b) <= 4
        assert len(b) == 1 or max(lengths[i] for i in b) * len(b) <= 100
    assert batches == bucketed_batches(lengths, batch_tokens=100, max_batch=4, seed=3)
    assert batches != bucketed_batches(lengths, batch_tokens=100, max_batch=4, seed=4)


def test_ungrouped_batches_carry_the_data_mix():
    # Short and long examples stand for demonstrations without and with tool calls: grouped
    # by length, a batch holds one kind only; drawn at random, most batches hold both.
    lengths = [10, 40] * 64
    short = {i for i, n in enumerate(lengths) if n == 10}

    def mixed(batches: list[list[int]]) -> int:
        return sum(0 < len(short & set(b)) < len(b) for b in batches)

    grouped = bucketed_batches(lengths, batch_tokens=320, max_batch=8, seed=0)
    drawn = bucketed_batches(lengths, batch_tokens=320, max_batch=8, seed=0, group_by_length=False)
    assert sorted(i for b in drawn for i in b) == list(range(len(lengths)))
    assert all(max(lengths[i] for i in b) * len(b) <= 320 for b in drawn)
    assert mixed(grouped) <= 1
    assert mixed(drawn) >= len(drawn) * 3 // 4
    assert drawn == bucketed_batches(
        lengths, batch_tokens=320, max_batch=8, seed=0, group_by_length=False
    )


def test_collate_pads_without_loss(tok, env, demos):
    examples = build_examples(demos[:3], tok, env.render, max_len=1024)
    batch = collate(examples, pad_id=0)
    for row, ex in enumerate(examples):
        n = len(ex)
        assert batch["attention_mask"][row, n:].sum() == 0
        assert batch["loss_mask"][row, n:].sum() == 0
        assert batch["loss_mask"][row, :n].tolist() == ex.loss_mask


def test_loss_counts_only_masked_next_tokens(tok, env, demos):
    torch.manual_seed(0)
    model = build_model(SPEC, len(tok))
    examples = build_examples(demos[:4], tok, env.render, max_len=1024)
    batch = collate(examples, pad_id=0)
    got = masked_loss_sum(model, batch)
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    sel = batch["loss_mask"][:, 1:].bool()
    want = torch.nn.functional.cross_entropy(
        logits[:, :-1][sel], batch["input_ids"][:, 1:][sel], reduction="sum"
    )
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)


def test_schedule_warms_up_then_decays_to_the_floor():
    values = [lr_factor(s, total=100, warmup=10, min_ratio=0.1) for s in range(101)]
    assert values[0] == pytest.approx(0.1) and values[9] == pytest.approx(1.0)
    assert values[10] == pytest.approx(1.0) and values[100] == pytest.approx(0.1)
    assert all(a >= b for a, b in itertools.pairwise(values[10:]))
    # A time budget that is used up faster than the steps anneals the rate just as well.
    assert lr_factor(20, total=100, warmup=10, min_ratio=0.1, progress=1.0) == pytest.approx(0.1)
    assert lr_factor(20, total=100, warmup=10, min_ratio=0.1, progress=0.5) == pytest.approx(0.55)


def test_schedule_holds_the_peak_until_its_decay_fraction():
    values = [lr_factor(s, 110, 10, 0.1, decay_fraction=0.25) for s in range(111)]
    assert values[10:85] == [1.0] * 75  # held for the first 75% after warm-up
    assert values[85] == pytest.approx(1.0) and values[110] == pytest.approx(0.1)
    assert values[97] > 0.55 > values[98]  # half way through the decay, 97.5
    assert all(a > b for a, b in itertools.pairwise(values[86:]))
    full = [lr_factor(s, 110, 10, 0.1) for s in range(111)]
    assert full == [lr_factor(s, 110, 10, 0.1, decay_fraction=1.0) for s in range(111)]


# ---- training loop and checkpoints ----


def _config(out: Path, **overrides) -> SFTConfig:
    base = dict(
        output_dir=str(out),
        steps=24,
        batch_tokens=4096,
        max_batch=16,
        lr=1e-2,
        warmup_steps=4,
        eval_interval=0,
        save_interval=0,
        log_interval=4,
        progress=False,
    )
    base.update(overrides)
    return SFTConfig(**base)


@pytest.mark.slow
def test_short_sft_run_lowers_the_loss(tmp_path, tok, env, demos):
    examples = build_examples(demos, tok, env.render, max_len=1024)
    model = build_model(SPEC, len(tok))
    result = train_sft(model, tok, examples, [], env, _config(tmp_path), log=_quiet)
    records = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if "loss" in r]
    assert result.steps == 24 and len(losses) == 6
    assert losses[-1] < 0.6 * losses[0]
    # The published directory is an ordinary HF model dir that load_policy reads.
    loaded, _ = load_policy(str(tmp_path), device="cpu")
    ids = torch.tensor([examples[0].input_ids])
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, model.eval()(ids).logits)


@pytest.mark.slow
def test_resumed_run_matches_an_uninterrupted_one(tmp_path, tok, env, demos):
    examples = build_examples(demos, tok, env.render, max_len=1024)
    whole = build_model(SPEC, len(tok))
    train_sft(whole, tok, examples, [], env, _config(tmp_path / "a", steps=8), log=_quiet)
    part = build_model(SPEC, len(tok))
    cfg = _config(tmp_path / "b", steps=8, stop_after=4)
    train_sft(part, tok, examples, [], env, cfg, log=_quiet)
    resumed = build_model(SPEC, len(tok))  # fresh weights: all state must come from disk
    cfg = _config(tmp_path / "b", steps=8, resume=True)
    train_sft(resumed, tok, examples, [], env, cfg, log=_quiet)
    for (name, a), b in zip(whole.state_dict().items(), resumed.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=name)
    steps = [
        json.loads(x)["step"] for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps == [4, 8]


@pytest.mark.slow
def test_a_stop_request_saves_a_checkpoint_that_resumes_exactly(tmp_path, tok, env, demos):
    """A run's SIGINT/SIGTERM flag stops training after the step: a resumable checkpoint,
    no published model, and resuming ends where an uninterrupted run does."""
    examples = build_examples(demos, tok, env.render, max_len=1024)
    whole = build_model(SPEC, len(tok))
    train_sft(whole, tok, examples, [], env, _config(tmp_path / "a", steps=8), log=_quiet)
    asked = iter(range(100))
    part = build_model(SPEC, len(tok))
    stopped = train_sft(
        part,
        tok,
        examples,
        [],
        env,
        _config(tmp_path / "b", steps=8),
        log=_quiet,
        should_stop=lambda: next(asked) >= 2,
    )
    assert stopped.stopped and stopped.steps == 3
    assert [p.name for p in ckpt.list_checkpoints(tmp_path / "b" / "checkpoints")] == [
        "step-0000003"
    ]
    assert not (tmp_path / "b" / "config.json").exists()  # nothing half-trained to load
    resumed = build_model(SPEC, len(tok))
    done = train_sft(
        resumed, tok, examples, [], env, _config(tmp_path / "b", steps=8, resume=True), log=_quiet
    )
    assert not done.stopped and (tmp_path / "b" / "config.json").exists()
    for (name, a), b in zip(whole.state_dict().items(), resumed.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=name)


def test_checkpoints_are_atomic_and_pruned(tmp_path, tok):
    model = build_model(SPEC, len(tok))
    for step in (1, 2, 3):
        ckpt.save_checkpoint(tmp_path, step, model, tok, {"x": step}, keep_last=2)
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["step-0000002", "step-0000003"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]
    # A half-written directory (no trainer state) is never picked up for resume.
    (tmp_path / "step-0000009").mkdir()
    assert ckpt.list_checkpoints(tmp_path)[-1].name == "step-0000003"
    with torch.no_grad():
        next(model.parameters())[0, 0] = float("nan")
    assert ckpt.save_checkpoint(tmp_path, 4, model, tok, {}) is None


# ---- held-out evaluation: the RL evaluation's loop and the reward's exact match ----


class ScriptedEngine:
    """Stands in for the rollout engine: answers each turn with a fixed text."""

    def __init__(self, tokenizer, replies):
        self.tokenizer, self.replies, self.calls = tokenizer, replies, 0
        self.lock, self.version = threading.RLock(), 0

    def generate(self, prompts, params=None, *, max_new_tokens=None, **_):
        reply = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        ids = self.tokenizer(reply, add_special_tokens=False)["input_ids"]
        eos = self.tokenizer.eos_token_id
        return [
            Generation(
                ids, [-0.1] * len(ids), [-0.1] * len(ids), reply, "eos", eos, -0.1, 0, len(p)
            )
            for p in prompts
        ]


def _evaluate(tok, env, replies, max_turns=4):
    from agentrl.rewards import RewardConfig
    from agentrl.rollout import EpisodeConfig
    from agentrl.training.evaluation import eval_episode_config, evaluate_episodes

    task = {"messages": [{"role": "user", "content": "Compute 6*7."}], "tools": None, "gt": ["42"]}
    episode = eval_episode_config(EpisodeConfig(max_turns=max_turns), 0.0, 96)
    metrics, (trajectory,), _ = evaluate_episodes(
        ScriptedEngine(tok, replies), [task], env.tools, episode, RewardConfig()
    )
    return metrics, trajectory


def test_heldout_episodes_run_the_tools_and_score_with_the_rewards_exact_match(tok, env):
    call = (
        '<tool_call>\n{"name": "calculate_math", "arguments": {"expression": "6*7"}}\n</tool_call>'
    )
    metrics, trajectory = _evaluate(tok, env, [call, "<answer>42</answer>"])
    assert metrics["eval/exact_match"] == 1.0 and metrics["eval/tasks"] == 1
    assert [e["result"]["result"] for e in trajectory.tool_events] == ["42"]
    assert trajectory.conversation[2] == {"role": "tool", "content": '{"value":42.0,"result":"42"}'}
    assert not trajectory.unfinished
    metrics, _ = _evaluate(tok, env, [call, "<answer>41</answer>"])
    assert metrics["eval/exact_match"] == 0.0
    # The built-in task's evaluation counts its calls too: the share that failed is per call.
    assert metrics["eval/tools/calls_per_episode"] == 1.0
    assert metrics["eval/tools/error_rate"] == 0.0
    bad = '<tool_call>{"name": "calculate_math", "arguments": {"expression": "6*"}}</tool_call>'
    metrics, _ = _evaluate(tok, env, [bad, call, call, call, "<answer>42</answer>"], max_turns=5)
    assert metrics["eval/tools/error_rate"] == 0.25
    assert metrics["eval/tools/calculate_math/error_rate"] == 0.25


def test_heldout_episode_stops_after_max_turns(tok, env):
    call = '<tool_call>{"name": "calculate_math", "arguments": {"expression": "1+1"}}</tool_call>'
    metrics, trajectory = _evaluate(tok, env, [call], max_turns=3)
    assert trajectory.unfinished and len(trajectory.turn_outputs) == 3
    assert len(trajectory.tool_events) == 3 and metrics["eval/unfinished_rate"] == 1.0


def test_sft_evaluates_a_model_in_training_on_agentrls_engine(tok, env):
    from agentrl.training.evaluation import evaluate_model

    torch.manual_seed(0)
    model = build_model(SPEC, len(tok))
    model.train()
    tasks = generated_heldout(3)
    metrics, trajectories = evaluate_model(
        model, tok, tasks, env.tools, max_turns=2, max_new_tokens=8, batch_rows=2
    )
    assert metrics["eval/tasks"] == 3 and len(trajectories) == 3
    assert all(len(t.response_ids) > 0 for t in trajectories)
    assert model.training  # left as it was found


def test_heldout_tasks_avoid_training_prompts(demos):
    heldout = generated_heldout(30, exclude=demos)
    train_texts = {m["content"] for c in demos for m in c.messages if m["role"] == "user"}
    assert len(heldout) == 30
    assert all(t.messages[-1]["content"] not in train_texts for t in heldout)
    assert heldout[0].messages[0]["role"] == "system"  # same instruction RL prompts carry


# ---- command line ----


@pytest.mark.slow
def test_sft_command_trains_saves_and_reports(tmp_path, capsys):
    from agentrl.cli import main

    tiny = "vocab_size=3072,hidden_size=32,num_layers=2,num_heads=2,num_kv_heads=1,head_dim=16"
    tiny += ",intermediate_size=64,corpus_tasks=100"
    code = main(
        [
            "sft",
            "--tiny",
            tiny,
            "--num-demos",
            "40",
            "--eval-tasks",
            "4",
            "--steps",
            "3",
            "--output",
            str(tmp_path / "out"),
            "--no-progress",
            "--device",
            "cpu",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "held-out exact match:" in out and "on 4 tasks" in out
    summary = json.loads((tmp_path / "out" / "sft_summary.json").read_text())
    assert summary["steps"] == 3 and summary["eval"]["eval/tasks"] == 4
    model, _ = load_policy(str(tmp_path / "out"), device="cpu")
    assert model.config.num_hidden_layers == 2


def test_sft_command_rejects_unknown_tiny_fields(tmp_path, capsys):
    from agentrl.cli import main

    assert main(["sft", "--tiny", "depth=3", "--output", str(tmp_path)]) == 2
    assert "--tiny" in capsys.readouterr().err
    assert main(["sft", "--decay_fraction", "0", "--output", str(tmp_path)]) == 2
    assert "--decay_fraction" in capsys.readouterr().err
    demos = tmp_path / "demos.jsonl"
    demos.write_text("", encoding="utf-8")
    args = ["sft", "--data", str(demos), "--shortcut_rate", "0.5", "--output", str(tmp_path)]
    assert main(args) == 2
    assert "--shortcut_rate" in capsys.readouterr().err


def test_command_defaults_are_the_pipeline_defaults():
    """`agentrl sft` with no flags and the trainer's warm start train the same model."""
    from agentrl.cli import command_parser
    from agentrl.commands.sft import options_from_args
    from agentrl.sft.pipeline import SFTRunOptions

    parser, _ = command_parser("sft")
    assert options_from_args(parser.parse_args([])) == SFTRunOptions()
    dashed = options_from_args(parser.parse_args(["--num-demos", "7", "--max-len", "64"]))
    assert (dashed.num_demos, dashed.max_len) == (7, 64)
    scoped = options_from_args(parser.parse_args(["--shortcut_scope", "one_expression"]))
    assert (scoped.shortcut_scope, scoped.shortcut_rate) == ("one_expression", 0.75)
    # The demonstrations are written in the tool-call family RL will parse (`--tool_format`).
    pinned = options_from_args(parser.parse_args(["--tool_format", "pythonic"]))
    assert (pinned.tool_format, SFTRunOptions().tool_format) == ("pythonic", "auto")
    # Batches grouped by length unless asked otherwise (the built-in run's batches).
    drawn = options_from_args(parser.parse_args(["--group_by_length", "false"]))
    assert (drawn.train.group_by_length, SFTRunOptions().train.group_by_length) == (False, True)
    # The demonstrations' task mix: the generator's unless given.
    mixed = options_from_args(parser.parse_args(["--mix", "math=0.5,unit=0.5"]))
    assert (mixed.mix, SFTRunOptions().mix) == ((("math", 0.5), ("unit", 0.5)), None)


def _record_warm_starts(monkeypatch) -> list:
    """Stands in for the SFT pipeline: records its options and publishes an empty model."""
    from agentrl.sft import pipeline

    calls = []

    def fake_run_sft(options, log, should_stop=None):
        calls.append(options)
        out = Path(options.train.output_dir)
        out.mkdir(parents=True)
        (out / "config.json").write_text("{}")
        return pipeline.SFTRunResult(str(out), 0, 0.5, SFTResult(10, 1.0, 0.5), 0.0)

    monkeypatch.setattr(pipeline, "run_sft", fake_run_sft)
    return calls


def test_warm_start_runs_the_pipeline_only_when_the_built_in_model_is_missing(
    tmp_path, monkeypatch
):
    from agentrl.assembly import models as setup

    calls = _record_warm_starts(monkeypatch)
    monkeypatch.chdir(tmp_path)
    logged: list[str] = []
    assert setup.ensure_warm_start("runs/tiny-sft", logged.append) is True
    built_in = SFTConfig(output_dir="runs/tiny-sft", compile=True)
    assert calls == [SFTRunOptions(train=built_in)]
    assert setup.ensure_warm_start("runs/tiny-sft", logged.append) is False  # now present
    assert setup.ensure_warm_start(str(tmp_path / "other"), logged.append) is False
    assert len(calls) == 1  # never trained implicitly for any other model
    assert "agentrl sft --compile" in logged[0]


def test_warm_start_trains_eagerly_and_says_so_without_a_cpp_compiler(tmp_path, monkeypatch):
    from agentrl.assembly import models as setup

    calls = _record_warm_starts(monkeypatch)
    monkeypatch.setattr(setup, "missing_compiler", lambda device: "no C++ compiler (test)")
    monkeypatch.setattr(setup, "resolve_device", lambda name: torch.device("cpu"))
    monkeypatch.chdir(tmp_path)
    logged: list[str] = []
    assert setup.ensure_warm_start("runs/tiny-sft", logged.append) is True
    assert calls[0].train.compile is False
    assert any("no C++ compiler (test)" in line and "eagerly" in line for line in logged)


def test_compile_refuses_a_cpu_without_a_cpp_compiler(monkeypatch):
    import torch._inductor.cpp_builder as cpp_builder
    from agentrl.errors import UsageError
    from agentrl.models.compile import compile_decoder_layers

    def no_compiler(*args, **kwargs):
        raise RuntimeError("no working C++ compiler found")

    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", no_compiler)
    model = build_model(SMALL_SPEC, 64)
    with pytest.raises(UsageError, match="C\\+\\+ compiler"):
        compile_decoder_layers(model)
    assert not any(
        hasattr(layer, "_compiled_call_impl") and layer._compiled_call_impl
        for layer in model.model.layers
    )


def test_sft_pipeline_reports_an_empty_training_set(tmp_path):
    from agentrl.errors import UserError
    from agentrl.models.tiny import TinySpec
    from agentrl.sft.pipeline import SFTRunOptions, run_sft

    tiny = TinySpec(
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        num_kv_heads=1,
        head_dim=16,
        intermediate_size=64,
        corpus_tasks=50,
    )
    train = SFTConfig(output_dir=str(tmp_path), steps=1, progress=False)
    options = SFTRunOptions(
        tiny=tiny, num_demos=3, eval_tasks=1, max_len=4, device="cpu", train=train
    )
    with pytest.raises(UserError, match="no usable training example"):
        run_sft(options, log=lambda _: None)


@pytest.mark.slow
def test_compiled_layers_train_like_eager_ones_and_evaluate_eagerly(tmp_path, tok, env, demos):
    examples = build_examples(demos, tok, env.render, max_len=1024)
    tasks = generated_heldout(2, demos)
    runs = {}
    for compiled in (False, True):
        torch.manual_seed(0)
        model = build_model(dataclasses.replace(SPEC, num_layers=1), len(tok))
        cfg = _config(
            tmp_path / str(compiled), steps=4, compile=compiled, eval_interval=2, eval_subset=2
        )
        runs[compiled] = (model, train_sft(model, tok, examples, tasks, env, cfg, log=_quiet))
    (eager, eager_result), (fused, fused_result) = runs[False], runs[True]
    assert all(getattr(layer, "_compiled_call_impl", None) for layer in fused.model.layers)
    assert not any(getattr(layer, "_compiled_call_impl", None) for layer in eager.model.layers)
    # Fused kernels sum in another order: the same training within float rounding.
    for (name, a), b in zip(eager.state_dict().items(), fused.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4, msg=name)
    assert fused_result.final_loss == pytest.approx(eager_result.final_loss, rel=1e-3)
    assert fused_result.eval["eval/tasks"] == eager_result.eval["eval/tasks"] == 2


def test_compile_refuses_a_model_without_decoder_layers():
    from agentrl.models.compile import compile_decoder_layers

    with pytest.raises(ValueError, match=r"model\.model\.layers"):
        compile_decoder_layers(torch.nn.Linear(2, 2))


def test_compile_flag_reaches_the_training_config():
    import argparse

    from agentrl.commands.sft import add_arguments, options_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert options_from_args(parser.parse_args(["--compile"])).train.compile is True
    assert options_from_args(parser.parse_args([])).train.compile is False
