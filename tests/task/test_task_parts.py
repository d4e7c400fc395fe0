"""Your own task: reward functions with dataset columns, per-episode environments, user
tools, the import paths of the command line."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch
from agentrl.envs import EnvironmentTools, task_parts, task_tools
from agentrl.rewards import RewardConfig
from agentrl.rollout.episodes import run_episodes
from agentrl.tools import ToolRegistry, builtin_registry, tool
from agentrl.training.scoring import reward_set, score_trajectories
from agentrl.trajectory import Trajectory
from agentrl.utils.imports import ImportPathError, load_object

from tests.fakes.engines import ScriptedEngine, tool_call
from tests.fakes.trajectories import TRAJECTORIES


def test_reward_functions_get_columns_by_keyword_and_none_is_left_out() -> None:
    seen: dict[str, Any] = {}

    def exact(prompts, completions, answer, level, trajectories, completion_ids, **kwargs):
        seen.update(prompts=prompts, level=level, ids=completion_ids, n=len(trajectories))
        return [
            None if a is None else float(a in c) for c, a in zip(completions, answer, strict=True)
        ]

    def trl_style(completions, **kwargs):  # written for another GRPO trainer, unchanged
        return [len(c) / 100 for c in completions]

    rewards = reward_set([exact, trl_style], [2.0, 0.5])
    scores = score_trajectories(TRAJECTORIES, RewardConfig(), 10, rewards)
    lengths = [len("<answer>Kessa</answer>"), len("no idea"), len("<answer>x</answer>")]
    expected = [2.0 * 1 + 0.5 * lengths[0] / 100, 0.5 * lengths[1] / 100, 0.5 * lengths[2] / 100]
    np.testing.assert_allclose(scores.rewards.numpy(), expected, rtol=1e-6)
    assert seen["level"] == [1, 2, None]  # a column a record lacks is None
    assert seen["ids"] == [[5, 7]] * 3  # generated tokens only
    assert seen["prompts"][0] == [{"role": "user", "content": "q"}] and seen["n"] == 3
    assert scores.functions["exact/mean"] == pytest.approx(0.5)  # over the 2 it applied to
    assert scores.functions["exact/none_frac"] == pytest.approx(1 / 3)
    assert scores.functions["trl_style/none_frac"] == 0.0
    assert len(scores.details) == 3  # the tool-use details are still there for dashboards


def test_default_reward_is_the_tool_use_reward_bit_for_bit() -> None:
    config = RewardConfig()
    default = score_trajectories(TRAJECTORIES, config, 5)
    named = score_trajectories(TRAJECTORIES, config, 5, reward_set(["tool_use"]))
    from agentrl.rewards import episode_record, score_batch

    direct = score_batch(
        [episode_record(t) for t in TRAJECTORIES], config.with_overrides(current_step=5)
    )
    assert torch.equal(default.rewards, torch.tensor(direct.rewards, dtype=torch.float32))
    assert torch.equal(named.rewards, default.rewards)
    assert default.functions == {} and named.functions == {}


def test_bad_reward_names_and_import_paths_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="unknown reward function 'nope'"):
        reward_set(["nope"])
    with pytest.raises(ImportPathError, match="cannot import module 'no_such_module_x'"):
        load_object("no_such_module_x:f")
    with pytest.raises(ImportPathError, match="module 'json' has no attribute 'nothing'"):
        load_object("json:nothing")
    with pytest.raises(ValueError, match="2 reward weights for 1"):
        reward_set(["tool_use"], [1.0, 2.0])


class CounterEnv:
    """Per-episode state: a counter the tool bumps; every object ever made is recorded."""

    made: list[CounterEnv] = []  # noqa: RUF012 - the test's registry of objects

    def __init__(self) -> None:
        self.count = 0
        self.closed = 0
        self.sample: Any = None
        self.tools = [self.bump]
        CounterEnv.made.append(self)

    def reset(self, sample: Any) -> str:
        self.sample = sample
        return "counter at 0"

    def bump(self, by: int) -> int:
        """Add to this episode's counter.

        Args:
            by: how much
        """
        self.count += by
        return self.count

    def reward(self, trajectory: Trajectory) -> float:
        return float(self.count)

    def close(self) -> None:
        self.closed += 1


def _bump_twice(turn: int, context: str) -> str:
    return tool_call("bump", '{"by": 2}') if turn < 2 else "<answer>done</answer>"


def test_environment_state_is_per_episode_and_close_always_runs() -> None:
    CounterEnv.made = []
    tools = task_tools(builtin_registry(), task_parts(environment=CounterEnv))
    assert isinstance(tools, EnvironmentTools) and tools.has_reward
    assert [s["function"]["name"] for s in tools.specs()][-1] == "bump"
    sample = {"messages": [{"role": "user", "content": "bump twice"}], "gt": ["4"], "level": 3}
    groups = run_episodes(ScriptedEngine(_bump_twice), [sample], tools, num_generations=3)
    episodes = CounterEnv.made[1:]  # the first object is the probe that read the tools
    assert len(episodes) == 3 and len({id(e) for e in episodes}) == 3
    assert [e.count for e in episodes] == [4, 4, 4]  # 2 + 2 each, nothing shared
    assert all(e.closed == 1 for e in CounterEnv.made)
    trajs = groups[0].trajectories
    assert [t.env_reward for t in trajs] == [4.0, 4.0, 4.0]
    assert [e["result"] for e in trajs[0].tool_events] == [2, 4]
    assert trajs[0].columns == {"gt": ["4"], "level": 3}
    assert trajs[0].conversation[1] == {"role": "user", "content": "counter at 0"}
    assert trajs[0].conversation[-1]["content"] == "<answer>done</answer>"


class BrokenEngine(ScriptedEngine):
    def generate(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the engine died")


def test_close_runs_when_the_episode_fails() -> None:
    CounterEnv.made = []
    tools = task_tools(builtin_registry(), task_parts(environment=CounterEnv))
    sample = {"messages": [{"role": "user", "content": "x"}], "gt": ["1"]}
    with pytest.raises(RuntimeError, match="the engine died"):
        run_episodes(BrokenEngine(_bump_twice), [sample, sample], tools, num_generations=2)
    assert len(CounterEnv.made) == 5 and all(e.closed == 1 for e in CounterEnv.made)


@tool
def shout(text: str) -> str:
    """Upper-case the text.

    Args:
        text: what to shout
    """
    return text.upper()


def count_words(text: str) -> int:
    """How many words the text has."""
    return len(text.split())


async def whisper(text: str) -> str:
    """Lower-case the text."""
    return text.lower()


def test_user_tools_sync_async_and_registries_join_the_builtins() -> None:
    extra = ToolRegistry()
    extra.register(whisper)
    parts = task_parts(config_tools=f"{__name__}:count_words", tools=[shout, extra])
    tools = task_tools(builtin_registry(), parts)
    assert {"shout", "whisper", "count_words", "calculate_math"} <= set(tools)
    events = tools.execute_many(
        [
            {"name": "shout", "arguments": {"text": "hi"}},
            {"name": "whisper", "arguments": '{"text": "HO"}'},
        ]
    )
    assert [e["result"] for e in events] == ["HI", "ho"]
    with pytest.raises(ValueError, match="reward functions given both"):
        task_parts(config_reward_funcs="tool_use", reward_funcs=["tool_use"])


def test_prompts_using_registered_tools_are_kept(tmp_path) -> None:
    from agentrl.assembly.prompts import load_prompts
    from agentrl.assembly.task import build_tools
    from agentrl.config import resolve

    spec = shout.spec
    lines = [
        {"messages": [{"role": "user", "content": "shout hi"}], "gt": ["HI"], "tools": [spec]},
        {"messages": [{"role": "user", "content": "no tools listed"}], "gt": ["x"], "id": 7},
        {
            "messages": [{"role": "user", "content": "?"}],
            "gt": ["x"],
            "tools": [{"type": "function", "function": {"name": "nowhere", "parameters": {}}}],
        },
        {"messages": [{"role": "user", "content": "by name"}], "gt": ["x"], "tools": ["shout"]},
        {
            "messages": [{"role": "user", "content": "by entry"}],
            "gt": ["x"],
            "tools": [{"name": "shout"}],
        },
    ]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    config = resolve(
        preset="tiny",
        overrides={"data_path": str(path), "tools": f"{__name__}:shout", "eval_ratio": 0.0},
    )
    tools = build_tools(config)
    train, _ = load_prompts(config, tools, lambda _: None)
    assert len(train) == 5
    # A record naming a registered tool gets the registered spec.
    assert train[3].tools == [shout.spec] and train[4].tools == [shout.spec]
    assert [s["function"]["name"] for s in train[0].tools] == ["shout"]  # the record's own
    # No tools listed: the user's (the built-ins are hidden); an unknown tool is dropped
    # and counted, as for any run.
    assert [s["function"]["name"] for s in train[1].tools] == ["shout"]
    assert [s["function"]["name"] for s in train[2].tools] == ["shout"]
    assert train.stats["defaulted_tools"] == 2
    assert train[1].columns == {"gt": ["x"], "id": 7}


def test_metrics_per_reward_function_and_per_tool(tmp_path) -> None:
    from agentrl.observability.progress import format_step_line
    from agentrl.observability.report import reward_function_lines, write_report
    from agentrl.training.step import tool_metrics

    ok = {"ok": True, "name": "read", "args": {}, "result": 1, "canonical": True}
    bad = {**ok, "ok": False, "name": "search"}
    first, second = TRAJECTORIES[0], TRAJECTORIES[1]
    first.tool_events, second.tool_events = [ok, bad, ok], [bad]
    metrics = tool_metrics([first, second])
    assert metrics == {
        "tools/calls_per_episode": 2.0,
        "tools/error_rate": 0.5,
        "tools/read/calls": 2.0,
        "tools/read/calls_per_episode": 1.0,
        "tools/read/error_rate": 0.0,
        "tools/search/calls": 2.0,
        "tools/search/calls_per_episode": 1.0,
        "tools/search/error_rate": 1.0,
    }
    step = {
        "reward/mean": 1.0,
        "reward_fn/exact/mean": 0.5,
        "reward_fn/exact/std": 0.25,
        "reward_fn/exact/none_frac": 0.5,
    }
    assert format_step_line(3, 10, step).endswith("| exact 0.500±0.250 None 50%")
    records = [{"kind": "train", "step": s, **step} for s in (1, 2)]
    assert reward_function_lines(records) == (("exact", "train", "reward_fn/exact/mean"),)
    assert write_report(records, tmp_path / "r.png").read_bytes().startswith(b"\x89PNG")


def test_task_options_from_flags_and_toml(tmp_path) -> None:
    import argparse

    from agentrl.config import add_config_arguments, config_from_args, resolve

    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    args = parser.parse_args(
        [
            "--tools",
            "m:a,m:b",
            "--reward_funcs",
            "tool_use,m:f",
            "--reward_weights",
            "1,0.5",
            "--environment",
            "m:Env",
            "--mcp",
            "server one",
            "--mcp",
            "server two",
        ]
    )
    config = config_from_args(args)
    assert (config.tools, config.reward_funcs, config.reward_weights, config.environment) == (
        "m:a,m:b",
        "tool_use,m:f",
        "1,0.5",
        "m:Env",
    )
    assert config.mcp == "server one;server two"
    toml = tmp_path / "run.toml"
    toml.write_text(
        '[data]\ntools = ["m:a", "m:b"]\n[reward]\nreward_funcs = ["tool_use"]\n'
        "reward_weights = [2.0]\n"
    )
    config = resolve(config_file=toml)
    assert (config.tools, config.reward_funcs, config.reward_weights) == (
        "m:a,m:b",
        "tool_use",
        "2.0",
    )


def test_the_environment_reward_joins_the_given_functions() -> None:
    from agentrl.envs import TaskParts, reward_plan

    assert reward_plan(TaskParts(), False)[:2] == (["tool_use"], None)
    assert reward_plan(TaskParts(environment=CounterEnv), True)[:2] == (["environment"], None)
    given = TaskParts(reward_funcs=["r1_int"], reward_weights=[0.5])
    functions, weights, line = reward_plan(given, True)
    assert functions == ["r1_int", "environment"] and weights == [0.5, 1.0]
    assert line == "reward: r1_int x 0.5, environment x 1"


def test_run_training_hands_the_task_to_the_trainer(monkeypatch) -> None:
    from agentrl import trainer as trainer_module
    from agentrl.config import resolve
    from agentrl.placement import SingleProcess

    monkeypatch.setattr(trainer_module.Trainer, "run", lambda self: self.parts)
    parts = trainer_module.run_training(
        resolve(preset="tiny"),
        tools=[shout],
        reward_funcs=["r1_int"],
        reward_weights=[0.5],
        environment=CounterEnv,
        placement=SingleProcess(),
    )
    assert parts.tools == [shout] and parts.reward_funcs == ["r1_int"]
    assert parts.reward_weights == [0.5] and parts.environment is CounterEnv


def test_no_trajectories_score_to_nothing() -> None:
    scores = score_trajectories([], RewardConfig(), 1, reward_set(["tool_use", "r1_int"]))
    assert scores.rewards.shape == (0,) and scores.details == [] and scores.functions == {}
