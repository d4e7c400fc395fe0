"""Debug samples: a few trajectories of a step printed in full, with their reward details.

Reading what the policy actually wrote is the fastest way to see a reward being gamed or
a format breaking, so every ``debug_interval`` steps the first group of the batch is shown:
the prompt, then up to four trajectories with their reward, the headline details, every
assistant turn and the tool events.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agentrl.trajectory import RolloutGroup, event_dicts

_TEXT_LIMIT = 1200
_RULE = "-" * 100


def should_log(step: int, interval: int) -> bool:
    return interval > 0 and step % interval == 0


def format_debug_sample(
    step: int,
    group: RolloutGroup,
    rewards: Sequence[float],
    details: Sequence[Mapping[str, Any]],
    max_trajectories: int = 4,
) -> str:
    """The first trajectories of ``group`` (rewards/details are the group's rows, in order)."""
    lines = [
        f"[debug] step {step}: prompt #{group.data_index}, policy version {group.policy_version}",
        _RULE,
        group.prompt[:_TEXT_LIMIT],
    ]
    for i, traj in enumerate(group.trajectories[:max_trajectories]):
        reward = rewards[i] if i < len(rewards) else None
        d = details[i] if i < len(details) else {}
        lines.append(
            f"[debug] trajectory {i}: reward {reward}, exact {d.get('exact_match')}, "
            f"cov {d.get('answer_cov')}, tag {d.get('answer_tag')}, "
            f"tool values {d.get('tool_value_order_cov')}, "
            f"right tool {d.get('correct_tool_choice')}, tool ok {d.get('tool_success_rate')}, "
            f"unfinished {traj.unfinished}, tool events {len(traj.tool_events)}"
        )
        for turn, text in enumerate(traj.turn_outputs):
            lines.append(f"[debug] assistant turn {turn}:\n{text[:_TEXT_LIMIT]}")
        if traj.tool_events:
            events = json.dumps(event_dicts(traj.tool_events[:8]), ensure_ascii=False, default=str)
            lines.append(f"[debug] tool events: {events[:_TEXT_LIMIT]}")
        lines.append(_RULE)
    return "\n".join(lines)


__all__ = ["format_debug_sample", "should_log"]
