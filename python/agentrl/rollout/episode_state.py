"""The mutable state of one episode while its batch advances turn by turn (`EpisodeState`)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any

from agentrl.envs import OpenEpisode
from agentrl.tools import ToolRegistry
from agentrl.trajectory import ToolEvent

# Engine cache keys: unique across every batch of every thread sharing an engine.
_EPISODE_KEYS = itertools.count()


class EpisodeState:
    """One episode's conversation, running ids, token columns, tool events and timings."""

    def __init__(
        self,
        sample: Any,
        tools: list[dict[str, Any]] | None,
        valid: set[str],
        think: bool,
        registry: ToolRegistry,
    ) -> None:
        self.sample = sample
        self.messages: list[dict[str, Any]] = [dict(m) for m in sample["messages"]]
        self.registry = registry  # the tools this episode's calls run with
        self.environment: OpenEpisode | None = None
        self.tools = tools
        self.valid_names = valid
        self.open_thinking = think
        self.prompt_ids: list[int] | None = None
        self.full_ids: list[int] = []  # the running ids: every token the model saw or made
        self.context_text = ""
        self.cache_key = next(_EPISODE_KEYS)
        self.ids: list[int] = []
        self.mask: list[int] = []
        self.logps: list[float] = []
        self.versions: list[int] = []
        self.turn_outputs: list[str] = []
        self.tool_events: list[ToolEvent] = []
        self.tool_turns: list[int] = []
        self.tool_seconds: list[float] = []
        self.turn_starts: list[int] = []
        self.turn_rewards: list[float | None] = []
        self.unfinished = False
        self.done = False
        self.first_version: int | None = None
        self.pending_calls: list[dict[str, Any]] = []
        # The calls of an answer-mode episode (None: its calls were executed).
        self.answer_calls: list[dict[str, Any]] | None = None
        self.kept_end_token = False
        self.start = time.perf_counter()
        self.end = self.start
        self.stats: dict[str, float] = {
            "turns": 0.0,
            "generated_tokens": 0.0,
            "observation_tokens": 0.0,
            "truncated_contexts": 0.0,
            "template_divergence": 0.0,
            "length_stops": 0.0,  # turns that ran to their new-token budget
            "generate_s": 0.0,
            "tool_s": 0.0,
            "render_s": 0.0,
        }

    def add(self, ids: Sequence[int], logps: Sequence[float] | None, version: int) -> None:
        """Append generated tokens (``logps`` given) or observation tokens (None)."""
        self.ids.extend(ids)
        if logps is None:
            self.mask.extend([0] * len(ids))
            self.logps.extend([0.0] * len(ids))
            self.versions.extend([-1] * len(ids))
            self.stats["observation_tokens"] += len(ids)
        else:
            self.mask.extend([1] * len(ids))
            self.logps.extend(logps)
            self.versions.extend([version] * len(ids))
            self.stats["generated_tokens"] += len(ids)

    def finish(self, unfinished: bool = False) -> None:
        self.done = True
        self.unfinished = unfinished
        self.end = time.perf_counter()


__all__ = ["EpisodeState"]
