"""The batched multi-turn loop: alignment invariants, tools that fail, turn limits."""

from __future__ import annotations

import time

import pytest
import torch
from agentrl.rollout.engine import TorchEngine
from agentrl.rollout.episodes import EpisodeConfig, parse_calls, run_episodes
from agentrl.tools import builtin_registry

from tests.fakes.engines import ScriptedEngine, tool_call
from tests.fakes.models import next_token_logps, tiny_model, tiny_tokenizer

CALC = '<tool_call>{"name": "calculate_math", "arguments": {"expression": "%s"}}</tool_call>'


def _sample(text: str = "先算2+3，再算4*5") -> dict:
    return {"messages": [{"role": "user", "content": text}], "tools": None, "gt": ["5", "20"]}


def _two_turns(_turn: int, context: str) -> str:
    # Keyed on the visible context, so it also works on truncated contexts.
    return "<answer>5</answer>" if "<tool_response>" in context else CALC % "2+3"


def test_multi_turn_trajectories_keep_alignment_and_their_running_context() -> None:
    engine = ScriptedEngine(_two_turns, version=3)
    tok = engine.tokenizer
    groups = run_episodes(
        engine, [_sample(), _sample("1+1")], builtin_registry(), num_generations=4
    )
    assert [len(g.trajectories) for g in groups] == [4, 4]
    assert engine.calls == [8, 8]  # every turn is one batched call for all episodes
    for group in groups:
        assert group.policy_version == 3
        for traj in group.trajectories:
            traj.check_alignment()
            assert not traj.unfinished
            assert traj.turn_outputs[1] == "<answer>5</answer>"
            assert [e["ok"] for e in traj.tool_events] == [True]
            assert traj.tool_events[0]["result"]["result"] == "5"
            assert traj.tool_events[0]["canonical"]
            # prompt + response tokens are exactly the running context
            assert tok.decode(traj.prompt_ids + traj.response_ids) == traj.context
            call_ids = tok(CALC % "2+3", add_special_tokens=False)["input_ids"]
            assert traj.response_ids[: len(call_ids)] == call_ids
            assert traj.response_mask[: len(call_ids)] == [1] * len(call_ids)
            assert set(traj.response_versions) == {3, -1}
            pairs = zip(traj.response_ids, traj.response_mask, strict=True)
            observed = [t for t, m in pairs if m == 0]
            assert '{"value":5.0,"result":"5"}' in tok.decode(observed)
            assert traj.stats["turns"] == 2
            assert traj.completion == "\n".join(traj.turn_outputs)


def test_episode_at_max_turns_is_unfinished_and_ends_on_an_observation() -> None:
    engine = ScriptedEngine(lambda turn, _c: CALC % f"{turn}+1")
    config = EpisodeConfig(max_turns=2)
    groups = run_episodes(engine, [_sample()], builtin_registry(), num_generations=2, config=config)
    for traj in groups[0].trajectories:
        traj.check_alignment()
        assert traj.unfinished
        assert len(traj.turn_outputs) == 2 and len(traj.tool_events) == 2
        assert traj.response_mask[-1] == 0
        assert not traj.context.rstrip().endswith("<|im_start|>assistant")
        assert traj.context.endswith("<|im_end|>\n")


def test_a_raising_tool_gives_a_failed_event_and_the_episode_continues() -> None:
    registry = builtin_registry()

    def boom(x: int) -> int:
        """Always fails."""
        raise RuntimeError("kaboom")

    registry.register(boom)
    engine = ScriptedEngine(
        lambda turn, _c: tool_call("boom", '{"x": 1}') if turn == 0 else "<answer>0</answer>"
    )
    groups = run_episodes(engine, [_sample()], registry, num_generations=2)
    for traj in groups[0].trajectories:
        traj.check_alignment()
        assert traj.tool_events[0]["ok"] is False
        assert "kaboom" in traj.tool_events[0]["result"]["error"]
        assert len(traj.turn_outputs) == 2 and not traj.unfinished
        assert "kaboom" in traj.context


def test_a_tool_past_its_timeout_fails_without_stalling_the_batch() -> None:
    registry = builtin_registry()

    def slow(x: int) -> int:
        """Sleeps far past its time limit."""
        time.sleep(1.5)
        return x

    registry.register(slow, timeout=0.3)
    engine = ScriptedEngine(
        lambda turn, _c: tool_call("slow", '{"x": 2}') if turn == 0 else "<answer>2</answer>"
    )
    start = time.perf_counter()
    groups = run_episodes(engine, [_sample()], registry, num_generations=4)
    elapsed = time.perf_counter() - start
    assert elapsed < 1.2  # four timeouts of 0.3 s ran concurrently
    for traj in groups[0].trajectories:
        traj.check_alignment()
        assert traj.tool_events[0]["ok"] is False
        assert "timed out" in traj.tool_events[0]["result"]["error"]
        assert len(traj.turn_outputs) == 2


def test_disallowed_and_malformed_calls_are_failed_events() -> None:
    engine = ScriptedEngine(
        lambda turn, _c: (
            (tool_call("rm_rf") + "<tool_call>{oops</tool_call>")
            if turn == 0
            else "<answer>x</answer>"
        )
    )
    groups = run_episodes(engine, [_sample()], builtin_registry(), num_generations=1)
    events = groups[0].trajectories[0].tool_events
    assert [e["ok"] for e in events] == [False, False]
    assert "not allowed" in events[0]["result"]["error"]
    assert events[1]["result"]["error"] == "bad tool call"


def test_context_is_truncated_to_max_context_len() -> None:
    engine = ScriptedEngine(_two_turns)
    config = EpisodeConfig(max_context_len=40)
    groups = run_episodes(engine, [_sample()], builtin_registry(), config=config)
    traj = groups[0].trajectories[0]
    traj.check_alignment()
    assert len(traj.prompt_ids) == 40
    assert traj.stats["truncated_contexts"] == 2


def test_response_budget_limits_tokens_and_marks_unfinished() -> None:
    engine = ScriptedEngine(lambda turn, _c: CALC % "7*8")
    config = EpisodeConfig(max_turns=5, max_response_tokens=60)
    traj = run_episodes(engine, [_sample()], builtin_registry(), config=config)[0].trajectories[0]
    traj.check_alignment()
    assert traj.unfinished
    assert sum(traj.response_mask) <= 60


def test_keep_eos_trains_on_the_end_token_without_duplicating_it() -> None:
    engine = ScriptedEngine(_two_turns)
    tok = engine.tokenizer
    config = EpisodeConfig(keep_eos=True)
    traj = run_episodes(engine, [_sample()], builtin_registry(), config=config)[0].trajectories[0]
    traj.check_alignment()
    eos = tok.eos_token_id
    pairs = zip(traj.response_ids, traj.response_mask, strict=True)
    generated_eos = [m for t, m in pairs if t == eos]
    # Each turn's end token is trained; the one closing the tool turn is an observation.
    assert generated_eos == [1, 0, 1]
    # The context is every token the model saw or generated, the kept end tokens included.
    assert tok.decode(traj.prompt_ids + traj.response_ids) == traj.context
    assert traj.context.endswith("</answer><|im_end|>")


def test_thinking_ratio_opens_a_think_block() -> None:
    import random

    engine = ScriptedEngine(lambda turn, _c: "<answer>1</answer>")
    config = EpisodeConfig(thinking_ratio=1.0)
    traj = run_episodes(
        engine, [_sample()], builtin_registry(), config=config, rng=random.Random(0)
    )[0].trajectories[0]
    assert engine.tokenizer.decode(traj.prompt_ids).endswith("<think>\n")


def test_lenient_parser_marks_canonical_calls_and_falls_back_to_function_style() -> None:
    calls = parse_calls(CALC % "1+2", None)
    assert calls == [
        {"name": "calculate_math", "arguments": {"expression": "1+2"}, "canonical": True}
    ]
    loose = parse_calls('calculate_math(expression="3*4")', None)
    assert loose[0]["arguments"] == {"expression": "3*4"} and not loose[0]["canonical"]
    assert parse_calls("<answer>3</answer>", None) == []


@pytest.mark.slow
def test_real_engine_episodes_hold_alignment_and_first_turn_logps() -> None:
    tok = tiny_tokenizer()
    model = tiny_model(seed=9)
    engine = TorchEngine(model, tok, seed=1, version=2)
    config = EpisodeConfig(max_turns=2, max_new_tokens=12)
    always_call = lambda _text, _tools: [  # noqa: E731
        {"name": "calculate_math", "arguments": {"expression": "1+1"}, "canonical": True}
    ]
    groups = run_episodes(
        engine,
        [_sample(), _sample("1+1")],
        builtin_registry(),
        num_generations=3,
        config=config,
        call_parser=always_call,
    )
    assert engine.stats["prefill_tokens_shared"] > 0
    compared = 0
    for group in groups:
        assert group.policy_version == 2
        for traj in group.trajectories:
            traj.check_alignment()
            assert traj.unfinished and len(traj.turn_outputs) == 2
            first = traj.response_mask.index(0) if 0 in traj.response_mask else 0
            if first == 0:  # no observation after the first turn: nothing to cut at
                continue
            ids = torch.tensor([traj.prompt_ids + traj.response_ids[:first]])
            ref = next_token_logps(model, ids)[0, len(traj.prompt_ids) - 1 :]
            assert torch.allclose(torch.tensor(traj.response_logps[:first]), ref, atol=1e-4)
            compared += 1
    assert compared > 0, "no trajectory had a first turn to compare"


def test_mismatched_data_indices_are_refused() -> None:
    with pytest.raises(ValueError):
        run_episodes(ScriptedEngine(_two_turns), [_sample()], builtin_registry(), data_indices=[])
