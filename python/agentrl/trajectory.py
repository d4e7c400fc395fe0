"""The data contract between rollout and training.

A `Trajectory` is one episode of one prompt; a `RolloutGroup` is the G episodes of one
prompt, produced by one policy version. The trainer packs groups into tensors
(`agentrl.rl.pack`), so the alignment rules below are checked where trajectories are made
and again where they are packed.

Alignment invariants of a trajectory (`check_alignment`):
- ``response_ids``, ``response_mask``, ``response_logps`` and ``response_versions`` have the
  same length;
- generated tokens have mask 1, a real behaviour log-prob (<= 0) and the policy version
  that sampled them (>= 0);
- observation tokens (tool responses and template glue added by the environment) have
  mask 0, log-prob 0.0 and version -1.

A `ToolEvent` is one executed tool call of an episode, in the shape the reward reads.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

_EVENT_KEYS = ("ok", "name", "args", "result", "canonical")


@dataclass(frozen=True, slots=True, eq=False)
class ToolEvent(Mapping[str, Any]):
    """One executed tool call: ``ok``, the tool ``name``, the decoded ``args``, the
    ``result`` (``{"error": text}`` for a failed call) and ``canonical`` (a well-formed
    tagged JSON call, as the reward counts it).

    It also reads like the dict events used to be (``event["ok"]``,
    ``event.get("name")``, ``dict(event)``, ``==`` a dict with the same items), so reward
    functions and environments written for dicts keep working; it cannot be changed.
    :meth:`to_dict` (or :func:`event_dicts`) gives the plain dict for JSON.
    """

    ok: bool
    name: str
    args: dict[str, Any]
    result: Any
    canonical: bool = False

    def __getitem__(self, key: str) -> Any:
        if key not in _EVENT_KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(_EVENT_KEYS)

    def __len__(self) -> int:
        return len(_EVENT_KEYS)

    @property
    def error(self) -> str | None:
        """A failed call's error text (None for a call that succeeded)."""
        if self.ok:
            return None
        result = self.result
        return str(result.get("error") if isinstance(result, Mapping) else result)

    def to_dict(self) -> dict[str, Any]:
        """The event as the plain dict of the golden event files and the reward records."""
        return {
            "ok": self.ok,
            "name": self.name,
            "args": self.args,
            "result": self.result,
            "canonical": self.canonical,
        }

    @classmethod
    def of(cls, event: ToolEvent | Mapping[str, Any]) -> ToolEvent:
        """``event`` itself, or the event a dict with the same keys describes (a trajectory
        built by hand, a dumped record read back); missing keys read as a failed call."""
        if isinstance(event, ToolEvent):
            return event
        args = event.get("args")
        return cls(
            ok=bool(event.get("ok")),
            name=str(event.get("name") or ""),
            args=dict(args) if isinstance(args, Mapping) else {},
            result=event.get("result"),
            canonical=bool(event.get("canonical")),
        )


def event_dicts(events: Iterable[ToolEvent | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Events as plain dicts, where they leave agentrl: JSON files and the Rust reward.

    Dicts (a hand-built trajectory's) pass through unchanged, so the reward sees exactly
    what it was given.
    """
    return [e.to_dict() if isinstance(e, ToolEvent) else e for e in events]  # type: ignore[misc]


@dataclass
class Trajectory:
    prompt: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    gt: list[Any]
    completion: str
    context: str
    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    response_logps: list[float] = field(default_factory=list)
    response_versions: list[int] = field(default_factory=list)
    turn_outputs: list[str] = field(default_factory=list)
    # The executed calls (dicts given by hand are read with `ToolEvent.of`).
    tool_events: list[ToolEvent] = field(default_factory=list)
    # Per tool event: the assistant turn that made the call and the wall time of that turn's
    # calls (the calls of one turn run together), for rollout dumps and the episode view.
    tool_turns: list[int] = field(default_factory=list)
    tool_seconds: list[float] = field(default_factory=list)
    unfinished: bool = False
    policy_version: int = 0
    data_index: int = -1
    rollout_time: float = 0.0
    # Token counts and per-turn timings, for statistics only.
    stats: dict[str, float] = field(default_factory=dict)
    # The whole episode as chat messages: the prompt, assistant turns and tool results.
    conversation: list[dict[str, Any]] = field(default_factory=list)
    # The data record's other columns (``answer``, ``id``, any custom field), for rewards.
    columns: dict[str, Any] = field(default_factory=dict)
    # The episode environment's own reward (None: no environment, or it gives none).
    env_reward: float | None = None
    # An `--agent` episode's record: its reward and logged values, its calls with their
    # token counts, its place among the episode's sequences (None: not an agent episode).
    agent: dict[str, Any] | None = None
    # Where each assistant turn starts in ``response_ids`` (empty: not recorded, see
    # :func:`response_turns`), and the environment's reward of each turn (None: none).
    turn_starts: list[int] = field(default_factory=list)
    turn_rewards: list[float | None] | None = None
    # An answer-mode episode's calls, parsed from its one turn and not run (``name``,
    # ``arguments``, ``canonical``; ``parse_error`` for a block that did not parse); an
    # empty list: it made no call. None: the episode's calls were executed (tool_events).
    answer_calls: list[dict[str, Any]] | None = None
    # What reward functions say about the episode, by function name (the judge's score and
    # reasoning, ``notes["judge"]``), kept in rollout dumps and shown by ``agentrl view``.
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def num_turns(self) -> int:
        """Assistant turns of the episode (at least 1 for any trajectory)."""
        return max(len(self.turn_outputs), len(self.turn_starts), 1)

    def check_alignment(self) -> None:
        """Raise ValueError naming the first broken invariant."""
        n = len(self.response_ids)
        lengths = {
            "response_mask": len(self.response_mask),
            "response_logps": len(self.response_logps),
            "response_versions": len(self.response_versions),
        }
        for name, length in lengths.items():
            if length != n:
                raise ValueError(f"{name} has {length} entries, response_ids has {n}")
        for i, (mask, logp, version) in enumerate(
            zip(self.response_mask, self.response_logps, self.response_versions, strict=True)
        ):
            if mask == 1:
                if not (math.isfinite(logp) and logp <= 0.0) or version < 0:
                    raise ValueError(
                        f"generated token {i}: log-prob {logp} and version {version} "
                        "must be a finite log-prob <= 0 and a version >= 0"
                    )
            elif mask == 0:
                if logp != 0.0 or version != -1:
                    raise ValueError(
                        f"observation token {i}: log-prob {logp} and version {version} "
                        "must be 0.0 and -1"
                    )
            else:
                raise ValueError(f"token {i}: mask {mask} is neither 0 nor 1")


def response_turns(traj: Trajectory) -> list[int]:
    """The assistant turn of every response token (observation tokens count with the turn
    they follow). Without ``turn_starts``, each run of generated tokens is one turn."""
    n = len(traj.response_ids)
    starts = list(traj.turn_starts)
    if not starts:
        mask = traj.response_mask
        starts = [i for i, m in enumerate(mask) if m == 1 and (i == 0 or mask[i - 1] != 1)]
    out = [0] * n
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else n
        for i in range(max(start, 0), min(end, n)):
            out[i] = k
    return out


@dataclass
class RolloutGroup:
    prompt: str
    data_index: int
    policy_version: int
    trajectories: list[Trajectory]
    created_at: float
    # Trajectories of the complete group (None: the run's G). An `--agent` group holds one
    # per sequence of its episodes that finished, which can be more or fewer than G.
    size: int | None = None


class PolicyVersion:
    """A version counter shared by the trainer and rollout threads."""

    def __init__(self, initial: int = 0) -> None:
        self._value = int(initial)
        self._lock = threading.Lock()

    def get(self) -> int:
        with self._lock:
            return self._value

    def bump(self) -> int:
        with self._lock:
            self._value += 1
            return self._value

    def set(self, value: int) -> None:
        with self._lock:
            self._value = int(value)
