"""Every entry point of the user's code, fed every kind of Python value and exception.

Reward functions, environments (``__init__``, ``reset``, ``reward``), judge backends, tools,
MCP results and agents return or raise anything hypothesis draws: numbers of every kind
(NaN, infinities, huge ints, numpy and torch scalars and arrays), text, bytes, containers,
odd objects; ``Exception`` subclasses (one whose ``__str__`` fails too), ``SystemExit``,
``KeyboardInterrupt``, ``GeneratorExit``, a ``BaseException`` of the user's own. The
outcome is always the documented one: a value agentrl can use, or a
:class:`agentrl.errors.UserCodeError` (exit 1) that names the function; a tool call or an
agent episode that fails is an error event or a dropped, counted episode. Never an
exception of another class (the command line's exit 70, "a bug in agentrl"), never an
exit that escapes, and nothing lost: every completion, call and episode is accounted for.
A real Ctrl-C (`agentrl.errors.Interrupted`) still stops everything.
"""

from __future__ import annotations

import asyncio
import datetime
import math
import signal
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch
from agentrl.agents.recorder import Limits
from agentrl.agents.runner import NO_REWARD, RAISED, AgentRunner
from agentrl.agents.server import EndpointServer
from agentrl.envs import EnvironmentTools
from agentrl.errors import Interrupted, UsageError, UserCodeError, UserError, interrupt
from agentrl.rewards import combine
from agentrl.rewards.judge import JudgeReward
from agentrl.rollout.sampling import SamplingParams
from agentrl.tools import Tool, ToolRegistry
from agentrl.tools.mcp import _result_value
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.models import tiny_tokenizer


class BrokenStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("this exception cannot be printed")


class OwnBase(BaseException):
    """A BaseException of the user's own."""


class BadFloat:
    def __float__(self) -> float:
        raise ZeroDivisionError("no float here")


RAISES: list[Callable[[], BaseException]] = [
    lambda: ValueError("bad value"),
    lambda: RuntimeError("two\nlines"),
    lambda: Exception(),
    lambda: BrokenStr(),
    lambda: SystemExit(0),
    lambda: SystemExit(3),
    lambda: SystemExit("bye"),
    lambda: SystemExit(None),
    lambda: KeyboardInterrupt("its own"),
    lambda: GeneratorExit(),
    lambda: OwnBase("odd"),
    lambda: StopIteration(3),
    lambda: RecursionError("deep"),
    lambda: MemoryError(),
    lambda: OSError(28, "No space left on device"),
    lambda: UsageError("a usage error raised by user code"),
    lambda: AssertionError(),
]
ODD = [
    object(),
    Ellipsis,
    NotImplemented,
    print,
    int,
    BadFloat(),
    np.float64(0.5),
    np.float32("nan"),
    np.int64(7),
    np.array([1.0, 2.0]),
    np.array(3.0),
    torch.tensor(1.5),
    torch.tensor([1.0, 2.0]),
    datetime.date(2026, 1, 1),
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=12),
    st.binary(max_size=12),
    st.complex_numbers(),
    st.decimals(),
    st.fractions(),
    st.sampled_from(ODD),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=6), st.integers()), inner, max_size=3),
    ),
    max_leaves=8,
)
# What a function does: ("return", value) or ("raise", exception factory).
OUTCOMES = st.one_of(
    st.tuples(st.just("return"), VALUES),
    st.tuples(
        st.just("return"), st.lists(st.one_of(st.none(), st.floats()), min_size=3, max_size=3)
    ),
    st.tuples(st.just("raise"), st.sampled_from(RAISES)),
)
FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def act(outcome: tuple[str, Any]) -> Any:
    kind, what = outcome
    if kind == "raise":
        raise what()
    return what


@pytest.fixture(autouse=True)
def cli_sigint() -> Iterator[None]:
    """SIGINT as the command line handles it: a real Ctrl-C raises `Interrupted`, so a
    KeyboardInterrupt that user code raises is that code's error."""
    before = signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def assert_user_error_names(exc: UserCodeError, name: str) -> None:
    message = str(exc)
    assert isinstance(exc, UserError) and exc.exit_code == 1
    assert name in message and "\n" not in message, message


# ------------------------------------------------------------------ reward functions

PROMPTS, COMPLETIONS, ANSWERS = ["a", "b", "c"], ["1", "2", "3"], [["1"], ["2"], ["3"]]


@FUZZ
@given(outcome=OUTCOMES)
def test_a_reward_function_gives_rewards_or_a_user_code_error(outcome) -> None:
    def my_reward(completions, **kwargs):
        return act(outcome)

    try:
        result = combine([my_reward])(PROMPTS, COMPLETIONS, ANSWERS)
    except UserCodeError as exc:
        assert_user_error_names(exc, "'my_reward'")
        return
    assert outcome[0] == "return" and len(result.totals) == 3  # every completion scored
    assert np.isfinite(result.totals).all()
    values = list(outcome[1])
    if all(isinstance(v, float | None) for v in values):
        assert result.totals.tolist() == [0.0 if v is None else v for v in values]


def test_a_real_ctrl_c_in_a_reward_function_is_not_its_error() -> None:
    def my_reward(completions, **kwargs):
        raise Interrupted

    with pytest.raises(Interrupted):
        combine([my_reward])(PROMPTS, COMPLETIONS, ANSWERS)


# ------------------------------------------------------------------ environments


@FUZZ
@given(init=OUTCOMES, reset=OUTCOMES, reward=OUTCOMES)
def test_an_environment_gives_episodes_or_a_user_code_error(init, reset, reward) -> None:
    class FuzzEnv:
        def __init__(self) -> None:
            if init[0] == "raise":
                act(init)
            self.tools: list[Any] = []

        def reset(self, sample: Any) -> Any:
            return act(reset)

        def reward(self, trajectory: Any) -> Any:
            return act(reward)

    try:
        tools = EnvironmentTools(ToolRegistry(), FuzzEnv)
        episode = tools.open_episode({"messages": []})
        value = episode.reward(None)
    except UserCodeError as exc:
        assert_user_error_names(exc, "FuzzEnv")
        return
    assert episode.observation is None or isinstance(episode.observation, str)
    values = value if isinstance(value, list) else [value]
    assert all(v is None or isinstance(v, float) for v in values)


@pytest.mark.parametrize("value", [float("nan"), math.inf, "1.5", b"1", [1.0, "x"]])
def test_an_environment_reward_that_is_no_finite_number_is_its_error(value) -> None:
    class ScoredEnv:
        def __init__(self) -> None:
            self.tools: list[Any] = []

        def reward(self, trajectory: Any) -> Any:
            return value

    episode = EnvironmentTools(ToolRegistry(), ScoredEnv).open_episode({})
    with pytest.raises(UserCodeError, match=r"ScoredEnv.reward\(\) at .* expected a finite"):
        episode.reward(None)


# ------------------------------------------------------------------ judge backends


@FUZZ
@given(outcome=OUTCOMES)
def test_a_judge_backend_gives_scores_or_a_user_code_error(outcome) -> None:
    class MyJudge:
        local = False

        def complete(self, chats: Any, reads: Any) -> Any:
            value = act(outcome)
            return [value] * len(chats) if isinstance(value, str | None) else value

    judge = JudgeReward(backend=MyJudge())
    try:
        scores = judge(prompts=PROMPTS, completions=COMPLETIONS)
    except UserCodeError as exc:
        assert_user_error_names(exc, "MyJudge")
        return
    assert len(scores) == 3 and all(s is None or 0.0 <= s <= 1.0 for s in scores)


# ------------------------------------------------------------------ tools and MCP results


class FakeContent:
    def __init__(self, text: Any) -> None:
        self.text = text


class FakeResult:
    def __init__(self, content: Any, structured: Any, error: bool) -> None:
        self.content, self.structuredContent, self.isError = content, structured, error


def check_event(event: dict[str, Any]) -> None:
    assert isinstance(event["ok"], bool)
    if not event["ok"]:
        assert isinstance(event["result"]["error"], str) and event["result"]["error"]


@FUZZ
@given(outcome=OUTCOMES)
def test_a_tool_gives_a_result_or_an_error_event(outcome) -> None:
    def my_tool() -> Any:
        """Returns or raises anything."""
        return act(outcome)

    registry = ToolRegistry(timeout=5.0, max_result_chars=2000)
    registry.register(Tool("my_tool", my_tool, _spec("my_tool"), isolate=False))
    events = registry.execute_many([{"name": "my_tool", "arguments": {}}] * 2)
    assert len(events) == 2  # nothing lost
    for event in events:
        check_event(event)
        if outcome[0] == "raise":
            assert not event["ok"]


@FUZZ
@given(texts=st.lists(VALUES, max_size=3), structured=VALUES, error=st.booleans())
def test_an_mcp_result_gives_a_result_or_an_error_event(texts, structured, error) -> None:
    result = FakeResult([FakeContent(t) for t in texts], structured, error)
    registry = ToolRegistry(timeout=5.0, max_result_chars=2000)
    spec = _spec("remote")
    registry.register(Tool("remote", lambda args: _result_value(result), spec, raw_args=True))
    event = registry.execute({"name": "remote", "arguments": {}})
    check_event(event)
    assert not (error and event["ok"])


def _spec(name: str) -> dict[str, Any]:
    parameters = {"type": "object", "properties": {}}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


# ------------------------------------------------------------------ agents


class NoEngine:
    """The agents here never call the endpoint: no token is sampled."""

    def __init__(self) -> None:
        self.tokenizer = tiny_tokenizer()
        self.version = 0


@pytest.fixture(scope="module")
def endpoint() -> Iterator[EndpointServer]:
    with EndpointServer("tiny") as server:
        yield server


LIMITS = Limits(SamplingParams(), max_new_tokens=8, max_context_len=256)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(outcome=OUTCOMES, is_async=st.booleans())
def test_an_agent_finishes_or_its_episode_is_dropped_and_counted(
    outcome, is_async, endpoint
) -> None:
    def plain(endpoint: Any, sample: Any) -> Any:
        return act(outcome)

    async def coroutine(endpoint: Any, sample: Any) -> Any:
        await asyncio.sleep(0)
        return act(outcome)

    agent = coroutine if is_async else plain
    runner = AgentRunner(agent, endpoint, NoEngine(), LIMITS, timeout=10.0)
    sample = {"messages": [{"role": "user", "content": "hi"}]}
    batch = runner.run([sample], [0], 2)
    assert len(batch.episodes) == 2  # nothing lost: finished or dropped with a reason
    for ep in batch.episodes:
        if outcome[0] == "raise":
            assert ep.kind == RAISED and ep.error.startswith(f"agent {runner.name} raised")
        elif ep.kind is not None:
            assert ep.kind == NO_REWARD and ep.error
        else:
            assert ep.reward is not None and math.isfinite(ep.reward.reward)
