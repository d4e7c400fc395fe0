"""OpenEnv environments as episode environments: ``--environment openenv:TARGET``.

OpenEnv (PyPI ``openenv-core``) environments are reset/step objects with a typed action
and observation (pydantic models), served over HTTP and WebSocket by ``create_app``.
``TARGET`` is either

* the URL of a server already running (``openenv:http://127.0.0.1:8000``): each episode
  opens its own WebSocket session with ``GenericEnvClient`` (the server's
  ``max_concurrent_envs`` must allow a step's episodes at once); or
* ``pkg.module:MyEnvironment``, an ``openenv.core.Environment`` subclass run in this
  process, one object per episode (its action type is read from ``step``'s annotation).

agentrl reads it as its own environment protocol (`agentrl.envs.environment`):

* ``reset()`` starts the episode (with the record's ``seed`` and ``episode_id`` columns,
  and the keys of a ``reset`` column, when the record has them); the observation's own
  fields (not ``done``, ``reward`` or ``metadata``) are the first user turn, as JSON;
* the action is one tool, named after the action class (``GuessAction``: ``guess``), its
  parameters the action's fields (the schema OpenEnv publishes, without ``metadata``);
  a call is one ``step``, and the policy sees the observation's own fields, with
  ``"done": true`` once the environment says the episode is over (later calls fail);
* each step's reward is its turn's reward (``turn_reward``: the sum of the rewards of the
  steps the turn made; 0 for a turn that made none, which earned nothing), so it reaches
  per-turn credit (docs/turn-credit.md); the episode's reward is their sum;
* ``close()`` ends the session (or calls the environment's ``close``).

An exception in an in-process environment's ``__init__`` or ``reset`` stops the run with
one line naming it and the line that raised; one in ``step`` is a failed call the policy
sees, as for any tool. A server that does not answer is one line naming its URL.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any

from agentrl.errors import UsageError, UserError, call_user_code, first_line
from agentrl.tools import Tool
from agentrl.utils.imports import load_object

SCHEME = "openenv:"
INSTALL = "pip install 'agentrl[openenv]'"
# Observation fields the policy is not shown: the reward signal and OpenEnv's bookkeeping.
HIDDEN_FIELDS = ("done", "reward", "metadata")
# The record columns a reset takes as they are (OpenEnv's ResetRequest fields).
RESET_COLUMNS = ("seed", "episode_id")


def is_openenv(path: object) -> bool:
    """Whether an ``--environment`` value names an OpenEnv environment."""
    return isinstance(path, str) and path.startswith(SCHEME)


def _openenv(what: str) -> Any:
    try:
        import openenv.core as core
    except ImportError:
        raise UserError(f"{what} needs the openenv-core package: {INSTALL}") from None
    return core


def tool_name(action_title: str) -> str:
    """The tool an action class becomes: ``GuessAction`` -> ``guess``, ``MoveAction`` ->
    ``move``; ``step`` when nothing is left."""
    base = action_title[: -len("Action")] if action_title.endswith("Action") else action_title
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", base).lower().strip("_")
    return re.sub(r"[^a-z0-9_]", "_", snake) or "step"


def action_spec(schema: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The tool spec of an action's JSON schema (its ``metadata`` field left out)."""
    properties = {k: v for k, v in dict(schema.get("properties") or {}).items() if k != "metadata"}
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    required = [k for k in schema.get("required") or [] if k in properties]
    if required:
        parameters["required"] = required
    if schema.get("$defs"):
        parameters["$defs"] = schema["$defs"]
    title = str(schema.get("title") or name)
    description = str(schema.get("description") or f"Take one {title} in the environment.")
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def shown(observation: Any) -> dict[str, Any]:
    """An observation's own fields, as the policy sees them."""
    if hasattr(observation, "model_dump"):
        observation = observation.model_dump(mode="json")
    return {k: v for k, v in dict(observation or {}).items() if k not in HIDDEN_FIELDS}


def reset_arguments(sample: Any) -> dict[str, Any]:
    """What a record hands to ``reset``: its ``seed``/``episode_id`` columns and the keys
    of its ``reset`` column."""
    get = getattr(sample, "get", None)
    if not callable(get):
        return {}
    out = {k: get(k) for k in RESET_COLUMNS if get(k) is not None}
    extra = get("reset")
    if isinstance(extra, Mapping):
        out.update(extra)
    return out


class _Served:
    """One WebSocket session on a running OpenEnv server."""

    def __init__(self, url: str) -> None:
        core = _openenv(f"--environment openenv:{url}")
        self.url = url
        self.client = core.GenericEnvClient(base_url=url).sync()

    def reset(self, **kwargs: Any) -> tuple[Any, float | None, bool]:
        try:
            result = self.client.reset(**kwargs)
        except Exception as exc:
            raise UserError(
                f"OpenEnv server {self.url}: reset failed ({type(exc).__name__}: {first_line(exc)})"
            ) from None
        return result.observation, result.reward, bool(result.done)

    def step(self, action: dict[str, Any]) -> tuple[Any, float | None, bool]:
        result = self.client.step(action)
        return result.observation, result.reward, bool(result.done)

    def close(self) -> None:
        self.client.close()


class _InProcess:
    """One object of an OpenEnv ``Environment`` subclass, in this process."""

    def __init__(self, cls: type, action: type) -> None:
        self.name = cls.__name__
        self.action = action
        self.env = call_user_code(f"OpenEnv environment {self.name}()", cls)

    def reset(self, **kwargs: Any) -> tuple[Any, float | None, bool]:
        what = f"OpenEnv environment {self.name}.reset()"
        observation = call_user_code(what, self.env.reset, **kwargs)
        return observation, observation.reward, bool(observation.done)

    def step(self, action: dict[str, Any]) -> tuple[Any, float | None, bool]:
        observation = self.env.step(self.action(**action))
        return observation, observation.reward, bool(observation.done)

    def close(self) -> None:
        call_user_code(f"OpenEnv environment {self.name}.close()", self.env.close)


class OpenEnvEpisode:
    """One episode of an OpenEnv environment, in agentrl's environment protocol."""

    def __init__(self, session: Callable[[], Any], spec: dict[str, Any]) -> None:
        self._session_factory = session
        self._session: Any = None
        self._spec = spec
        self._rewards: list[float | None] = []
        self.done = False

    def reset(self, sample: Any) -> str | None:
        self._session = self._session_factory()
        observation, _, self.done = self._session.reset(**reset_arguments(sample))
        fields = shown(observation)
        return json.dumps(fields, ensure_ascii=False, default=str) if fields else None

    @property
    def tools(self) -> list[Tool]:
        name = self._spec["function"]["name"]
        spec = json.loads(json.dumps(self._spec))
        return [Tool(name=name, fn=self._act, spec=spec, isolate=False)]

    def _act(self, **arguments: Any) -> dict[str, Any]:
        if self._session is None:
            raise RuntimeError("the environment has not been reset")
        if self.done:
            raise RuntimeError("the episode is over (the environment said done)")
        observation, reward, self.done = self._session.step(arguments)
        self._rewards.append(None if reward is None else float(reward))
        fields = shown(observation)
        if self.done:
            fields["done"] = True
        return fields

    def turn_reward(self, turn: int, text: str, events: Any) -> float | None:
        """The sum of the rewards of the steps this turn made (0.0 when it made none)."""
        del turn, text, events
        rewards, self._rewards = self._rewards, []
        return float(sum(r for r in rewards if r is not None))

    def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            session.close()


def _action_type(cls: type, target: str) -> type:
    try:
        hints = typing.get_type_hints(cls.step)
    except Exception as exc:
        raise UsageError(
            f"--environment openenv:{target}: cannot read the action type of "
            f"{cls.__name__}.step ({first_line(exc)})"
        ) from None
    action = hints.get("action")
    if not isinstance(action, type) or not hasattr(action, "model_json_schema"):
        raise UsageError(
            f"--environment openenv:{target}: {cls.__name__}.step(self, action: MyAction) must "
            "annotate its action with the environment's Action class"
        )
    return action


def _served_schema(url: str) -> dict[str, Any]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/schema", timeout=10) as reply:
            schema = json.loads(reply.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UserError(
            f"--environment openenv:{url}: no OpenEnv server answers there ({reason}); "
            "start it first (uvicorn server.app:app --port ...)"
        ) from None
    action = schema.get("action") if isinstance(schema, dict) else None
    if not isinstance(action, dict):
        raise UserError(f"--environment openenv:{url}: its /schema has no action schema")
    return action


def openenv_environment(spec: str) -> Callable[[], OpenEnvEpisode]:
    """The episode environment factory of ``openenv:URL`` or ``openenv:pkg.mod:Class``."""
    target = spec[len(SCHEME) :]
    if not target:
        raise UsageError("--environment openenv: name a server URL or pkg.module:Environment")
    core = _openenv(f"--environment {spec}")
    if target.startswith(("http://", "https://")):
        url = target.rstrip("/")
        schema = _served_schema(url)
        action_spec_ = action_spec(schema, tool_name(str(schema.get("title") or "")))
        return lambda: OpenEnvEpisode(lambda: _Served(url), action_spec_)
    cls = load_object(target)
    if not (isinstance(cls, type) and issubclass(cls, core.Environment)):
        raise UsageError(
            f"--environment {spec}: {cls!r} is not an OpenEnv Environment subclass "
            "(openenv.core.Environment)"
        )
    action = _action_type(cls, target)
    in_process_spec = action_spec(action.model_json_schema(), tool_name(action.__name__))
    return lambda: OpenEnvEpisode(lambda: _InProcess(cls, action), in_process_spec)


__all__ = ["SCHEME", "OpenEnvEpisode", "is_openenv", "openenv_environment", "tool_name"]
