"""--tool_workers: how many episodes' tool calls run at once; 1 runs them one episode after
another (the soak uses it so a dying tool server fails the same calls in any run)."""

from __future__ import annotations

import threading
import time

from agentrl.assembly.task import episode_config
from agentrl.config import resolve
from agentrl.rollout.episodes import EpisodeConfig, run_episodes
from agentrl.tools import ToolRegistry, tool

from tests.fakes.engines import ScriptedEngine, tool_call


def _most_at_once(workers: int) -> int:
    running, most, lock = [0], [0], threading.Lock()

    @tool(isolate=False)
    def nap() -> str:
        """Sleep a little."""
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.1)
        with lock:
            running[0] -= 1
        return "ok"

    registry = ToolRegistry(timeout=10)
    registry.register(nap)
    # Four episodes that each call `nap` in their first turn, then answer.
    engine = ScriptedEngine(
        lambda turn, _c: tool_call("nap") if turn == 0 else "<answer>ok</answer>"
    )
    samples = [
        {"messages": [{"role": "user", "content": f"task {i}"}], "gt": ["ok"]} for i in range(4)
    ]
    config = EpisodeConfig(tool_workers=workers)
    groups = run_episodes(engine, samples, registry, num_generations=1, config=config)
    events = [e for g in groups for t in g.trajectories for e in t.tool_events]
    assert len(events) == 4 and all(e["ok"] for e in events)
    return most[0]


def test_tool_workers_1_runs_episodes_tools_one_after_another():
    assert _most_at_once(1) == 1
    assert _most_at_once(4) > 1


def test_the_option_reaches_the_episode_config():
    assert EpisodeConfig().tool_workers == 8
    config = resolve(preset="tiny", overrides={"tool_workers": 1})
    assert episode_config(config).tool_workers == 1
