"""``function_call``: is the completion the call BFCL's checker would accept? Scored in Rust.

Each completion is scored against two data columns: ``tools`` (the offered functions,
OpenAI tool specs or BFCL's bare ``{"name", "description", "parameters"}`` list) and
``ground_truth`` (BFCL's possible-answer form: ``[{name: {argument: [acceptable values]}}]``,
one entry per expected call; ``""`` among the values lets the argument be left out; ``[]``
means the right answer is no call). The calls are read from the text in the run's tool
formats, by the parser the rollout executes calls with. The terms (``TERM_KEYS``):

- ``valid``: 1 exactly when BFCL's AST checker accepts the calls (see
  ``rust/src/funcall/check.rs`` for its rules);
- ``names``, ``arg_names``, ``values``: how much of the answer is right, for a denser signal;
- ``format``: the share of call blocks that were read and name an offered function;

weighted by the ``function_call_*_weight`` reward settings
(:class:`agentrl.rewards.config.RewardConfig`) into ``reward``. ``calls`` counts the calls
read and ``no_call_expected`` marks the records whose answer is no call. A batch is one Rust
call with the GIL released, rows spread over threads; the work is linear in the text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentrl import _core
from agentrl.parsing import tool_format_formats
from agentrl.rewards.config import RewardConfig
from agentrl.rewards.scoring import config_dict
from agentrl.rewards.values import DetailedRewards

DETAIL_KEYS: tuple[str, ...] = tuple(_core.function_call_detail_keys())
TERM_KEYS: tuple[str, ...] = tuple(_core.function_call_term_keys())
# The setting that weighs each term.
WEIGHT_SETTINGS: dict[str, str] = {term: f"function_call_{term}_weight" for term in TERM_KEYS}
NAME = "function_call"


@dataclass(frozen=True)
class FunctionCallScores:
    """The reward and every detail column of a batch, as float64 arrays."""

    rewards: np.ndarray
    details: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.rewards)

    def to_records(self) -> list[dict[str, float]]:
        """One dict per row: ``reward`` and every detail, in ``DETAIL_KEYS`` order."""
        columns = [self.details[key].tolist() for key in DETAIL_KEYS]
        return [dict(zip(DETAIL_KEYS, row, strict=True)) for row in zip(*columns, strict=True)]


def _formats(tool_format: str) -> list[str] | None:
    return None if tool_format == "auto" else list(tool_format_formats(tool_format))


def _columns(n: int, buffer: bytearray) -> dict[str, np.ndarray]:
    rows = np.frombuffer(buffer, dtype=np.float64).reshape(n, len(DETAIL_KEYS))
    columns = np.ascontiguousarray(rows.T)
    return {key: columns[j] for j, key in enumerate(DETAIL_KEYS)}


def score_function_calls(
    records: Iterable[Mapping[str, Any]],
    config: RewardConfig | Mapping[str, Any] | None = None,
    *,
    tool_format: str = "auto",
    threads: int | None = None,
) -> FunctionCallScores:
    """Scores records of ``tools``, ``ground_truth`` and ``completion`` in one Rust call.

    ``tool_format`` is the family whose call format is read (``auto``: every format; see
    `agentrl.parsing.TOOL_FORMATS`). Raises ``ValueError`` naming the record and the field
    for a malformed record.
    """
    if threads is not None and (isinstance(threads, bool) or threads < 1):
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    rows = [r if isinstance(r, dict) else dict(r) for r in records]
    n, buffer = _core.function_call_score_batch(
        rows, config_dict(config), _formats(tool_format), threads
    )
    columns = _columns(n, buffer)
    return FunctionCallScores(rewards=columns["reward"], details=columns)


@dataclass(frozen=True)
class ScoredLines:
    """JSON lines scored: each scored line's output text (None for a blank or skipped
    line), the scored lines' details in order, and ``(index, reason)`` per skipped line."""

    outputs: list[str | None]
    scores: FunctionCallScores
    skipped: list[tuple[int, str]]


def score_function_call_lines(
    lines: Sequence[str | bytes],
    config: RewardConfig | Mapping[str, Any] | None = None,
    *,
    tool_format: str = "auto",
    threads: int | None = None,
    render: bool = True,
) -> ScoredLines:
    """Scores JSON lines (decoded in Rust, no Python objects built); a line that cannot be
    scored is skipped with its reason. An output line is the record with ``reward`` and
    ``details`` added, as ``json.dumps(record, ensure_ascii=False)`` writes it (without
    ``render``, no output lines are made: every entry is None)."""
    outputs, buffer, skipped = _core.function_call_score_lines(
        list(lines), config_dict(config), _formats(tool_format), threads, render
    )
    n = len(buffer) // (8 * len(DETAIL_KEYS))
    columns = _columns(n, buffer)
    return ScoredLines(outputs, FunctionCallScores(columns["reward"], columns), skipped)


def _episode_text(trajectory: Any, completion: str) -> str:
    """Every assistant turn of an episode: the calls of all its turns count."""
    turns = getattr(trajectory, "turn_outputs", None)
    return "\n".join(turns) if turns else completion


class FunctionCallReward:
    """``function_call``: the reward of the module docstring, as a reward function.

    Reads the ``tools`` and ``ground_truth`` columns (a row without ``ground_truth`` gets
    None: the reward does not apply to it; a row without ``tools`` uses its episode's
    tools). Returns the rewards with every detail column (``valid``, the terms, ``calls``,
    and ``no_call_rate``: 1 for no call where none is expected, NaN elsewhere), which the
    trainer reports as ``function_call/<detail>``.
    """

    def __init__(self, tool_format: str = "auto") -> None:
        tool_format_formats(tool_format)  # an unknown name fails here, not mid-run
        self.tool_format = tool_format
        self.__name__ = NAME

    def __call__(
        self,
        *,
        completions: Sequence[str],
        ground_truth: Sequence[Any] | None = None,
        tools: Sequence[Any] | None = None,
        trajectories: Sequence[Any] | None = None,
        reward_config: RewardConfig | Mapping[str, Any] | None = None,
        **extra: Any,
    ) -> DetailedRewards:
        del extra
        n = len(completions)
        truths = list(ground_truth) if ground_truth is not None else [None] * n
        specs = list(tools) if tools is not None else [None] * n
        rows, scored = [], []
        for i, (completion, truth, spec) in enumerate(zip(completions, truths, specs, strict=True)):
            if truth is None:
                continue
            trajectory = trajectories[i] if trajectories is not None else None
            if spec is None and trajectory is not None:
                spec = getattr(trajectory, "tools", None)
            text = _episode_text(trajectory, completion) if trajectory is not None else completion
            rows.append({"tools": spec, "ground_truth": truth, "completion": text})
            scored.append(i)
        values: list[float | None] = [None] * n
        details = {key: np.full(n, np.nan) for key in (*DETAIL_KEYS[1:], "no_call_rate")}
        if rows:
            result = score_function_calls(rows, reward_config, tool_format=self.tool_format)
            index = np.asarray(scored)
            for j, i in enumerate(scored):
                values[i] = float(result.rewards[j])
            for key in DETAIL_KEYS[1:]:
                details[key][index] = result.details[key]
            expects_none = result.details["no_call_expected"] == 1.0
            no_call = (result.details["calls"] == 0.0).astype(np.float64)
            details["no_call_rate"][index[expects_none]] = no_call[expects_none]
        return DetailedRewards(values, details)


function_call_reward = FunctionCallReward()

__all__ = [
    "DETAIL_KEYS",
    "NAME",
    "TERM_KEYS",
    "WEIGHT_SETTINGS",
    "FunctionCallReward",
    "FunctionCallScores",
    "ScoredLines",
    "function_call_reward",
    "score_function_call_lines",
    "score_function_calls",
]
