"""The user's agent and what it is handed: an endpoint, the data record; what it returns.

An agent is ``fn(endpoint, sample)``, plain or ``async``: the user's own code, unchanged,
pointed at :class:`Endpoint` (an OpenAI-compatible base URL, API key and model name, or
its ready ``openai`` clients). It returns the episode's reward: a number, or a mapping
with ``"reward"`` and any other numbers to log (``agent/<name>`` means per step).
"""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentrl.agents.verifiers_agent import VerifiersAgent
from agentrl.data.verifiers_env import is_verifiers
from agentrl.errors import UsageError
from agentrl.utils.imports import ImportPathError, load_object, require_module

AgentFn = Callable[..., Any]


class Endpoint:
    """Where an agent's chat completions go during its episode.

    ``base_url`` (ends in ``/v1``), ``api_key`` and ``model`` configure any
    OpenAI-compatible client; ``client`` and ``async_client`` are ready ``openai`` clients
    (made on first use; they need the ``openai`` package: ``pip install agentrl[agent]``).
    The URL is this episode's own: every call made through it is recorded as its calls.
    """

    def __init__(self, base_url: str, api_key: str, model: str, timeout: float) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.model = model
        self.timeout = timeout
        self._clients: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"Endpoint(base_url={self.base_url!r}, model={self.model!r})"

    def _openai_client(self, kind: str) -> Any:
        """This episode's ``openai.<kind>`` client, made on first use (no retries: failures
        surface)."""
        if kind not in self._clients:
            openai = require_module(
                "openai",
                ImportError,
                "endpoint.client needs the openai package: pip install 'agentrl[agent]' "
                "(or use endpoint.base_url / api_key / model with any client)",
            )
            self._clients[kind] = getattr(openai, kind)(
                base_url=self.base_url, api_key=self.api_key, max_retries=0, timeout=self.timeout
            )
        return self._clients[kind]

    @property
    def client(self) -> Any:
        """An ``openai.OpenAI`` client for this episode (no retries: failures surface)."""
        return self._openai_client("OpenAI")

    @property
    def async_client(self) -> Any:
        """An ``openai.AsyncOpenAI`` client for this episode."""
        return self._openai_client("AsyncOpenAI")


def load_agent(agent: str | AgentFn) -> AgentFn:
    """The agent function: ``pkg.module:fn`` or a callable taking (endpoint, sample).

    Raises :class:`agentrl.errors.UsageError` (exit 2) naming ``--agent`` when the path
    does not import or the object cannot be called as an agent.
    """
    if is_verifiers(agent):  # a verifiers environment's harness plays the episodes
        return VerifiersAgent(str(agent))
    try:
        fn = load_object(agent) if isinstance(agent, str) else agent
    except ImportPathError as exc:
        raise UsageError(f"--agent {exc}") from None
    if not callable(fn):
        raise UsageError(f"--agent {agent!r}: {fn!r} is not callable")
    try:
        inspect.signature(fn).bind(None, None)
    except TypeError:
        name = getattr(fn, "__qualname__", repr(fn))
        raise UsageError(
            f"--agent {name}: an agent is called as fn(endpoint, sample); its signature "
            f"{inspect.signature(fn)} does not take two arguments"
        ) from None
    except ValueError:  # a builtin without a signature: called as given
        pass
    return fn


def agent_name(fn: AgentFn) -> str:
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}:{getattr(fn, '__qualname__', repr(fn))}"


def is_async_agent(fn: AgentFn) -> bool:
    call = getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


def agent_sample(sample: Any) -> dict[str, Any]:
    """The data record as the agent sees it: ``messages``, ``tools``, ``gt`` and every
    other column of the record (a copy: the agent may change it)."""
    if isinstance(sample, Mapping):
        record = dict(sample)
        columns = record.pop("columns", None) or {}
    else:
        record = {"messages": sample["messages"], "tools": sample["tools"], "gt": sample["gt"]}
        columns = sample["columns"] or {}
    out = {**dict(columns), **record}
    out.setdefault("tools", None)
    out["gt"] = list(out.get("gt") or [])
    return copy.deepcopy(out)


@dataclass(frozen=True)
class AgentReward:
    """An episode's reward and the other numbers its agent returned."""

    reward: float
    values: dict[str, float]


class RewardError(ValueError):
    """An agent's return value that is not a reward."""


def reward_of(value: Any) -> AgentReward:
    """Read an agent's return value: a finite number, or a mapping with ``"reward"``."""
    values: dict[str, float] = {}
    raw = value
    if isinstance(value, Mapping):
        if "reward" not in value:
            keys = sorted(map(str, value))[:8]
            raise RewardError(f"returned a mapping without 'reward' (keys {keys})")
        raw = value["reward"]
        for key, item in value.items():
            number = _finite(item) if isinstance(item, int | float) else None
            if key != "reward" and number is not None:
                values[str(key)] = number
    if raw is None:
        raise RewardError("returned no reward (None)")
    if not isinstance(raw, int | float) and not hasattr(raw, "__float__"):
        raise RewardError(f"returned a {type(raw).__name__}, not a number")
    try:
        reward = float(raw)
    except Exception as exc:  # its own __float__ failed, or an int too large for a float
        raise RewardError(
            f"returned a {type(raw).__name__} that is no number ({exc!r:.80})"
        ) from None
    if not math.isfinite(reward):
        raise RewardError(f"returned a non-finite reward ({reward})")
    return AgentReward(reward, values)


def _finite(item: int | float) -> float | None:
    """``item`` as a finite float; None for NaN, an infinity or an int past float's range."""
    try:
        number = float(item)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


__all__ = [
    "AgentFn",
    "AgentReward",
    "Endpoint",
    "RewardError",
    "agent_name",
    "agent_sample",
    "is_async_agent",
    "load_agent",
    "reward_of",
]
