"""The prompt pool: RL prompts loaded from JSONL in every record shape datasets use.

Accepted shapes, one JSON object per line:

* ``messages``: a list of ``{role, content}`` (or ``{from, value}``) messages;
* ``conversations``: the same, ShareGPT (``human``/``gpt``) or MiniMind style, where a
  message (usually the system one) may carry ``tools``/``functions``;
* ``prompt`` / ``question`` / ``query``: a single user turn (or a message list);
* ground truth from the first of ``gt`` / ``answer`` / ``answers`` / ``label``;
* tools from ``tools`` / ``functions`` at record or message level, as a list, one object,
  or a JSON string;
* function-calling records (BFCL, xLAM, OpenAI with a ``tool_calls`` target, Hermes), read
  by :mod:`agentrl.data.function_calling` into the same shape with a ``ground_truth``
  column; their tools are shown as the record gives them (no defaults, allow-list, forcing
  or alias: the functions are the answer's vocabulary).

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
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

from agentrl.chat import MessageError, normalize_message
from agentrl.data.dataset_files import ColumnMap, dataset_records, is_dataset_path
from agentrl.data.function_calling import FunctionCallReader
from agentrl.data.instructions import ANSWER_INSTRUCTION, inject_instruction
from agentrl.data.jsonl_lines import iter_jsonl_lines
from agentrl.data.prompt_store import PromptStore, StoredSamples
from agentrl.data.prompt_tools import PromptTools
from agentrl.data.reasoning_gym import is_reasoning_gym, reasoning_gym_records
from agentrl.data.samples import (
    MALFORMED_REASONS,
    POLICY_OPTIONS,
    POLICY_REASONS,
    PromptSample,
    SkippedLine,
    SkipRecord,
    new_stats,
)
from agentrl.data.task_text import task_text_from_messages
from agentrl.data.verifiers_env import is_verifiers, verifiers_records
from agentrl.errors import UserError
from agentrl.tools.schema import MATH_TOOL, normalize_tool_schema, supported_tool_names

FilterMode = Literal["all", "math_only"]

GT_KEYS = ("gt", "answer", "answers", "label")
PROMPT_KEYS = ("prompt", "question", "query")
META_KEYS = ("id", "kind", "lang", "difficulty")
# Record fields that are the conversation or its tools; every other field is a column.
STRUCTURE_KEYS = ("messages", "conversations", "tools", "functions")


class PromptPoolError(UserError, ValueError):
    """A malformed line under ``strict=True``, or a pool with no usable record."""


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
    * ``data_format``: how records are read (`agentrl.data.function_calling.DATA_FORMATS`;
      ``auto``: each record's own), ``possible_answer``: BFCL's possible-answer file;
      ``data_formats`` counts the function-calling records kept, by format, and ``notes``
      says where their possible answers came from;
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
        data_format: str = "auto",
        possible_answer: str = "",
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
        self._store = PromptStore(self)
        self.stats = new_stats()
        self.skipped: list[SkippedLine] = []
        self._tools = PromptTools(
            default_tools=self.default_tools,
            force_all_tools=self.force_all_tools,
            allowed_tools=self.allowed_tools,
            augment_calculator_alias=self.augment_calculator_alias,
            registered_tools=self.registered_tools,
            lenient=self.lenient,
        )
        self._plain_counters: list[str] | bool | None = None
        self._mapping = self.columns != ColumnMap()
        self._calls = FunctionCallReader(data_format, possible_answer)
        self.data_formats: Counter[str] = Counter()
        self.notes = self._calls.notes
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
        return StoredSamples(self._store, self._keys)

    def subset(self, indices: Iterable[int], stats: Mapping[str, int] | None = None) -> PromptPool:
        """The prompts at ``indices`` (in that order) as a pool sharing this one's storage:
        a split or a shard costs its index, not its prompts."""
        pool = PromptPool.from_samples([], stats)
        pool._store = self._store
        pool._keys = array("q", (self._keys[i] for i in indices))
        pool.stats["kept"] = len(pool._keys)
        pool.data_formats = self.data_formats
        return pool

    @classmethod
    def from_samples(
        cls, samples: Iterable[PromptSample], stats: Mapping[str, int] | None = None
    ) -> PromptPool:
        """A pool over existing samples (a split or a shard), without reading files."""
        pool = cls.__new__(cls)
        pool.paths = []
        pool._store = PromptStore(None)
        for sample in samples:
            pool._store.add_sample(sample)
        pool._keys = range(len(pool._store))
        pool.stats = dict(stats) if stats else new_stats()
        pool.stats["kept"] = len(pool._keys)
        pool.skipped = []
        pool.data_formats = Counter()
        pool.notes = []
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
        self._calls.open_file(path)
        if is_reasoning_gym(path):
            return self._load_records(path, reasoning_gym_records(path))
        if is_verifiers(path):
            return self._load_records(path, verifiers_records(path))
        if is_dataset_path(path):
            return self._load_records(path, dataset_records(path, self.split, self.columns))
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

    def _load_records(self, path: str, records: Iterable[tuple[int, Any]]) -> bool:
        """Records that are not lines of text, one by one: the rows of a parquet/arrow/
        JSON-array file or dataset directory, or the tasks of a generator."""
        for number, record in records:
            if self.max_samples > 0 and len(self._store) >= self.max_samples:
                return False
            self.stats["loaded"] += 1
            self._add(path, number, record)
        return not (self.max_samples > 0 and len(self._store) >= self.max_samples)

    def decode_record(self, record: Any, source: str = "") -> PromptSample:
        """A stored record's sample, built by the code that checked it (nothing counted);
        ``source``: the file it came from (whose format reads it)."""
        return self._normalize(self._mapped(record), count=False, source=source)

    def _mapped(self, record: Any) -> Any:
        """``record`` through the column mapping (``--prompt_column`` etc.), when one is set."""
        if self._mapping and isinstance(record, dict):
            missing = self.columns.missing(record)
            if missing:
                raise SkipRecord("no_messages", f"no field {missing!r} (column mapping)")
            record = self.columns.apply(record)
        return record

    def _add(self, path: str, number: int, record: Any, text: str | None = None) -> None:
        """Check one record and keep it (its line ``text`` when it has one, to be decoded
        when asked for), or count and remember why it was skipped."""
        try:
            record = self._mapped(record)
            self._calls.see(path, record)
            if text is None or self._calls.format_of(path) != "prompts" or not self._plain(record):
                sample = self._normalize(record, source=path)
        except SkipRecord as skip:
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
        _, flags = self._tools.resolve(None)
        return [counter for counter, hit in flags.items() if hit]

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
                raise SkipRecord("bad_messages", f"prompt is a {type(prompt).__name__}")
        if source is None or source == []:
            raise SkipRecord("no_messages", "no messages, conversations or prompt")
        if not isinstance(source, list):
            raise SkipRecord(
                "bad_messages", f"conversation is a {type(source).__name__}, not a list"
            )
        tools: list[dict[str, Any]] | None = None
        messages = []
        unknown = "user" if self.lenient else "error"
        for item in source:
            if self.lenient and not isinstance(item, Mapping):
                continue
            try:
                message = normalize_message(item, unknown_role=unknown)
            except MessageError as exc:
                raise SkipRecord(exc.reason, exc.detail) from None
            for key in ("tools", "functions"):
                if isinstance(item, Mapping) and item.get(key) is not None:
                    tools = self._tools.read(item[key]) or tools
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
            raise SkipRecord("no_messages", "the conversation is empty")
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
                raise SkipRecord("bad_gt", f"ground truth item is a {type(item).__name__}")
            text = str(item)
            if text.strip():
                out.append(text)
        return out

    def _resolve_tools(
        self, tools: list[dict[str, Any]] | None, count: bool = True
    ) -> list[dict[str, Any]] | None:
        """The tools a prompt offers (`PromptTools.resolve`), counted per prompt."""
        resolved, flags = self._tools.resolve(tools)
        for counter, hit in flags.items():
            if hit and count:
                self.stats[counter] += 1
        return resolved

    def _normalize(self, record: Any, count: bool = True, source: str = "") -> PromptSample:
        if not isinstance(record, dict):
            raise SkipRecord("not_object", f"line is a JSON {type(record).__name__}, not an object")
        converted = self._calls.convert(record, source)
        record = converted if converted is not None else record
        tools_value = record.get("tools")
        if tools_value is None or tools_value == "" or tools_value == []:
            tools_value = record.get("functions")
        tools = self._tools.read(tools_value)
        gt = self._ground_truth(record)
        messages, message_tools = self._messages(record)
        tools = message_tools or tools

        if converted is None:
            tools = self._resolve_tools(tools, count)
        if self.require_gt and not gt:
            if converted is not None:
                raise SkipRecord(
                    "skip_no_gt",
                    "a function-calling record: its answer is the ground_truth column, "
                    "which --reward_funcs function_call reads",
                )
            raise SkipRecord("skip_no_gt", "no ground truth")
        names = supported_tool_names(tools)
        if (
            converted is None
            and self.allowed_tools
            and any(n not in self.allowed_tools for n in names)
        ):
            bad = next(n for n in names if n not in self.allowed_tools)
            raise SkipRecord("skip_unsupported_tools", f"tool {bad!r} is not available")
        if self.filter_mode == "math_only":
            from agentrl.parsing import extract_expressions

            if not extract_expressions(task_text_from_messages(messages), 1):
                raise SkipRecord("skip_filter", "no arithmetic expression in the task")
        if converted is None and self.inject_answer_instruction and MATH_TOOL in names:
            messages = inject_instruction(messages, self.instruction)
        calls = record.get("calls")
        if converted is not None and count:
            self.data_formats[converted["data_format"]] += 1
        return PromptSample(
            messages=messages,
            tools=tools,
            gt=gt,
            calls=calls if isinstance(calls, list) else None,
            meta={k: record[k] for k in META_KEYS if k in record},
            raw=record if self.keep_raw else None,
            columns={k: v for k, v in record.items() if k not in STRUCTURE_KEYS},
        )


__all__ = ["PromptPool", "PromptPoolError"]
