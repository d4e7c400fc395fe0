"""OpenEnv environments (the real openenv-core package) train as episode environments, in
this process or served on loopback, and their step rewards are per-turn rewards."""

from __future__ import annotations

import json
import socket
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from agentrl.cli import main as cli_main
from agentrl.envs import EnvironmentTools
from agentrl.envs.openenv import openenv_environment, tool_name
from agentrl.errors import UsageError, UserCodeError, UserError
from agentrl.observability import read_metrics
from agentrl.tools import ToolRegistry

from tests.fakes.runs import example_train_args, write_example_data

pytest.importorskip("openenv.core", reason="pip install 'agentrl[openenv]'")

# An environment as OpenEnv's template writes one: models, an Environment subclass, an app.
GUESS_ENV = '''
from uuid import uuid4

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class GuessAction(Action):
    """Guess the secret number."""

    number: int = Field(..., description="your guess")


class GuessObservation(Observation):
    hint: str = Field(default="", description="higher, lower or right")


class GuessEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self):
        self._state = State(episode_id=str(uuid4()), step_count=0)
        self.secret = 0

    def reset(self, seed=None, episode_id=None, **kwargs) -> GuessObservation:
        self.secret = 3 if seed is None else seed % 10
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        return GuessObservation(hint="Guess a number from 0 to 9.", done=False, reward=0.0)

    def step(self, action: GuessAction) -> GuessObservation:
        self._state.step_count += 1
        if action.number == self.secret:
            return GuessObservation(hint="right", done=True, reward=1.0)
        hint = "higher" if action.number < self.secret else "lower"
        return GuessObservation(hint=hint, done=False, reward=-0.1)

    @property
    def state(self) -> State:
        return self._state


class BrokenReset(GuessEnvironment):
    def reset(self, seed=None, episode_id=None, **kwargs):
        return self.secrett


app = create_app(GuessEnvironment, GuessAction, GuessObservation, max_concurrent_envs=8)
'''


@pytest.fixture
def guess_module(tmp_path, monkeypatch) -> str:
    (tmp_path / "guess_env.py").write_text(textwrap.dedent(GUESS_ENV))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("guess_env", None)
    return "guess_env"


@pytest.fixture
def served(guess_module) -> str:
    """The guessing environment's app served by uvicorn on a free loopback port."""
    import uvicorn
    from guess_env import app

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def _play(tools: EnvironmentTools, seed: int) -> tuple[str | None, list, list]:
    """One episode: two guesses in turn 0, the right one in turn 1, one more after done."""
    episode = tools.open_episode({"messages": [], "seed": seed})
    try:
        guess = episode.tools.get("guess")
        assert guess is not None
        first = [guess(number=0), guess(number=9)]
        rewards = [episode.turn_reward(0, "", [])]
        first.append(guess(number=seed % 10))
        rewards += [episode.turn_reward(1, "", []), episode.turn_reward(2, "", [])]
        with pytest.raises(RuntimeError, match="the episode is over"):
            guess(number=1)
        return episode.observation, first, rewards
    finally:
        episode.close()


@pytest.mark.parametrize("where", ["in_process", "served"])
def test_each_step_is_a_tool_call_and_its_reward_the_turns(where, request) -> None:
    target = (
        f"{request.getfixturevalue('guess_module')}:GuessEnvironment"
        if where == "in_process"
        else request.getfixturevalue("served")
    )
    tools = EnvironmentTools(ToolRegistry(), openenv_environment(f"openenv:{target}"))
    assert tools.has_reward and tools.environment_tool_names == ["guess"]
    spec = tools.specs(["guess"])[0]["function"]
    assert spec["parameters"]["required"] == ["number"]
    assert "metadata" not in spec["parameters"]["properties"]
    observation, results, rewards = _play(tools, seed=15)
    assert json.loads(observation or "") == {"hint": "Guess a number from 0 to 9."}
    assert results == [{"hint": "higher"}, {"hint": "lower"}, {"hint": "right", "done": True}]
    assert rewards == [pytest.approx(-0.2), 1.0, 0.0]


def test_action_classes_name_their_tools() -> None:
    assert tool_name("GuessAction") == "guess" and tool_name("MoveTileAction") == "move_tile"
    assert tool_name("Action") == "step"


def test_an_environment_that_raises_is_one_line_naming_it(guess_module) -> None:
    tools = EnvironmentTools(
        ToolRegistry(), openenv_environment(f"openenv:{guess_module}:BrokenReset")
    )
    with pytest.raises(UserCodeError) as caught:
        tools.open_episode({"messages": []})
    message = str(caught.value)
    assert message.startswith("OpenEnv environment BrokenReset.reset() raised AttributeError at ")
    assert "guess_env.py:" in message and "secrett" in message and "\n" not in message


def test_a_missing_server_or_class_is_one_line_naming_it(guess_module) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(UserError) as caught:
        openenv_environment(f"openenv:http://127.0.0.1:{port}")
    assert f"openenv:http://127.0.0.1:{port}: no OpenEnv server answers there" in str(caught.value)
    with pytest.raises(UsageError) as caught:
        openenv_environment(f"openenv:{guess_module}:GuessAction")
    assert "is not an OpenEnv Environment subclass" in str(caught.value)
    with pytest.raises(ValueError, match="cannot import module 'nowhere'"):
        openenv_environment("openenv:nowhere:Env")


def _prompts(path: Path) -> Path:
    records = [
        {"prompt": "Find the secret number with the guess tool.", "seed": seed} for seed in range(6)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("where", ["in_process", "served", "example"])
def test_an_openenv_environment_trains_from_the_command_line(
    run_files, tmp_path, capsys, monkeypatch, request, where
) -> None:
    if where == "example":  # examples/openenv_walk.py, in this process
        data = write_example_data("openenv_walk", tmp_path / "walk.jsonl", monkeypatch)
        target = "examples.openenv_walk:WalkEnvironment"
    else:
        data = _prompts(tmp_path / "guess.jsonl")
        target = (
            f"{request.getfixturevalue('guess_module')}:GuessEnvironment"
            if where == "in_process"
            else request.getfixturevalue("served")
        )
    args = example_train_args(run_files / "model", data, tmp_path)
    code = cli_main([*args, "--environment", f"openenv:{target}", "--eval_ratio", "0"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "finished: 2/2 steps" in out and "reward: environment x 1" in out
    train = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "train"]
    assert len(train) == 2 and train[0]["reward_fn/environment/none_frac"] == 0.0


def test_without_the_package_the_line_says_how_to_install_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "openenv.core", None)  # import fails as if missing
    with pytest.raises(UserError) as caught:
        openenv_environment("openenv:http://127.0.0.1:8000")
    assert str(caught.value) == (
        "--environment openenv:http://127.0.0.1:8000 needs the openenv-core package: "
        "pip install 'agentrl[openenv]'"
    )
