"""Reward functions with the GRPO calling convention, and how to combine them.

A reward function is called with keyword arguments only, ``fn(prompts=..., completions=...,
answers=..., **extra)``, with one entry per completion in each list, and returns one float
per completion, ``None`` for a completion it does not apply to (or ``None`` for the whole
batch); or, for a multi-turn episode, a list with one value (or ``None``) per assistant
turn: a per-turn reward, whose sum is the episode's (see :meth:`CombinedRewards.turn_totals`).
Two conventions are served at once:

* the TRL one: ``answers`` (the ground truth, a list of expected answers per completion) and
  every data column by its name (``def f(completions, secret, **kwargs)``);
* the one of other GRPO trainers: ``answer`` (one expected answer text per completion:
  the first of its ground truth, ``None`` when it has none; a data column named ``answer``
  wins) and ``types`` (the data column ``types``, ``None`` each when the data has none), as
  in ``def f(prompts, completions, answer, types=None)``.

A function without ``**kwargs`` gets only the arguments it names; one that names an
argument nobody supplies is a :class:`agentrl.errors.UserCodeError` saying which.
:func:`combine` weights and sums several of them, treating ``None`` (and NaN) as missing.
An exception raised by a reward function defined outside agentrl is a
:class:`agentrl.errors.UserCodeError` naming the function and the line that raised.

Built-ins (:data:`BUILTIN_REWARDS`, by name): ``tool_use``, the tool-use reward of whole
episodes (batched in Rust; the trainer's default), ``environment`` (the episode
environment's own reward), ``function_call`` (BFCL's verdict on the calls, with graded
terms: `agentrl.rewards.function_call`), ``reasoning_gym`` (a reasoning-gym generator's own
scorer: `agentrl.rewards.reasoning_gym`), :func:`math_tool_reward` on raw completions, and
the R1-style rewards common in GRPO recipes (`agentrl.rewards.r1`: accuracy, integer
answer, strict and soft format, XML tag count). Any Python function with the same
convention can sit beside them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentrl.errors import UserCodeError, call_user_code, code_location
from agentrl.rewards.config import RewardConfig
from agentrl.rewards.function_call import function_call_reward
from agentrl.rewards.r1 import (
    extract_answer,
    first_answer,
    r1_accuracy_reward,
    r1_int_reward,
    r1_soft_format_reward,
    r1_strict_format_reward,
    r1_xml_count_reward,
)
from agentrl.rewards.reasoning_gym import NAME as REASONING_GYM
from agentrl.rewards.reasoning_gym import reasoning_gym_reward
from agentrl.rewards.scoring import score_batch
from agentrl.rewards.values import DetailedRewards, reward_list, reward_values
from agentrl.utils.imports import load_object, split_list

RewardValues = Sequence[float | None] | None
RewardFunction = Callable[..., RewardValues]


def reward_name(function: RewardFunction) -> str:
    """The name metrics use for a reward function (its ``__name__`` when it has one)."""
    name = getattr(function, "__name__", None) or getattr(function, "name", None)
    return str(name) if name else type(function).__name__


@dataclass(frozen=True)
class CombinedRewards:
    """Weighted totals of several reward functions for one batch."""

    totals: np.ndarray
    # Each function's raw values (NaN where it returned None), by name.
    columns: dict[str, np.ndarray]
    # ``<name>_mean``, ``<name>_std`` (over the values it gave) and ``<name>_coverage``.
    metrics: dict[str, float]
    # The functions that returned per-turn lists: per completion its list (None where that
    # completion got one value), by name; and every function's weight, by name.
    turns: dict[str, list[list[float | None] | None]] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    # The detail columns of functions that returned `DetailedRewards`, as
    # ``<name>/<key>`` (NaN where a detail does not apply).
    details: dict[str, np.ndarray] = field(default_factory=dict)

    def turn_totals(self, turn_counts: Sequence[int]) -> list[list[float]]:
        """The weighted reward of every turn of every completion: a per-turn function's
        values at their turns, a single value at the completion's last turn, so each list
        sums to ``totals``. ``turn_counts``: the completions' numbers of turns."""
        if len(turn_counts) != len(self.totals):
            raise ValueError(f"{len(turn_counts)} turn counts for {len(self.totals)} rewards")
        out = [[0.0] * max(int(k), 1) for k in turn_counts]
        for name, column in self.columns.items():
            weight, lists = self.weights.get(name, 1.0), self.turns.get(name)
            for i, row in enumerate(out):
                values = lists[i] if lists is not None else None
                if values is None:
                    if not np.isnan(column[i]):
                        row[-1] += weight * float(column[i])
                    continue
                if len(values) != len(row):
                    raise UserCodeError(
                        f"reward function {name!r} returned {len(values)} per-turn rewards "
                        f"for completion {i}, an episode of {len(row)} turn(s)"
                    )
                for k, value in enumerate(values):
                    row[k] += 0.0 if value is None else weight * value
        return out


class CombinedReward:
    """Several reward functions with their weights, evaluated together (see :func:`combine`)."""

    def __init__(self, functions: Sequence[RewardFunction], weights: Sequence[float] | None):
        if not functions:
            raise ValueError("at least one reward function is required")
        if weights is not None and len(weights) != len(functions):
            raise ValueError(
                f"got {len(weights)} reward weights for {len(functions)} reward functions"
            )
        self.functions = list(functions)
        self.weights = np.asarray(
            [1.0] * len(functions) if weights is None else list(weights), dtype=np.float64
        )
        if not np.isfinite(self.weights).all():
            raise ValueError(f"reward weights must be finite, got {self.weights.tolist()}")
        self.names = _unique_names([reward_name(f) for f in self.functions])
        self._accepts = [_accepted_arguments(f) for f in self.functions]

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[str],
        answers: Sequence[Any],
        **extra: Any,
    ) -> CombinedRewards:
        n = len(completions)
        if n == 0:
            raise ValueError("at least one completion is required")
        if len(prompts) != n or len(answers) != n:
            raise ValueError(
                f"prompts ({len(prompts)}), completions ({n}) and answers ({len(answers)}) "
                "must have one entry per completion"
            )
        columns: dict[str, np.ndarray] = {}
        metrics: dict[str, float] = {}
        turns: dict[str, list[list[float | None] | None]] = {}
        details: dict[str, np.ndarray] = {}
        arguments = {"prompts": prompts, "completions": completions, "answers": answers}
        arguments.update(extra)
        arguments.setdefault("answer", [first_answer(a) for a in answers])
        arguments.setdefault("types", [None] * n)
        for name, function, accepts in zip(self.names, self.functions, self._accepts, strict=True):
            raw = _call(name, function, accepts, arguments)
            if isinstance(raw, DetailedRewards):
                details.update({f"{name}/{key}": col for key, col in raw.details.items()})
            raw, per_turn = _split_turns(name, raw, n)
            if per_turn is not None:
                turns[name] = per_turn
            values = _as_column(name, raw, n)
            metrics.update(_column_summary(name, values))
            columns[name] = values
        matrix = np.stack(list(columns.values()), axis=1)
        missing = np.isnan(matrix).all(axis=1)
        if missing.any():
            rows = np.flatnonzero(missing)
            raise UserCodeError(
                f"no reward for {len(rows)} of {n} completions (the first: {int(rows[0])}): "
                f"every reward function ({', '.join(map(repr, self.names))}) returned None "
                "for it; at least one must give each completion a number"
            )
        with np.errstate(over="ignore", invalid="ignore"):
            totals = (np.nan_to_num(matrix, nan=0.0) * self.weights).sum(axis=1)
        if not np.isfinite(totals).all():
            row = int(np.flatnonzero(~np.isfinite(totals))[0])
            raise UserCodeError(
                f"the weighted reward of completion {row} is not finite: reward functions "
                f"{', '.join(map(repr, self.names))} with weights {self.weights.tolist()} "
                "overflow"
            )
        weights = dict(zip(self.names, self.weights.tolist(), strict=True))
        return CombinedRewards(totals, columns, metrics, turns, weights, details)


def combine(
    functions: Sequence[RewardFunction], weights: Sequence[float] | None = None
) -> CombinedReward:
    """Weights and sums reward functions; call the result like a reward function.

    ``weights`` defaults to 1.0 each and must have one entry per function. When called, a
    ``None`` value counts as missing (0 in the total, left out of that function's mean,
    std and coverage); a row where every function is missing is a ``UserCodeError``
    naming them (exit 1: the run stops), a value that is not a finite number or None a
    ``RewardValueError`` naming the function.
    """
    return CombinedReward(functions, weights)


def _accepted_arguments(function: RewardFunction) -> tuple[frozenset[str], frozenset[str]] | None:
    """(the keyword names ``function`` takes, those of them it requires); None when it
    takes ``**kwargs`` (it gets every argument) or its signature cannot be read."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    named = [p for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    required = [p.name for p in named if p.default is inspect.Parameter.empty]
    return frozenset(p.name for p in named), frozenset(required)


def _call(
    name: str,
    function: RewardFunction,
    accepts: tuple[frozenset[str], frozenset[str]] | None,
    arguments: dict[str, Any],
) -> RewardValues:
    if accepts is None:
        given = arguments
    else:
        names, required = accepts
        missing = sorted(required - arguments.keys())
        if missing:
            where = code_location(function)
            raise UserCodeError(
                f"reward function {name!r}{f' ({where})' if where else ''} needs "
                f"{', '.join(repr(m) for m in missing)}: neither a reward argument (prompts, "
                "completions, answers, answer, types, trajectories, completion_ids) nor a "
                "column of the data"
            )
        given = {k: v for k, v in arguments.items() if k in names}
    raw = call_user_code(f"reward function {name!r}", function, **given)
    return reward_list(name, raw, len(arguments["completions"]))


def _split_turns(
    name: str, raw: RewardValues, n: int
) -> tuple[RewardValues, list[list[float | None] | None] | None]:
    """(one value per completion, the per-turn lists or None): a completion given a list
    counts as its sum (None when every turn is None)."""
    if raw is None or not any(isinstance(r, list | tuple) for r in raw):
        return raw, None
    if len(raw) != n:
        raise ValueError(f"{name} returned {len(raw)} rewards for {n} completions")
    scalars: list[float | None] = []
    lists: list[list[float | None] | None] = []
    for i, item in enumerate(raw):
        if not isinstance(item, list | tuple):
            scalars.append(item)
            lists.append(None)
            continue
        try:
            values = [None if v is None else float(v) for v in item]
        except (TypeError, ValueError):
            raise UserCodeError(
                f"reward function {name!r} returned {item!r} for completion {i}: per-turn "
                "rewards must be numbers or None"
            ) from None
        if not all(v is None or np.isfinite(v) for v in values):
            raise UserCodeError(
                f"reward function {name!r}: a non-finite per-turn reward for completion {i}"
            )
        given = [v for v in values if v is not None]
        scalars.append(float(sum(given)) if given else None)
        lists.append(values)
    return scalars, lists


def _unique_names(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def _column_summary(name: str, values: np.ndarray) -> dict[str, float]:
    """Mean and spread of one reward over the completions it applied to (None is NaN
    here), and the share it applied to: a reward that rarely applies shows as such."""
    applied = values[~np.isnan(values)]
    if applied.size == 0:
        return {f"{name}_mean": 0.0, f"{name}_std": 0.0, f"{name}_coverage": 0.0}
    with np.errstate(over="ignore", invalid="ignore"):
        mean, spread = float(np.mean(applied)), float(np.std(applied))
    return {
        f"{name}_mean": mean,
        f"{name}_std": spread,
        f"{name}_coverage": applied.size / values.size,
    }


def _as_column(name: str, raw: RewardValues, n: int) -> np.ndarray:
    """One function's rewards, checked (`agentrl.rewards.values`: a bad value names it)."""
    return reward_values(name, raw, n)


# ---------------------------------------------------------------- the tool-use reward


def math_tool_reward(
    prompts: Sequence[Any],
    completions: Sequence[str],
    answers: Sequence[Any],
    *,
    tool_events: Sequence[Sequence[Mapping[str, Any]] | None] | None = None,
    unfinished: Sequence[bool] | None = None,
    reward_config: RewardConfig | Mapping[str, Any] | None = None,
    threads: int | None = None,
    **extra: Any,
) -> list[float]:
    """The built-in tool-use reward, scored in one batched Rust call.

    A prompt is the task text, a rendered chat prompt, or a list of chat messages; an answer
    is the ground truth (a list of expected answers, or one). Without ``tool_events`` the
    completions' tool calls are parsed and run with the built-in tools.
    """
    del extra
    records = []
    for i, (prompt, completion, answer) in enumerate(
        zip(prompts, completions, answers, strict=True)
    ):
        record: dict[str, Any] = {"completion": completion, "gt": answer}
        if isinstance(prompt, str):
            record["prompt"] = prompt
        else:
            record["messages"] = list(prompt)
        if tool_events is not None and tool_events[i] is not None:
            record["tool_events"] = list(tool_events[i])
        if unfinished is not None:
            record["unfinished"] = bool(unfinished[i])
        records.append(record)
    return score_batch(records, reward_config, threads).rewards.tolist()


# ---------------------------------------------------------------- rewards of whole episodes


def episode_record(trajectory: Any) -> dict[str, Any]:
    """The tool-use scorer's row for one episode (the golden reward file's record shape)."""
    return {
        "messages": trajectory.messages,
        "tools": trajectory.tools,
        "gt": list(trajectory.gt),
        "completion": trajectory.completion,
        "tool_events": trajectory.tool_events,
        "unfinished": bool(trajectory.unfinished),
    }


class ToolUseReward:
    """``tool_use``: the built-in tool-use reward of whole episodes, scored in one Rust call.

    Reads ``trajectories`` (the episodes' prompts, completions, tool events and ground
    truth); ``reward_config`` gives the weights and the schedules at the current step.
    """

    def __init__(self) -> None:
        self.__name__ = "tool_use"

    def __call__(
        self,
        *,
        trajectories: Sequence[Any],
        reward_config: RewardConfig | Mapping[str, Any] | None = None,
        **extra: Any,
    ) -> list[float]:
        del extra
        records = [episode_record(t) for t in trajectories]
        return score_batch(records, reward_config).rewards.tolist()


def environment_reward(*, trajectories: Sequence[Any], **extra: Any) -> list[float | None]:
    """``environment``: what each episode's environment returned from ``reward(trajectory)``
    (per turn when it scores turns: ``turn_reward``, or a list from ``reward``); ``None``
    for an episode without one."""
    del extra
    out: list[Any] = []
    for t in trajectories:
        turns = getattr(t, "turn_rewards", None)
        out.append(list(turns) if turns is not None else getattr(t, "env_reward", None))
    return out


TOOL_USE = "tool_use"
ENVIRONMENT = "environment"
environment_reward.__name__ = ENVIRONMENT  # metrics name it as --reward_funcs does

BUILTIN_REWARDS: dict[str, RewardFunction] = {
    TOOL_USE: ToolUseReward(),
    ENVIRONMENT: environment_reward,
    "function_call": function_call_reward,
    "math_tool": math_tool_reward,
    REASONING_GYM: reasoning_gym_reward,
    "r1_accuracy": r1_accuracy_reward,
    "r1_int": r1_int_reward,
    "r1_strict_format": r1_strict_format_reward,
    "r1_soft_format": r1_soft_format_reward,
    "r1_xml_count": r1_xml_count_reward,
}


def reward_functions(specs: str | Sequence[str | RewardFunction]) -> list[RewardFunction]:
    """Reward functions from built-in names, ``pkg.module:function`` paths or callables.

    ``specs`` may be one comma-separated string (the command line's form). An unknown name
    or a path that does not import is a ``ValueError`` naming it.
    """
    items = split_list(specs) if isinstance(specs, str) else list(specs)
    out: list[RewardFunction] = []
    for item in items:
        if not isinstance(item, str):
            if not callable(item):
                raise ValueError(f"reward function {item!r} is not callable")
            out.append(item)
        elif item in BUILTIN_REWARDS:
            out.append(BUILTIN_REWARDS[item])
        elif ":" in item:
            function = load_object(item)
            if not callable(function):
                raise ValueError(f"reward function {item!r} is not callable")
            out.append(function)
        else:
            known = ", ".join(BUILTIN_REWARDS)
            raise ValueError(
                f"unknown reward function {item!r}: a built-in name ({known}) or "
                "'package.module:function'"
            )
    return out


def reward_weights(text: str | Sequence[float] | None) -> list[float] | None:
    """Weights from ``"1.0,0.5"`` or a sequence; None (or an empty string) means all 1.0."""
    if text is None:
        return None
    if isinstance(text, str):
        items = split_list(text)
        if not items:
            return None
        try:
            return [float(item) for item in items]
        except ValueError:
            raise ValueError(f"reward weights {text!r}: expected numbers like 1.0,0.5") from None
    return [float(w) for w in text]


__all__ = [
    "BUILTIN_REWARDS",
    "ENVIRONMENT",
    "TOOL_USE",
    "CombinedReward",
    "CombinedRewards",
    "DetailedRewards",
    "RewardFunction",
    "RewardValues",
    "ToolUseReward",
    "combine",
    "environment_reward",
    "episode_record",
    "extract_answer",
    "math_tool_reward",
    "r1_accuracy_reward",
    "r1_int_reward",
    "r1_soft_format_reward",
    "r1_strict_format_reward",
    "r1_xml_count_reward",
    "reward_functions",
    "reward_name",
    "reward_weights",
]
