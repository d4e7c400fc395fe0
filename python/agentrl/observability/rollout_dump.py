"""Rollout dumps: every episode of a step written out whole, to be read by `agentrl view`.

Debugging RL is reading trajectories, so every ``dump_rollouts`` steps the trainer writes one
record per episode of the step to ``<run>/rollouts/step-<step>.jsonl.gz`` (and, at each
evaluation, the eval episodes to ``eval-<step>.jsonl.gz``); `agentrl eval --output FILE`
writes the same record per sample. A record (schema version :data:`SCHEMA_VERSION`):

- ``kind`` ("train" | "eval"), ``step``, ``episode`` (index in the file), ``group`` (the
  episode's group in the step: the G episodes of one prompt share it), ``prompt_index``;
- ``messages``: the whole conversation (prompt, each assistant turn, each tool result);
- ``tool_calls``: per call ``turn``, ``name``, ``arguments``, ``ok``, ``result`` or
  ``error``, ``seconds`` (wall time of that turn's calls, which run together);
- ``tokens``: ``prompt``, ``generated``, ``observation``;
- ``reward`` and ``reward_terms`` (every detail the scorer returned for the episode);
- ``advantage`` (train only), ``policy_version`` (that sampled the episode),
  ``trainer_version`` and ``staleness`` (versions between the two), ``finish_reason``
  (``answered``, ``turn_limit`` or ``token_limit``), ``turns``, ``seconds``, ``gt``;
- eval records also carry ``passed`` (exact match).
- ``token_view`` (what the trainer saw of each token; eval: behaviour log-probs only),
  ``logp_gap_max``/``logp_gap_mean`` (train), and on a dump's first record ``vocab``: see
  `agentrl.observability.token_view`; ``turn_rewards``/``turn_advantages`` when the step
  scored turns or used a per-turn advantage mode (docs/turn-credit.md).
- ``notes`` (when any): what reward functions said about the episode, by name (the
  ``judge`` reward's score and reasoning).
- ``answer_calls`` (an answer-mode episode, ``--call_mode answer``): the calls its turn
  made, recorded and not run (``name``, ``arguments``; an empty list: no call).
- an ``--agent`` episode (`agentrl.agents`) carries ``agent``: its reward and returned
  values, each chat completion call with its token counts (``prompt_tokens``,
  ``added_tokens``, ``completion_tokens``) and which call it continues, and the place of
  this sequence among the episode's; a dropped episode's record has ``reward`` null,
  ``finish_reason`` ``dropped`` and its ``error``.

Non-finite numbers are written as null so every line is valid JSON. Under data parallel
training the reporting process dumps its own share of the batch.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentrl.errors import UserError
from agentrl.tools.registry import tool_message
from agentrl.trajectory import ToolEvent, Trajectory
from agentrl.utils.atomic import atomic_file

SCHEMA_VERSION = 1
DUMP_DIR = "rollouts"
FINISH_REASONS = ("answered", "turn_limit", "token_limit")
_STEP_FILE = re.compile(r"^(step|eval)-(\d+)\.jsonl\.gz$")


def clean_json(value: Any) -> Any:
    """``value`` with non-finite floats as None and anything unknown as its text."""
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    if hasattr(value, "item"):
        return clean_json(value.item())
    return str(value)


def finish_reason(traj: Trajectory, max_turns: int) -> str:
    """Why the episode ended: with an answer (a turn without tool calls), or cut off by the
    turn limit or the token budget while it was still calling tools."""
    if not traj.unfinished:
        return "answered"
    return "turn_limit" if len(traj.turn_outputs) >= max_turns else "token_limit"


def tool_calls(traj: Trajectory) -> list[dict[str, Any]]:
    """One entry per executed call, in order, with its turn, result or error and time."""
    out = []
    for i, event in enumerate(map(ToolEvent.of, traj.tool_events)):
        call: dict[str, Any] = {
            "turn": traj.tool_turns[i] if i < len(traj.tool_turns) else None,
            "name": event.name,
            "arguments": event.args,
            "ok": event.ok,
            "seconds": traj.tool_seconds[i] if i < len(traj.tool_seconds) else None,
        }
        if event.ok:
            call["result"] = event.result
        else:
            call["error"] = event.error
        out.append(call)
    return out


def conversation(traj: Trajectory, calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The prompt messages, then each assistant turn followed by the results of its calls."""
    messages = [dict(m) for m in traj.messages]
    by_turn: dict[int | None, list[Mapping[str, Any]]] = {}
    for call in calls:
        by_turn.setdefault(call["turn"], []).append(call)
    for turn, text in enumerate(traj.turn_outputs):
        made = by_turn.pop(turn, [])
        messages.append({"role": "assistant", "content": text, "tool_calls": len(made)})
        messages.extend(_tool_message(call) for call in made)
    for made in by_turn.values():  # calls whose turn is unknown: after every turn
        messages.extend(_tool_message(call) for call in made)
    return messages


def _tool_message(call: Mapping[str, Any]) -> dict[str, Any]:
    body = call["result"] if call["ok"] else {"error": call["error"]}
    # The text the model was shown (compact JSON, as the rollout writes it; a string result
    # in quotes), uncut: the rollout cuts it to its --tool_result_chars.
    text = tool_message(body, 0)
    return {"role": "tool", "name": call["name"], "content": text, "ok": call["ok"]}


def episode_record(
    traj: Trajectory,
    *,
    kind: str,
    step: int,
    episode: int,
    group: int,
    reward: float,
    terms: Mapping[str, Any],
    max_turns: int,
    advantage: float | None = None,
    trainer_version: int | None = None,
) -> dict[str, Any]:
    """The dump record of one episode (see the module docstring for the fields)."""
    calls = tool_calls(traj)
    generated = sum(traj.response_mask)
    record: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "kind": kind,
        "step": int(step),
        "episode": int(episode),
        "group": int(group),
        "prompt_index": int(traj.data_index),
        "messages": conversation(traj, calls),
        "tool_calls": calls,
        "tokens": {
            "prompt": len(traj.prompt_ids),
            "generated": int(generated),
            "observation": len(traj.response_ids) - int(generated),
        },
        "reward": float(reward),
        "reward_terms": dict(terms),
        "advantage": None if advantage is None else float(advantage),
        "policy_version": int(traj.policy_version),
        "trainer_version": trainer_version,
        "staleness": None if trainer_version is None else trainer_version - traj.policy_version,
        "finish_reason": finish_reason(traj, max_turns),
        "turns": len(traj.turn_outputs),
        "seconds": float(traj.rollout_time),
        "gt": list(traj.gt),
    }
    if kind == "eval":
        record["passed"] = float(terms.get("exact_match", 0.0) or 0.0) > 0.5
    if traj.notes:  # what reward functions said about it (the judge's reasoning)
        record["notes"] = dict(traj.notes)
    if traj.answer_calls is not None:  # the calls were the answer: recorded, not run
        record["answer_calls"] = [dict(call) for call in traj.answer_calls]
    if traj.agent is not None:  # an --agent episode: the messages its calls sent and got
        record["messages"] = [dict(m) for m in traj.conversation]
        record["agent"] = dict(traj.agent)
    return clean_json(record)


def episode_records(
    trajectories: Sequence[Trajectory],
    *,
    kind: str,
    step: int,
    groups: Sequence[int],
    rewards: Sequence[float],
    details: Sequence[Mapping[str, Any]],
    max_turns: int,
    advantages: Sequence[float] | None = None,
    trainer_version: int | None = None,
) -> list[dict[str, Any]]:
    """Records of a batch of episodes; the sequences are aligned with ``trajectories``."""
    n = len(trajectories)
    for name, seq in (("groups", groups), ("rewards", rewards), ("details", details)):
        if len(seq) != n:
            raise ValueError(f"{len(seq)} {name} for {n} episodes")
    if advantages is not None and len(advantages) != n:
        raise ValueError(f"{len(advantages)} advantages for {n} episodes")
    return [
        episode_record(
            traj,
            kind=kind,
            step=step,
            episode=i,
            group=int(groups[i]),
            reward=float(rewards[i]),
            terms=details[i],
            max_turns=max_turns,
            advantage=None if advantages is None else float(advantages[i]),
            trainer_version=trainer_version,
        )
        for i, traj in enumerate(trajectories)
    ]


def write_records(path: str | os.PathLike[str], records: Iterable[Mapping[str, Any]]) -> Path:
    """JSON lines, gzip-compressed when the name ends in ``.gz``; written whole, then moved
    into place, so a reader never sees half a file."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if out.name.endswith(".gz") else open
    with atomic_file(out) as tmp, opener(tmp, "wt", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(clean_json(record), ensure_ascii=False) + "\n")
    return out


class DumpError(UserError, ValueError):
    """A dump file that cannot be read back: its message names the file and the line."""


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every record of a dump file (gzip or plain JSON lines); a bad line is a DumpError."""
    p = Path(path)
    opener = gzip.open if p.name.endswith(".gz") else open
    records = []
    try:
        with opener(p, "rb") as handle:
            for number, raw in enumerate(handle, 1):
                if not raw.strip():
                    continue
                try:
                    record = json.loads(raw.decode("utf-8"))
                except (ValueError, RecursionError) as exc:  # bad UTF-8 or JSON, too deep
                    raise DumpError(f"{p}:{number}: not JSON ({exc})") from None
                if not isinstance(record, dict):
                    raise DumpError(f"{p}:{number}: a record must be a JSON object")
                records.append(record)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DumpError(f"{p}: not a readable gzip file ({exc})") from exc
    return records


def dump_path(run_dir: str | os.PathLike[str], kind: str, step: int) -> Path:
    prefix = "eval" if kind == "eval" else "step"
    return Path(run_dir) / DUMP_DIR / f"{prefix}-{int(step):06d}.jsonl.gz"


def dump_files(run_dir: str | os.PathLike[str]) -> list[Path]:
    """The run's dump files, train then eval, each by step."""
    folder = Path(run_dir) / DUMP_DIR
    if not folder.is_dir():
        return []
    found = [
        (m.group(1), int(m.group(2)), p)
        for p in folder.iterdir()
        if (m := _STEP_FILE.match(p.name))
    ]
    return [p for _, _, p in sorted(found, key=lambda item: (item[0] != "step", item[1]))]


class RolloutDumper:
    """Writes a step's episodes every ``interval`` steps (0: never) and every evaluation's
    episodes when dumps are on."""

    def __init__(self, run_dir: str | os.PathLike[str], interval: int, max_turns: int) -> None:
        self.run_dir = Path(run_dir)
        self.interval = int(interval)
        self.max_turns = int(max_turns)

    def due(self, step: int) -> bool:
        return self.interval > 0 and step % self.interval == 0

    def write(self, kind: str, step: int, records: Sequence[Mapping[str, Any]]) -> Path:
        return write_records(dump_path(self.run_dir, kind, step), records)

    def drop_after(self, step: int) -> list[Path]:
        """Delete the dumps of steps after ``step`` (a resumed run replays those steps, as
        the metrics file drops their lines), so the folder holds one history."""
        dropped = []
        for path in dump_files(self.run_dir):
            match = _STEP_FILE.match(path.name)
            if match and int(match.group(2)) > step:
                path.unlink()
                dropped.append(path)
        return dropped


__all__ = [
    "DUMP_DIR",
    "FINISH_REASONS",
    "SCHEMA_VERSION",
    "DumpError",
    "RolloutDumper",
    "clean_json",
    "conversation",
    "dump_files",
    "dump_path",
    "episode_record",
    "episode_records",
    "finish_reason",
    "read_records",
    "tool_calls",
    "write_records",
]
