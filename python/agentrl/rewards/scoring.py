"""Batched reward scoring: the tool-use reward of many trajectories in one Rust call.

Rows are dicts in the schema of the golden reward file: ``messages`` (or ``prompt``/``task``
text), ``gt``, ``completion``, and optionally ``tool_events``, ``unfinished``, ``tools`` and
``config`` (per-row overrides of the batch settings). Without ``tool_events`` the
completion's tool calls are parsed and run with the built-in tools first, so raw
completions can be scored standalone.

Scoring runs with the GIL released on ``threads`` threads (default: ``AGENTRL_NUM_THREADS``,
else every core). A process forked after parallel scoring scores on one thread instead of
deadlocking, as the ``tokenizers`` library does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrl import _core
from agentrl.rewards.config import RewardConfig
from agentrl.trajectory import ToolEvent, event_dicts

if TYPE_CHECKING:
    import numpy as np

DETAIL_KEYS: tuple[str, ...] = tuple(_core.reward_detail_keys())
TERM_KEYS: tuple[str, ...] = tuple(_core.reward_term_keys())


@dataclass(frozen=True)
class ScoreResult:
    """Rewards and the detail columns for a batch, as float64 arrays."""

    rewards: np.ndarray
    details: dict[str, np.ndarray]
    # Each term's share of the reward (only when scored with ``explain=True``).
    contributions: dict[str, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.rewards)

    def to_records(self) -> list[dict[str, float]]:
        """One dict per row with every detail key, in the golden file's detail order."""
        columns = [self.details[key].tolist() for key in DETAIL_KEYS]
        return [dict(zip(DETAIL_KEYS, row, strict=True)) for row in zip(*columns, strict=True)]

    def explain(self, index: int) -> list[tuple[str, float]]:
        """The terms that moved row ``index``'s reward, with their signed contributions."""
        if self.contributions is None:
            raise ValueError("scored without explain=True: no contributions to show")
        return [
            (key, float(column[index]))
            for key, column in self.contributions.items()
            if column[index] != 0.0
        ]


def _columns(buffer: bytearray, keys: Sequence[str], n: int) -> dict[str, np.ndarray]:
    """Contiguous columns from the row-major buffer (one transposing copy in numpy)."""
    import numpy as np  # here, not at import: `agentrl score` never needs it

    rows = np.frombuffer(buffer, dtype=np.float64).reshape(n, len(keys))
    columns = np.ascontiguousarray(rows.T)
    return {key: columns[j] for j, key in enumerate(keys)}


def config_dict(config: RewardConfig | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Settings as the Rust core takes them (checked against the known names)."""
    if config is None:
        return None
    if isinstance(config, RewardConfig):
        return config.to_dict()
    return RewardConfig.from_dict(config).to_dict()


JsonLine = str | bytes | bytearray | memoryview


def score_batch(
    records: Iterable[Mapping[str, Any]] | Iterable[JsonLine],
    config: RewardConfig | Mapping[str, Any] | None = None,
    threads: int | None = None,
    *,
    explain: bool = False,
) -> ScoreResult:
    """Score every record with one Rust call (GIL released, rows spread over threads).

    Records are dicts, or JSON lines (``str`` or ``bytes``, one record each), which are
    decoded in Rust with Python's ``json`` semantics so that no dicts are built; a batch is
    all one or all the other. ``config`` defaults to the compatible settings with finished
    schedules; a record's own ``config`` mapping overrides it for that row. Raises
    ``ValueError`` naming the record index for a malformed record, line or setting.
    """
    if threads is not None and (isinstance(threads, bool) or threads < 1):
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    items = records if isinstance(records, list) else list(records)
    if items and isinstance(items[0], str | bytes | bytearray | memoryview):
        lines = [bytes(x) if isinstance(x, bytearray | memoryview) else x for x in items]
        n, details, contributions = _core.reward_score_lines(
            lines, config_dict(config), threads, explain
        )
    else:
        rows = [_plain_row(r) for r in items]
        n, details, contributions = _core.reward_score_batch(
            rows, config_dict(config), threads, explain
        )
    columns = _columns(details, DETAIL_KEYS, n)
    terms = _columns(contributions, TERM_KEYS, n) if contributions is not None else None
    return ScoreResult(rewards=columns["reward"], details=columns, contributions=terms)


_SEQUENCES = (list, tuple)


def _plain_row(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record as the Rust binding reads it: a dict, its `ToolEvent` objects as dicts."""
    row = record if isinstance(record, dict) else dict(record)
    events = row.get("tool_events")
    # A plain loop over a prebuilt tuple of types: this runs once per scored row, and a
    # `list | tuple` union and a generator cost more than the Rust scoring of a short row.
    if isinstance(events, _SEQUENCES):
        for event in events:
            if isinstance(event, ToolEvent):
                return {**row, "tool_events": event_dicts(events)}
    return row


def resolved_threads(threads: int | None = None) -> int:
    """How many threads ``score_batch`` uses for this ``threads`` argument."""
    return int(_core.reward_resolve_threads(threads))


def parallelism_disabled() -> bool:
    """True in a process forked after parallel scoring: it scores on one thread."""
    return bool(_core.reward_parallelism_disabled())
