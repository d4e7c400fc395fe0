"""Calls as the answer (``call_mode="answer"``): the first turn's calls are recorded on the
trajectory, never run, and the episode ends; no call is an answer too."""

from __future__ import annotations

import pytest
from agentrl.assembly.task import episode_config, resolve_call_mode
from agentrl.config import resolve
from agentrl.data import PromptPool
from agentrl.errors import UsageError
from agentrl.observability.rollout_dump import episode_record
from agentrl.rollout.episodes import EpisodeConfig, run_episodes
from agentrl.tools import ToolRegistry, builtin_registry
from agentrl.training.step_metrics import tool_metrics

from tests.fakes.engines import ScriptedEngine, tool_call

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _sample(text: str) -> dict:
    return {
        "messages": [{"role": "user", "content": text}],
        "tools": [WEATHER],
        "gt": [],
        "ground_truth": [],
    }


def _reply(_turn: int, context: str) -> str:
    if "joke" in context:
        return "No function fits that."
    two = tool_call("get_weather", '{"city": "Paris"}') + tool_call(
        "get_weather", '{"city": "Oslo"}'
    )
    return two


class _Refusing(ToolRegistry):
    """A registry that fails the test if anything is run through it."""

    def execute_many(self, *args: object, **kwargs: object):  # type: ignore[override]
        raise AssertionError("answer mode ran a call")


def test_calls_are_recorded_not_run_and_the_episode_ends() -> None:
    engine = ScriptedEngine(_reply)
    config = EpisodeConfig(max_turns=3, call_mode="answer")
    samples = [_sample("Weather in Paris and Oslo?"), _sample("Tell me a joke")]
    groups = run_episodes(engine, samples, _Refusing(), num_generations=2, config=config)
    assert engine.calls == [4]  # one turn, however many turns were allowed
    for traj in groups[0].trajectories:
        traj.check_alignment()
        assert [(c["name"], c["arguments"]) for c in traj.answer_calls] == [
            ("get_weather", {"city": "Paris"}),
            ("get_weather", {"city": "Oslo"}),
        ]
        assert all(c["canonical"] for c in traj.answer_calls)
        assert traj.tool_events == [] and not traj.unfinished
        assert traj.num_turns == 1 and set(traj.response_mask) == {1}
        assert traj.columns["ground_truth"] == []
        record = episode_record(
            traj, kind="train", step=1, episode=0, group=0, reward=0.0, terms={}, max_turns=3
        )
        assert record["answer_calls"][1]["arguments"] == {"city": "Oslo"}
        assert record["tool_calls"] == [] and record["finish_reason"] == "answered"
    for traj in groups[1].trajectories:  # the no-call answer is a first-class outcome
        assert traj.answer_calls == [] and traj.completion == "No function fits that."
    metrics = tool_metrics([t for g in groups for t in g.trajectories])
    assert metrics["answer/calls_per_episode"] == 1.0  # (2 + 2 + 0 + 0) / 4
    assert metrics["answer/no_call_rate"] == 0.5 and metrics["tools/calls_per_episode"] == 0.0


def test_execute_mode_still_runs_calls_and_records_no_answer() -> None:
    call = tool_call("get_weather", '{"city": "Paris"}')
    engine = ScriptedEngine(lambda turn, _c: call if turn == 0 else "done")
    groups = run_episodes(
        engine, [_sample("Weather?")], builtin_registry(), config=EpisodeConfig(max_turns=2)
    )
    traj = groups[0].trajectories[0]
    assert traj.answer_calls is None
    assert [e["ok"] for e in traj.tool_events] == [False]
    assert "unknown tool" in str(traj.tool_events[0]["result"])


def test_auto_mode_is_answer_on_function_calling_data_and_says_so(tmp_path) -> None:
    path = tmp_path / "calls.jsonl"
    path.write_text(
        '{"query": "q", "tools": "[]", "answers": "[]"}\n'
        '{"query": "r", "tools": "[]", "answers": "[]"}\n',
        encoding="utf-8",
    )
    pool = PromptPool(str(path), require_gt=False)
    lines: list[str] = []
    config = resolve_call_mode(resolve(), pool, None, lines.append)
    assert config.call_mode == "answer" and episode_config(config).call_mode == "answer"
    assert "call mode: answer" in lines[0] and "2 xlam" in lines[0]
    chosen = resolve_call_mode(resolve(overrides={"call_mode": "execute"}), pool, None, print)
    assert episode_config(chosen).call_mode == "execute"
    plain = PromptPool.from_samples([])
    quiet: list[str] = []
    assert resolve_call_mode(resolve(), plain, None, quiet.append).call_mode == "execute"
    assert quiet == []


def test_answer_mode_with_an_agent_is_a_clear_error() -> None:
    with pytest.raises(UsageError, match="--agent"):
        resolve_call_mode(resolve(overrides={"call_mode": "answer"}), None, object(), print)
    with pytest.raises(ValueError, match="call_mode"):
        EpisodeConfig(call_mode="auto")  # type: ignore[arg-type]


def test_answer_mode_shows_a_sample_its_own_functions_only() -> None:
    engine = ScriptedEngine(lambda _t, _c: "No function fits that.")
    bare = {"messages": [{"role": "user", "content": "Hi"}], "tools": None, "gt": []}
    registry = builtin_registry()
    answer = run_episodes(engine, [bare], registry, config=EpisodeConfig(call_mode="answer"))
    execute = run_episodes(engine, [bare], registry, config=EpisodeConfig())
    assert answer[0].trajectories[0].tools is None
    assert "calculate_math" not in answer[0].prompt
    assert "calculate_math" in execute[0].prompt  # executing: the registry's tools
