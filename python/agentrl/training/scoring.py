"""Rewards of whole episodes: the configured reward functions, weighted into one total.

The built-in tool-use reward (``tool_use``, the default) is scored in one batched Rust
call for every batch, whatever the reward functions: its detail columns (tool calls, exact
match, format) feed the dashboards and the evaluation. Its warm-up schedules (format
penalty, reward caps) follow the training step, so the step is written into the config
for every call.

Reward functions follow the keyword convention of :mod:`agentrl.rewards.functions` and are
called with, one entry per episode: ``prompts`` (the prompt messages), ``completions``
(the final assistant text), ``answers`` (the ground truth), ``trajectories`` (the whole
episodes, :class:`agentrl.trajectory.Trajectory`), ``completion_ids`` (the generated
tokens), ``reward_config`` and every other column of the data record (``None`` where a
record lacks it). :func:`agentrl.rewards.combine` weights them, leaving ``None`` out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from agentrl.observability import mean_details
from agentrl.rewards import (
    CombinedReward,
    RewardConfig,
    RewardFunction,
    ToolUseReward,
    combine,
    episode_record,
    reward_functions,
    score_batch,
)
from agentrl.trajectory import Trajectory

# The keyword arguments every reward function receives; a data column of the same name
# is not passed (these win).
RESERVED_ARGUMENTS = frozenset(
    ("prompts", "completions", "answers", "trajectories", "completion_ids", "reward_config")
)


@dataclass
class Scores:
    rewards: torch.Tensor  # [N] float32, one per trajectory: the weighted total
    details: list[dict[str, float]]  # the tool-use reward's detail dict per trajectory
    means: dict[str, float]  # batch mean of every detail
    # Per reward function (when others than the default are configured): mean, std and
    # the fraction of episodes it returned None for.
    functions: dict[str, float] = field(default_factory=dict)
    # Per trajectory, the weighted reward of each assistant turn (summing to ``rewards``),
    # when a reward function or the environment scored turns; None when none did.
    turn_rewards: list[list[float]] | None = None
    # Per trajectory, the reward terms its dump record shows: each reward function's value
    # (None where it did not apply), with the tool-use reward's details only when that
    # reward is one of them; None for the built-in reward alone (``details`` then).
    terms: list[dict[str, float | None]] | None = None

    def dump_terms(self) -> list[dict[str, Any]]:
        """The reward terms of every trajectory, for rollout dumps and the viewer."""
        return list(self.terms) if self.terms is not None else list(self.details)


def reward_set(
    functions: Sequence[str | RewardFunction] | str | None = None,
    weights: Sequence[float] | None = None,
) -> CombinedReward:
    """The run's reward: ``functions`` (names, import paths or callables) with ``weights``;
    none given means the built-in ``tool_use`` alone."""
    chosen = reward_functions(functions) if functions else reward_functions("tool_use")
    return combine(chosen, weights)


def is_default(rewards: CombinedReward | None) -> bool:
    """Whether ``rewards`` is the built-in tool-use reward alone, at weight 1."""
    if rewards is None:
        return True
    only = len(rewards.functions) == 1 and isinstance(rewards.functions[0], ToolUseReward)
    return only and float(rewards.weights[0]) == 1.0


def reward_arguments(
    trajectories: Sequence[Trajectory], config: RewardConfig
) -> tuple[list[Any], list[str], list[Any], dict[str, list[Any]]]:
    """(prompts, completions, answers, other keyword arguments) for the reward functions."""
    prompts = [t.messages for t in trajectories]
    completions = [t.turn_outputs[-1] if t.turn_outputs else t.completion for t in trajectories]
    answers = [list(t.gt) for t in trajectories]
    names: dict[str, None] = {}
    for t in trajectories:
        names.update(dict.fromkeys(k for k in t.columns if k not in RESERVED_ARGUMENTS))
    extra: dict[str, list[Any]] = {k: [t.columns.get(k) for t in trajectories] for k in names}
    extra["trajectories"] = list(trajectories)
    extra["completion_ids"] = [
        [i for i, m in zip(t.response_ids, t.response_mask, strict=True) if m == 1]
        for t in trajectories
    ]
    extra["reward_config"] = config
    return prompts, completions, answers, extra


def score_trajectories(
    trajectories: Sequence[Trajectory],
    config: RewardConfig,
    step: int | None,
    rewards: CombinedReward | None = None,
) -> Scores:
    """Rewards and details of every trajectory, with the schedules at ``step``.

    ``step=None`` scores with the schedules finished (their final penalties and caps).
    ``rewards`` defaults to the built-in tool-use reward alone.
    """
    at_step = config.with_overrides(current_step=step)
    result = score_batch([episode_record(t) for t in trajectories], at_step)
    details = result.to_records()
    if not trajectories:  # nothing to weigh: the scorer's empty result as it is
        empty = torch.tensor(result.rewards, dtype=torch.float32)
        return Scores(empty, details, mean_details(details))
    tool_use = result.rewards.tolist()

    def scored_tool_use(**_: Any) -> list[float]:
        return tool_use

    scored_tool_use.__name__ = "tool_use"
    chosen = rewards if rewards is not None else reward_set()
    functions = [scored_tool_use if isinstance(f, ToolUseReward) else f for f in chosen.functions]
    combined = combine(functions, chosen.weights.tolist())
    if all(f is scored_tool_use for f in functions):  # nothing reads the arguments
        n = len(trajectories)
        totals = combined([None] * n, [""] * n, [None] * n)
    else:
        prompts, completions, answers, extra = reward_arguments(trajectories, at_step)
        totals = combined(prompts, completions, answers, **extra)
    values = torch.tensor(totals.totals, dtype=torch.float32)
    turns = None
    if totals.turns:
        turns = totals.turn_totals([t.num_turns for t in trajectories])
    per_function: dict[str, float] = {}
    if not is_default(rewards):
        for name in combined.names:
            per_function[f"{name}/mean"] = totals.metrics[f"{name}_mean"]
            per_function[f"{name}/std"] = totals.metrics[f"{name}_std"]
            per_function[f"{name}/none_frac"] = 1.0 - totals.metrics[f"{name}_coverage"]
        per_function.update(detail_means(totals.details))
    scores = Scores(values, details, mean_details(details), per_function, turns)
    if not is_default(rewards):
        columns = {**totals.columns, **totals.details}
        scores.terms = _function_terms(columns, details, "tool_use" in combined.names)
    return scores


def detail_means(details: dict[str, Any]) -> dict[str, float]:
    """``<function>/<detail>/mean`` and ``/std`` of every detail column a reward function
    returned (`agentrl.rewards.DetailedRewards`), over the episodes it applied to (a column
    that applied to none is left out)."""
    out: dict[str, float] = {}
    for key, column in details.items():
        applied = column[np.isfinite(column)]
        if applied.size:
            out[f"{key}/mean"] = float(applied.mean())
            out[f"{key}/std"] = float(applied.std())
    return out


def _function_terms(
    columns: dict[str, Any], details: list[dict[str, float]], builtin: bool
) -> list[dict[str, float | None]]:
    out: list[dict[str, float | None]] = []
    for i, detail in enumerate(details):
        row: dict[str, float | None] = dict(detail) if builtin else {}
        for name, values in columns.items():
            value = float(values[i])
            row[name] = None if value != value else value  # NaN: did not apply
        out.append(row)
    return out


__all__ = [
    "RESERVED_ARGUMENTS",
    "Scores",
    "detail_means",
    "is_default",
    "reward_arguments",
    "reward_set",
    "score_trajectories",
]
