"""What the prompt pool gives and reports: a prompt (:class:`PromptSample`), a skipped line
(:class:`SkippedLine`) and the reasons a line is skipped, with the pool's counters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentrl.data.task_text import task_text_from_messages

# Reasons a line is malformed (errors under strict=True), and policy skips (never errors).
MALFORMED_REASONS = (
    "bad_encoding",
    "line_too_long",
    "bad_json",
    "not_object",
    "bad_messages",
    "no_messages",
    "bad_message",
    "unknown_role",
    "bad_content",
    "bad_tool_calls",
    "bad_tools",
    "bad_gt",
)
POLICY_REASONS = ("skip_no_gt", "skip_unsupported_tools", "skip_filter")
# What keeps the prompts a policy filter dropped (the trainer's option for it).
POLICY_OPTIONS = {
    "skip_no_gt": "--require_gt 0 keeps them",
    "skip_unsupported_tools": "--tool_subset or --tools must offer the tools they list",
    "skip_filter": "--filter_mode all keeps them",
}


class SkipRecord(Exception):
    """This record is skipped for ``reason`` (one of the reasons above)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


# A sample's own fields, readable by key; any other key is one of the record's columns
# (a column wins over the bookkeeping fields meta, raw, source and line).
SAMPLE_FIELDS = ("messages", "tools", "gt", "calls", "columns")
_BOOKKEEPING = ("meta", "raw", "source", "line")


@dataclass
class PromptSample:
    """One prompt: the conversation so far, the tools it offers and its ground truth.

    ``calls`` is the reference solution when the record has one (``agentrl gen-data``
    records list the tool calls that solve the task). It reads like the record it came
    from: ``sample["secret"]``, ``sample.get("secret")`` and ``"secret" in sample`` see
    the record's own columns, beside ``messages``, ``tools``, ``gt`` and the other fields.
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    gt: list[str]
    source: str = ""
    line: int = 0
    calls: list[dict[str, Any]] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] | None = None
    # The record's fields other than the conversation and tools, for reward functions.
    columns: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        if key in SAMPLE_FIELDS:
            return getattr(self, key)
        if key in self.columns:
            return self.columns[key]
        if key in _BOOKKEEPING:
            return getattr(self, key)
        where = f"{self.source}:{self.line}: " if self.source else ""
        known = ", ".join(sorted(self.columns)) or "none"
        raise KeyError(f"{where}the record has no column {key!r} (its columns: {known})")

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return key in SAMPLE_FIELDS or key in self.columns or key in _BOOKKEEPING

    def keys(self) -> list[str]:
        """The sample's fields, then the record's columns."""
        return [*SAMPLE_FIELDS, *(k for k in self.columns if k not in SAMPLE_FIELDS)]

    @property
    def task_text(self) -> str:
        return task_text_from_messages(self.messages)


@dataclass(frozen=True)
class SkippedLine:
    """Where a skipped line is and why it was skipped."""

    source: str
    line: int
    reason: str
    detail: str = ""

    def __str__(self) -> str:
        tail = f": {self.detail}" if self.detail else ""
        return f"{self.source}:{self.line}: {self.reason}{tail}"


def new_stats() -> dict[str, int]:
    stats = {
        "loaded": 0,
        "kept": 0,
        "bad_json": 0,
        "dropped": 0,
        "skip_no_gt": 0,
        "skip_unsupported_tools": 0,
        "skip_filter": 0,
        "augmented_calculator_alias": 0,
        "forced_default_tools": 0,
        "defaulted_tools": 0,
    }
    for reason in MALFORMED_REASONS:
        stats.setdefault(reason, 0)
    return stats


__all__ = [
    "MALFORMED_REASONS",
    "POLICY_OPTIONS",
    "POLICY_REASONS",
    "SAMPLE_FIELDS",
    "PromptSample",
    "SkipRecord",
    "SkippedLine",
    "new_stats",
]
