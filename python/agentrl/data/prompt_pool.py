"""The prompt pool: RL prompts loaded from JSONL in every record shape datasets use.

Accepted shapes, one JSON object per line:

* ``messages``: a list of ``{role, content}`` (or ``{from, value}``) messages;
* ``conversations``: the same, ShareGPT (``human``/``gpt``) or MiniMind style, where a
  message (usually the system one) may carry ``tools``/``functions``;
* ``prompt`` / ``question`` / ``query``: a single user turn (or a message list);
* ground truth from the first of ``gt`` / ``answer`` / ``answers`` / ``label``;
* tools from ``tools`` / ``functions`` at record or message level, as a list, one object,
  or a JSON string.

A line that cannot be used is counted by reason, remembered with its line number and
skipped; with ``strict=True`` the first malformed line raises :class:`PromptPoolError`
naming the file and line. Policy filters (``require_gt``, ``allowed_tools``,
``filter_mode``) skip lines without being errors. Files are read line by line in binary
with a per-line size limit, so a gigantic line costs neither the memory of the whole file
nor the memory of the line.

Large files stay small in memory: every line is checked when the pool loads (so counts,
skips and the bad-line report are exact from the start), but a kept line is stored as its
UTF-8 bytes in one buffer and turned into a :class:`PromptSample` when it is asked for
(``pool[i]``), by the same code that checked it. A line of the common shape (messages of
plain ``system``/``user`` text, ground truth as text, no tools of its own) is checked by
its shape alone, without building its sample. Splits and shards share that buffer
(:meth:`PromptPool.subset`).
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Literal

from agentrl.chat import MessageError, normalize_message
from agentrl.data.dataset_files import ColumnMap, dataset_records, is_dataset_path
from agentrl.data.instructions import ANSWER_INSTRUCTION
from agentrl.data.task_text import task_text_from_messages
from agentrl.errors import UserError
from agentrl.tools.schema import (
    MATH_TOOL,
    ToolSchemaError,
    append_calculator_alias,
    merged_tool_names,
    normalize_tool_schema,
    parse_tool_schema,
    resolve_tool_specs,
    supported_tool_names,
    tool_name_set,
)

FilterMode = Literal["all", "math_only"]

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

GT_KEYS = ("gt", "answer", "answers", "label")
PROMPT_KEYS = ("prompt", "question", "query")
META_KEYS = ("id", "kind", "lang", "difficulty")
# Record fields that are the conversation or its tools; every other field is a column.
STRUCTURE_KEYS = ("messages", "conversations", "tools", "functions")


class PromptPoolError(UserError, ValueError):
    """A malformed line under ``strict=True``, or a pool with no usable record."""


class _Skip(Exception):
    """Internal: this record is skipped for ``reason``."""

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


def _new_stats() -> dict[str, int]:
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


def _open_binary(path: str) -> IO[bytes]:
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def iter_jsonl_lines(
    path: str, max_line_bytes: int = 0
) -> Iterator[tuple[int, str | None, str | None]]:
    """``(line_number, text, problem)`` for each non-blank line, read in bounded pieces.

    ``problem`` is ``"line_too_long"`` or ``"bad_encoding"`` (then ``text`` is None).
    A line over ``max_line_bytes`` (0: no limit) is skipped without being held in memory.
    """
    with _open_binary(path) as handle:
        number = 0
        while True:
            chunk = handle.readline(max_line_bytes + 1) if max_line_bytes > 0 else handle.readline()
            if not chunk:
                return
            number += 1
            if max_line_bytes > 0 and len(chunk) > max_line_bytes and not chunk.endswith(b"\n"):
                # Discard the rest of the line piece by piece.
                while chunk and not chunk.endswith(b"\n"):
                    chunk = handle.readline(1 << 20)
                yield number, None, "line_too_long"
                continue
            if number == 1 and chunk.startswith(b"\xef\xbb\xbf"):
                chunk = chunk[3:]
            try:
                text = chunk.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield number, None, f"bad_encoding:{exc.reason} at byte {exc.start}"
                continue
            text = text.strip()
            if text:
                yield number, text, None


class _Store:
    """Kept prompts: stored lines (their bytes, file and number) decoded on demand by the
    pool that checked them, and samples held whole (dataset tables, ready-made samples)."""

    def __init__(self, decoder: PromptPool | None) -> None:
        self.decoder = decoder
        self.blob = bytearray()
        self.starts = array("q", [0])
        self.lines = array("q")
        self.files = array("H")
        self.paths: list[str] = []
        self.whole: dict[int, PromptSample] = {}

    def __len__(self) -> int:
        return len(self.lines)

    def add_line(self, path: str, number: int, text: str) -> None:
        if not self.paths or self.paths[-1] != path:
            self.paths.append(path)
        self.blob += text.encode("utf-8")
        self.starts.append(len(self.blob))
        self.lines.append(number)
        self.files.append(len(self.paths) - 1)

    def add_sample(self, sample: PromptSample) -> None:
        self.whole[len(self.lines)] = sample
        self.starts.append(len(self.blob))
        self.lines.append(sample.line)
        self.files.append(0)

    def get(self, key: int) -> PromptSample:
        sample = self.whole.get(key)
        if sample is not None:
            return sample
        assert self.decoder is not None
        text = self.blob[self.starts[key] : self.starts[key + 1]].decode("utf-8")
        sample = self.decoder._normalize(self.decoder._mapped(json.loads(text)), count=False)
        sample.source, sample.line = self.paths[self.files[key]], self.lines[key]
        return sample


class _Samples(Sequence[PromptSample]):
    """A pool's prompts in order, decoded as they are read (see the module doc)."""

    def __init__(self, store: _Store, keys: array | range) -> None:
        self.store = store
        self.keys = keys

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self.store.get(k) for k in self.keys[index]]
        return self.store.get(self.keys[index])

    def __eq__(self, other: object) -> bool:  # like the list it stands for
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]


class PromptPool:
    """Prompts loaded from one or more JSONL files; a ``Dataset`` (len + indexing).

    Options (the compatible data options, plus robustness controls):

    * ``max_samples``: stop after this many kept prompts (0: all);
    * ``filter_mode``: ``all``, or ``math_only`` (keep tasks with an arithmetic expression);
    * ``require_gt``: skip prompts without ground truth;
    * ``allowed_tools``: tool names the environment runs; tools outside it are removed from
      the defaults, and a prompt that offers one anyway is skipped;
    * ``inject_answer_instruction``: add ``instruction`` to the system turn of prompts that
      offer ``calculate_math`` (unless it already mentions the tool and ``<answer>``);
    * ``augment_calculator_alias``: keep/add the ``calculator`` alias spec;
    * ``default_tools`` / ``force_all_tools``: tools for prompts that list none / for all;
    * ``strict``: raise on the first malformed line; ``lenient``: the compatible tolerance
      (unknown roles become ``user``, non-object messages and unusable tool fields are
      ignored) instead of skipping such lines;
    * ``prompt_only``: cut each conversation after its last user turn (for demonstration
      files); ``keep_raw``: keep each parsed record on its sample;
    * ``registered_tools``: specs by name of tools registered in code; a record may name
      one (a string, or an entry with no ``parameters``) and gets its spec;
    * ``max_line_bytes``: longer lines are skipped as ``line_too_long`` (0: no limit);
    * ``allow_empty``: do not raise when nothing is kept.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        max_samples: int = 0,
        filter_mode: FilterMode = "all",
        require_gt: bool = True,
        allowed_tools: Iterable[str] | None = None,
        inject_answer_instruction: bool = True,
        augment_calculator_alias: bool = False,
        default_tools: Any = None,
        force_all_tools: bool = False,
        strict: bool = False,
        lenient: bool = False,
        prompt_only: bool = False,
        keep_raw: bool = False,
        instruction: str = ANSWER_INSTRUCTION,
        max_line_bytes: int = 8 << 20,
        max_reported: int = 1000,
        allow_empty: bool = False,
        registered_tools: Mapping[str, dict[str, Any]] | None = None,
        split: str = "train",
        columns: ColumnMap | None = None,
    ) -> None:
        if filter_mode not in ("all", "math_only"):
            raise ValueError(f"filter_mode must be 'all' or 'math_only', got {filter_mode!r}")
        paths = [path] if isinstance(path, str | os.PathLike) else list(path)
        self.paths = [os.fspath(p) for p in paths]
        self.max_samples = int(max_samples)
        self.filter_mode = filter_mode
        self.require_gt = bool(require_gt)
        self.allowed_tools = set(allowed_tools or [])
        self.inject_answer_instruction = bool(inject_answer_instruction)
        self.augment_calculator_alias = bool(augment_calculator_alias)
        self.default_tools = normalize_tool_schema(default_tools) or []
        self.force_all_tools = bool(force_all_tools)
        self.strict = bool(strict)
        self.lenient = bool(lenient)
        self.prompt_only = bool(prompt_only)
        self.keep_raw = bool(keep_raw)
        self.instruction = instruction
        self.max_line_bytes = int(max_line_bytes)
        self.max_reported = int(max_reported)
        self.registered_tools = dict(registered_tools or {})
        self.split = split
        self.columns = columns or ColumnMap()
        self._store = _Store(self)
        self.stats = _new_stats()
        self.skipped: list[SkippedLine] = []
        self._tools_cache: dict[str, tuple[Any, dict[str, bool]]] = {}
        self._plain_counters: list[str] | bool | None = None
        self._mapping = self.columns != ColumnMap()
        for one in self.paths:
            if not self._load(one):
                break
        self._keys: array | range = range(len(self._store))
        if not len(self) and not allow_empty:
            raise PromptPoolError(f"no usable prompt in {', '.join(self.paths)}; {self.summary()}")

    # ---- dataset protocol ----

    def __len__(self) -> int:
        return len(self._keys) if hasattr(self, "_keys") else len(self._store)

    def __getitem__(self, index: int) -> PromptSample:
        return self._store.get(self._keys[index])

    def __iter__(self) -> Iterator[PromptSample]:
        return (self._store.get(key) for key in self._keys)

    @property
    def samples(self) -> Sequence[PromptSample]:
        """The prompts in order (each decoded when read; treat them as read-only)."""
        return _Samples(self._store, self._keys)

    def subset(self, indices: Iterable[int], stats: Mapping[str, int] | None = None) -> PromptPool:
        """The prompts at ``indices`` (in that order) as a pool sharing this one's storage:
        a split or a shard costs its index, not its prompts."""
        pool = PromptPool.from_samples([], stats)
        pool._store = self._store
        pool._keys = array("q", (self._keys[i] for i in indices))
        pool.stats["kept"] = len(pool._keys)
        return pool

    @classmethod
    def from_samples(
        cls, samples: Iterable[PromptSample], stats: Mapping[str, int] | None = None
    ) -> PromptPool:
        """A pool over existing samples (a split or a shard), without reading files."""
        pool = cls.__new__(cls)
        pool.paths = []
        pool._store = _Store(None)
        for sample in samples:
            pool._store.add_sample(sample)
        pool._keys = range(len(pool._store))
        pool.stats = dict(stats) if stats else _new_stats()
        pool.stats["kept"] = len(pool._keys)
        pool.skipped = []
        return pool

    def summary(self) -> str:
        """One line: kept/loaded and every non-zero skip reason."""
        parts = [f"kept {self.stats['kept']} of {self.stats['loaded']} lines"]
        for key in MALFORMED_REASONS:
            if self.stats.get(key):
                parts.append(f"{key} {self.stats[key]}")
        for key in POLICY_REASONS:
            if self.stats.get(key):
                parts.append(f"{key} {self.stats[key]} ({POLICY_OPTIONS[key]})")
        return ", ".join(parts)

    # ---- loading ----

    def _skip(self, source: str, line: int, reason: str, detail: str) -> None:
        self.stats[reason] = self.stats.get(reason, 0) + 1
        if reason != "bad_json":
            self.stats["dropped"] += 1
        entry = SkippedLine(source, line, reason, detail[:200])
        if self.strict and reason in MALFORMED_REASONS:
            raise PromptPoolError(str(entry))
        if len(self.skipped) < self.max_reported:
            self.skipped.append(entry)

    def _load(self, path: str) -> bool:
        """Read one file; False once ``max_samples`` is reached."""
        if is_dataset_path(path):
            return self._load_table(path)
        try:
            return self._load_lines(path)
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:  # a broken .gz file
            raise PromptPoolError(f"{path}: not a readable gzip file ({exc})") from exc

    def _load_lines(self, path: str) -> bool:
        for number, text, problem in iter_jsonl_lines(path, self.max_line_bytes):
            if self.max_samples > 0 and len(self._store) >= self.max_samples:
                return False
            self.stats["loaded"] += 1
            if problem is not None:
                reason, _, detail = problem.partition(":")
                self._skip(path, number, reason, detail)
                continue
            assert text is not None
            try:
                record = json.loads(text)
            except (ValueError, RecursionError) as exc:
                self._skip(path, number, "bad_json", str(exc))
                continue
            self._add(path, number, record, text)
        return not (self.max_samples > 0 and len(self._store) >= self.max_samples)

    def _load_table(self, path: str) -> bool:
        """A parquet/arrow/JSON-array file or dataset directory, row by row."""
        for number, record in dataset_records(path, self.split, self.columns):
            if self.max_samples > 0 and len(self._store) >= self.max_samples:
                return False
            self.stats["loaded"] += 1
            self._add(path, number, record)
        return not (self.max_samples > 0 and len(self._store) >= self.max_samples)

    def _mapped(self, record: Any) -> Any:
        """``record`` through the column mapping (``--prompt_column`` etc.), when one is set."""
        if self._mapping and isinstance(record, dict):
            missing = self.columns.missing(record)
            if missing:
                raise _Skip("no_messages", f"no field {missing!r} (column mapping)")
            record = self.columns.apply(record)
        return record

    def _add(self, path: str, number: int, record: Any, text: str | None = None) -> None:
        """Check one record and keep it (its line ``text`` when it has one, to be decoded
        when asked for), or count and remember why it was skipped."""
        try:
            record = self._mapped(record)
            if text is None or not self._plain(record):
                sample = self._normalize(record)
        except _Skip as skip:
            self._skip(path, number, skip.reason, skip.detail)
            return
        if text is None:
            sample.source, sample.line = path, number
            self._store.add_sample(sample)
        else:
            self._store.add_line(path, number, text)
        self.stats["kept"] += 1

    def _plain(self, record: Any) -> bool:
        """Whether ``record`` has the common shape that :meth:`_normalize` keeps as it is
        (its tool counters counted here): then its sample is built only when asked for."""
        if self._plain_counters is None:  # what a prompt without tools gets: once per pool
            self._plain_counters = self._plain_setup()
        if (
            self._plain_counters is False
            or type(record) is not dict
            or record.get("tools") is not None
            or record.get("functions") is not None
        ):
            return False
        messages = record.get("messages")
        if not isinstance(messages, list) or not messages:
            return False
        for message in messages:
            if (
                type(message) is not dict
                or len(message) != 2
                or message.get("role") not in ("user", "system")
                or type(message.get("content")) is not str
            ):
                return False
        key = next((k for k in GT_KEYS if k in record), None)
        value = record[key] if key else None
        items = value if isinstance(value, list) else [value]
        if not all(type(item) is str for item in items):
            return False
        if self.require_gt and not any(item.strip() for item in items):
            return False
        for counter in self._plain_counters:  # the tool counters _normalize would count
            self.stats[counter] += 1
        return True

    def _plain_setup(self) -> list[str] | bool:
        """False when no record is checked by its shape alone (options that change what a
        record becomes); else the tool counters a record without tools adds to."""
        if self.lenient or self.prompt_only or self.keep_raw or self.filter_mode != "all":
            return False
        names = supported_tool_names(self._resolve_tools(None, count=False))
        if self.allowed_tools and any(n not in self.allowed_tools for n in names):
            return False
        _, flags = self._tools_cache["null"]
        return [counter for counter, hit in flags.items() if hit]

    def _tools_field(self, value: Any) -> list[dict[str, Any]] | None:
        value = self._with_registered(value)
        if self.lenient:
            return normalize_tool_schema(value)
        try:
            return parse_tool_schema(value)
        except ToolSchemaError as exc:
            raise _Skip("bad_tools", str(exc)) from None

    def _with_registered(self, value: Any) -> Any:
        """A tools list whose entries that only name a registered tool get its spec."""
        if not self.registered_tools or not isinstance(value, list):
            return value
        out = []
        for item in value:
            name = item if isinstance(item, str) else None
            if isinstance(item, dict):
                inner = item.get("function") if isinstance(item.get("function"), dict) else item
                if "parameters" not in inner and isinstance(inner.get("name"), str):
                    name = inner["name"]
            spec = self.registered_tools.get(name) if name is not None else None
            out.append(json.loads(json.dumps(spec)) if spec is not None else item)
        return out

    def _messages(
        self, record: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        """Normalised messages and any message-level tools."""
        source: Any = record.get("messages")
        if not source and "conversations" in record:
            source = record["conversations"]
        if not source:
            prompt = next((record[k] for k in PROMPT_KEYS if record.get(k)), None)
            if isinstance(prompt, str | int | float) and not isinstance(prompt, bool):
                source = [{"role": "user", "content": str(prompt)}]
            elif isinstance(prompt, list):
                source = prompt
            elif prompt is not None:
                raise _Skip("bad_messages", f"prompt is a {type(prompt).__name__}")
        if source is None or source == []:
            raise _Skip("no_messages", "no messages, conversations or prompt")
        if not isinstance(source, list):
            raise _Skip("bad_messages", f"conversation is a {type(source).__name__}, not a list")
        tools: list[dict[str, Any]] | None = None
        messages = []
        unknown = "user" if self.lenient else "error"
        for item in source:
            if self.lenient and not isinstance(item, Mapping):
                continue
            try:
                message = normalize_message(item, unknown_role=unknown)
            except MessageError as exc:
                raise _Skip(exc.reason, exc.detail) from None
            for key in ("tools", "functions"):
                if isinstance(item, Mapping) and item.get(key) is not None:
                    tools = self._tools_field(item[key]) or tools
            messages.append(message)
        if messages and messages[-1]["role"] == "assistant":
            last = messages[-1]
            if not last["content"].strip() and not last.get("tool_calls"):
                messages.pop()
        if self.prompt_only:
            users = [i for i, m in enumerate(messages) if m["role"] == "user"]
            if users:
                messages = messages[: users[-1] + 1]
        if not messages:
            raise _Skip("no_messages", "the conversation is empty")
        return messages, tools

    @staticmethod
    def _ground_truth(record: dict[str, Any]) -> list[str]:
        key = next((k for k in GT_KEYS if k in record), None)
        value = record.get(key) if key else None
        if value is None:
            return []
        items = value if isinstance(value, list) else [value]
        out = []
        for item in items:
            if isinstance(item, dict | list):
                raise _Skip("bad_gt", f"ground truth item is a {type(item).__name__}")
            text = str(item)
            if text.strip():
                out.append(text)
        return out

    def _resolve_tools(
        self, tools: list[dict[str, Any]] | None, count: bool = True
    ) -> list[dict[str, Any]] | None:
        """The tools a prompt offers after defaults, forcing, the allow-list and the alias.

        Prompts with identical tools share one resolved list (datasets repeat the same
        tools on every line), which keeps a large pool small; treat ``sample.tools`` as
        read-only. The tool counters are still counted per prompt.
        """
        key = "null" if tools is None else json.dumps(tools, ensure_ascii=False, default=str)
        cached = self._tools_cache.get(key)
        if cached is None:
            allowed = set(self.allowed_tools) if self.allowed_tools else None
            alias = self.augment_calculator_alias
            own_count = len(merged_tool_names(tools, None, alias, allowed))
            default_count = len(merged_tool_names(self.default_tools, None, alias, allowed))
            resolved = resolve_tool_specs(
                tools, self.default_tools, self.force_all_tools, alias, allowed
            )
            resolved_count = len(tool_name_set(resolved))
            flags = {
                "defaulted_tools": own_count <= 0 < default_count and resolved_count > 0,
                "forced_default_tools": self.force_all_tools and resolved_count > own_count,
                "augmented_calculator_alias": False,
            }
            if alias:
                had_alias = "calculator" in tool_name_set(resolved)
                resolved = append_calculator_alias(resolved)
                flags["augmented_calculator_alias"] = (
                    not had_alias and "calculator" in tool_name_set(resolved)
                )
            if len(self._tools_cache) >= 4096:
                self._tools_cache.clear()
            cached = (resolved, flags)
            self._tools_cache[key] = cached
        resolved, flags = cached
        for counter, hit in flags.items():
            if hit and count:
                self.stats[counter] += 1
        return resolved

    def _normalize(self, record: Any, count: bool = True) -> PromptSample:
        if not isinstance(record, dict):
            raise _Skip("not_object", f"line is a JSON {type(record).__name__}, not an object")
        tools_value = record.get("tools")
        if tools_value is None or tools_value == "" or tools_value == []:
            tools_value = record.get("functions")
        tools = self._tools_field(tools_value)
        gt = self._ground_truth(record)
        messages, message_tools = self._messages(record)
        tools = message_tools or tools

        tools = self._resolve_tools(tools, count)
        if self.require_gt and not gt:
            raise _Skip("skip_no_gt", "no ground truth")
        names = supported_tool_names(tools)
        if self.allowed_tools and any(n not in self.allowed_tools for n in names):
            bad = next(n for n in names if n not in self.allowed_tools)
            raise _Skip("skip_unsupported_tools", f"tool {bad!r} is not available")
        if self.filter_mode == "math_only":
            from agentrl.parsing import extract_expressions

            if not extract_expressions(task_text_from_messages(messages), 1):
                raise _Skip("skip_filter", "no arithmetic expression in the task")
        if self.inject_answer_instruction and MATH_TOOL in names:
            messages = inject_instruction(messages, self.instruction)
        calls = record.get("calls")
        return PromptSample(
            messages=messages,
            tools=tools,
            gt=gt,
            calls=calls if isinstance(calls, list) else None,
            meta={k: record[k] for k in META_KEYS if k in record},
            raw=record if self.keep_raw else None,
            columns={k: v for k, v in record.items() if k not in STRUCTURE_KEYS},
        )


def inject_instruction(
    messages: list[dict[str, Any]], instruction: str = ANSWER_INSTRUCTION
) -> list[dict[str, Any]]:
    """Messages with the answer instruction in the first system turn (one is added if none).

    A system turn that already names ``calculate_math`` and ``<answer>`` is left alone.
    """
    out = [dict(m) for m in messages]
    for message in out:
        if message.get("role") == "system":
            content = str(message.get("content", "")).strip()
            if MATH_TOOL not in content or "<answer>" not in content:
                message["content"] = (content + "\n" + instruction).strip()
            return out
    return [{"role": "system", "content": instruction}, *out]


__all__ = [
    "MALFORMED_REASONS",
    "POLICY_REASONS",
    "PromptPool",
    "PromptPoolError",
    "PromptSample",
    "SkippedLine",
    "inject_instruction",
    "iter_jsonl_lines",
]
