"""Episode environments: per-episode state, its tools, its reward, always closed.

An environment factory (a class, or any callable with no arguments) makes one object per
episode; nothing is shared between episodes, not even the G episodes of one group. The
object may have:

* ``reset(sample)``: called first with the prompt sample; may return an initial
  observation (text, or anything JSON can write), added to the conversation as a user
  turn;
* ``tools``: a list of callables (usually bound methods, so they act on this episode's
  state), or a method returning one; they join the run's other tools for this episode;
* ``reward(trajectory)``: the episode's own reward, a float or None, called after the
  episode ends and before ``close``; or a list with one float (or None) per assistant
  turn, which makes it a per-turn reward;
* ``turn_reward(turn, text, tool_events)``: the reward of one assistant turn (a float or
  None), called after each turn once its tool calls ran, with the turn's index (from 0),
  its text and the events of its calls (`agentrl.trajectory.ToolEvent`: ``event.name``,
  ``.args``, ``.ok``, ``.result``, also readable as ``event["name"]``), so a turn can be
  scored by its tools' results; with ``reward`` too, the episode's scalar reward
  counts at its last turn;
* ``close()``: called exactly once per object, also when the episode fails.

The tools' schemas are read once, from a probe object made (and closed) when the run is
built, so prompts can show them before any episode starts; every episode's object must
offer the same tools.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentrl.errors import UserCodeError, call_user_code, code_location
from agentrl.tools import Tool, ToolRegistry
from agentrl.trajectory import ToolEvent

EnvironmentFactory = Callable[[], Any]


class EnvironmentContractError(RuntimeError):
    """An environment that breaks its contract (tools that change between episodes)."""


def environment_tools(env: Any) -> list[Any]:
    """The tools an environment object offers (its ``tools`` list or method), maybe none."""
    tools = getattr(env, "tools", None)
    if tools is None:
        return []
    if callable(tools) and not isinstance(tools, list | tuple | Tool):
        tools = tools()
    items = list(tools) if isinstance(tools, list | tuple) else [tools]
    for item in items:
        if not callable(item):
            raise TypeError(f"environment tool {item!r} is not callable")
    return items


def close_environment(env: Any) -> None:
    """Call ``env.close()`` when it has one."""
    close = getattr(env, "close", None)
    if callable(close):
        call_environment(env, "close", close)


def call_environment(env: Any, method: str, function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)``; anything an environment defined outside agentrl raises
    (``SystemExit`` included, see `agentrl.errors.call_user_code`) is a
    :class:`UserCodeError` naming the environment's method and the line that raised."""
    name = env.__name__ if isinstance(env, type) else type(env).__name__
    return call_user_code(f"environment {name}.{method}()", function, *args)


def observation_text(value: Any) -> str | None:
    """An initial observation as message text (None when there is none)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


@dataclass
class OpenEpisode:
    """One episode's environment object, its tool set and its first observation."""

    env: Any
    tools: ToolRegistry
    observation: str | None

    def reward(self, trajectory: Any) -> float | list[float | None] | None:
        """The episode reward: a float, one value per turn (a list), or None."""
        function = getattr(self.env, "reward", None)
        if not callable(function):
            return None
        value = call_environment(self.env, "reward", function, trajectory)
        if isinstance(value, list | tuple):
            return [_reward_value(v, function) for v in value]
        return _reward_value(value, function)

    @property
    def scores_turns(self) -> bool:
        return callable(getattr(self.env, "turn_reward", None))

    def turn_reward(self, turn: int, text: str, events: list[ToolEvent]) -> float | None:
        """The environment's reward of assistant turn ``turn`` (None: no reward method)."""
        function = getattr(self.env, "turn_reward", None)
        if not callable(function):
            return None
        value = call_environment(self.env, "turn_reward", function, turn, text, events)
        return _reward_value(value, function)

    def close(self) -> None:
        close_environment(self.env)


class EnvironmentTools(ToolRegistry):
    """The run's tools plus an environment whose tools are bound to each episode's object.

    Used where a :class:`ToolRegistry` is: it shows the environment's tools in the specs
    (so prompts offer them) and :meth:`open_episode` gives each episode its own object and
    tool set.
    """

    def __init__(self, base: ToolRegistry, factory: EnvironmentFactory) -> None:
        super().__init__(timeout=base.timeout, max_result_chars=base.max_result_chars)
        for name in base:
            item = base.get(name)
            assert item is not None
            self.register(item, visibility=base._visibility[name])
        self.factory = factory
        probe = call_environment(factory, "__init__", factory)
        try:
            tools = environment_tools(probe)
            self.has_reward = callable(getattr(probe, "reward", None)) or callable(
                getattr(probe, "turn_reward", None)
            )
        finally:
            close_environment(probe)
        self.environment_tool_names: list[str] = []
        for fn in tools:
            item = self.register(fn, replace=True)
            item.fn = _outside_episode(item.name)
            self.environment_tool_names.append(item.name)

    def open_episode(self, sample: Mapping[str, Any] | Any) -> OpenEpisode:
        """A new environment object, reset with ``sample``, and its episode's tool set.

        A failure after the object is made closes it before the error propagates.
        """
        env = call_environment(self.factory, "__init__", self.factory)
        try:
            observation = observation_text(_reset(env, sample))
            registry = self.copy()
            names = []
            for fn in environment_tools(env):
                names.append(registry.register(fn, replace=True).name)
            if sorted(names) != sorted(self.environment_tool_names):
                raise EnvironmentContractError(
                    f"this episode's environment offers tools {sorted(names)}, the first one "
                    f"offered {sorted(self.environment_tool_names)}: every episode must offer "
                    "the same tools"
                )
        except BaseException:
            close_environment(env)
            raise
        return OpenEpisode(env, registry, observation)


def _reward_value(value: Any, method: Any) -> float | None:
    """A finite number or None, as a reward function's values (`agentrl.rewards.values`):
    text (``"1.5"`` too), NaN and infinities are the environment's error."""
    if value is None:
        return None
    number = None
    if not isinstance(value, str | bytes):
        try:
            number = float(value)
        except Exception:  # not a number (a __float__ of the user's that fails too)
            number = None
    if number is None or not math.isfinite(number):
        where = code_location(method)
        at = f" at {where}" if where else ""
        raise UserCodeError(
            f"environment {getattr(method, '__qualname__', method)}(){at} returned "
            f"{value!r:.60}: expected a finite number or None"
        )
    return number


def _reset(env: Any, sample: Any) -> Any:
    reset = getattr(env, "reset", None)
    return call_environment(env, "reset", reset, sample) if callable(reset) else None


def _outside_episode(name: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"environment tool {name!r} runs only inside an episode")

    return refuse


__all__ = [
    "EnvironmentContractError",
    "EnvironmentFactory",
    "EnvironmentTools",
    "OpenEpisode",
    "close_environment",
    "environment_tools",
    "observation_text",
]
