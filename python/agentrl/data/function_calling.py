"""Function-calling records in the formats people have, read as prompt records.

A function-calling record holds a request, the functions offered and the call (or calls,
or no call) that answers it. Four formats are read (``--data_format``; ``auto`` detects
each record's own):

* ``bfcl``: ``id``, ``question`` (a list of turns, each a list of messages; one turn is
  read) and ``function`` (BFCL's function docs); the right calls come from the record's
  ``ground_truth`` (or ``possible_answer``) column, or from BFCL's possible-answer file
  matched by ``id`` (``--possible_answer``, or ``possible_answer/<same file name>`` beside
  the data file). An ``irrelevance`` entry without one has no call as its answer.
* ``xlam``: ``query``, ``tools`` and ``answers`` (the last two JSON strings, as APIGen
  ships them: argument tables ``{name: {type, description, default}}`` for parameters).
* ``openai``: ``messages`` and ``tools``, the last assistant turn carrying ``tool_calls``:
  that turn is the target and is cut from the prompt with what follows it. ``auto`` takes
  a record for one when its last message is an assistant turn with a ``tool_calls`` field;
  ``"tool_calls": []`` there means the right answer is no call.
* ``hermes``: ShareGPT ``conversations`` (``from``/``value``) whose system turn lists the
  tools in ``<tools>...</tools>`` (JSON or Python literals) and whose first ``gpt`` turn
  with ``<tool_call>`` blocks is the target (none: the first ``gpt`` turn, a no-call
  answer). The system turn that carries the tools is left out of the prompt: the model's
  own template shows the tools.

Each becomes a prompt record with ``messages``, ``tools`` (OpenAI specs with JSON-schema
types, :func:`agentrl.tools.schema.json_schema_tool`), ``ground_truth`` in BFCL's
possible-answer form (a list of ``{function: {argument: [acceptable values]}}``; an
empty list: the right answer is no call), ``function_docs`` (the functions as the record
gave them, BFCL's types included) and ``data_format``. A record's own ``ground_truth``
column wins over the one derived from its target turn. A target call's value becomes a
one-element list; an optional argument it leaves out accepts being left out (``""``) or
its default, and one it sets to its default also accepts being left out, as BFCL's own
possible answers are written. A record that cannot be read is skipped with the reason
(:class:`SkipRecord`) that the prompt pool counts and reports by line.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentrl.chat import MessageError, normalize_message
from agentrl.data.jsonl_lines import iter_jsonl_lines
from agentrl.data.samples import SkipRecord
from agentrl.errors import UserError
from agentrl.tools.schema import ToolSchemaError, json_schema_tool
from agentrl.utils.fields import object_list

FUNCTION_CALL_FORMATS = ("bfcl", "xlam", "openai", "hermes")
# ``prompts``: the prompt pool's own record shapes (messages, conversations, prompt).
DATA_FORMATS = ("auto", "prompts", *FUNCTION_CALL_FORMATS)
# The columns the converted record holds beside messages and tools.
GROUND_TRUTH = "ground_truth"
FUNCTION_DOCS = "function_docs"
# Fields each format reads; the record's other fields stay columns.
_READ_FIELDS = {
    "bfcl": ("question", "function", "ground_truth", "possible_answer"),
    "xlam": ("query", "tools", "answers", "ground_truth"),
    "openai": ("messages", "tools", "ground_truth"),
    "hermes": ("conversations", "tools", "ground_truth"),
}


class FunctionCallDataError(UserError, ValueError):
    """A possible-answer file that cannot be read (names the file and line)."""


def detect_format(record: Mapping[str, Any]) -> str:
    """The function-calling format of one record, or ``prompts`` when it is none."""
    if "question" in record and "function" in record:
        return "bfcl"
    if "query" in record and "answers" in record and "tools" in record:
        return "xlam"
    messages = record.get("messages")
    if record.get("tools") and isinstance(messages, list) and messages:
        last = messages[-1]
        if isinstance(last, Mapping) and last.get("role") == "assistant" and "tool_calls" in last:
            return "openai"
    conversations = record.get("conversations")
    if isinstance(conversations, list):
        for turn in conversations:
            value = turn.get("value") if isinstance(turn, Mapping) else None
            if isinstance(value, str) and ("<tools>" in value or "<tool_call>" in value):
                return "hermes"
    return "prompts"


def _literal(text: str, what: str, reason: str = "bad_tool_calls") -> Any:
    """JSON, or the Python literal Hermes-style data often writes instead."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        raise SkipRecord(reason, f"{what} is neither JSON nor a literal") from None


def _json_field(value: Any, what: str, reason: str) -> Any:
    """A field given as JSON text or as the value itself."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError as exc:
        raise SkipRecord(reason, f"{what} is not valid JSON: {exc}") from None


def _specs(docs: Any) -> list[dict[str, Any]]:
    listed = object_list(docs)
    if listed is None:
        raise SkipRecord("bad_tools", f"functions are a {type(docs).__name__}, not a list")
    specs = []
    for doc in listed:
        try:
            spec = json_schema_tool(doc)
        except ToolSchemaError as exc:
            raise SkipRecord("bad_tools", str(exc)) from None
        if spec is None:
            raise SkipRecord("bad_tools", "a function has no name")
        specs.append(spec)
    return specs


def _calls(raw: Any) -> list[tuple[str, dict[str, Any]]]:
    """``(name, arguments)`` of each call of an assistant turn's ``tool_calls`` (any shape
    `agentrl.chat.normalize_message` reads: flat or OpenAI-nested, arguments as JSON)."""
    try:
        message = normalize_message({"role": "assistant", "content": "", "tool_calls": raw})
    except MessageError as exc:
        raise SkipRecord(exc.reason, exc.detail) from None
    out = []
    for call in message.get("tool_calls", []):
        name, arguments = call["function"]["name"], call["function"]["arguments"]
        if not isinstance(arguments, dict):
            raise SkipRecord("bad_tool_calls", f"the arguments of {name!r} are not an object")
        out.append((name, arguments))
    return out


def _possible(value: Any) -> list[Any]:
    """A concrete value as BFCL's list of acceptable values (dicts per key, as its files)."""
    if isinstance(value, dict):
        return [{k: [v] for k, v in value.items()}]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [[{k: [v] for k, v in item.items()} for item in value]]
    return [value]


def calls_ground_truth(
    calls: list[tuple[str, dict[str, Any]]], specs: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Target calls in BFCL's possible-answer form (see the module doc)."""
    params = {}
    for spec in specs:
        fn = spec["function"]
        schema = fn.get("parameters") or {}
        properties = schema.get("properties") if isinstance(schema, dict) else None
        required = schema.get("required") if isinstance(schema, dict) else None
        params[fn["name"]] = (
            properties if isinstance(properties, dict) else {},
            set(required) if isinstance(required, list) else set(),
        )
    out = []
    for name, arguments in calls:
        properties, required = params.get(name, ({}, set()))
        answer = {key: _possible(value) for key, value in arguments.items()}
        for key, schema in properties.items():
            if key in required or not isinstance(schema, dict):
                continue
            if key not in answer:
                answer[key] = ["", schema["default"]] if "default" in schema else [""]
            elif "default" in schema and arguments[key] == schema["default"]:
                answer[key].append("")
        out.append({name: answer})
    return out


def check_ground_truth(value: Any) -> list[dict[str, Any]]:
    """A ``ground_truth`` column in BFCL's possible-answer form, checked."""
    value = _json_field(value, "ground_truth", "bad_gt")
    if not isinstance(value, list):
        raise SkipRecord("bad_gt", f"ground_truth is a {type(value).__name__}, not a list")
    for item in value:
        if not isinstance(item, dict) or len(item) != 1:
            raise SkipRecord("bad_gt", "a ground_truth entry is not {function: {arguments}}")
        ((name, arguments),) = item.items()
        if not isinstance(arguments, dict) or not all(
            isinstance(v, list) for v in arguments.values()
        ):
            raise SkipRecord(
                "bad_gt", f"ground_truth of {name!r}: each argument needs a list of values"
            )
    return value


class FunctionCallReader:
    """Turns function-calling records into prompt records, for one prompt pool.

    ``data_format``: one of :data:`DATA_FORMATS`; ``possible_answer``: BFCL's
    possible-answer file ('' looks beside each data file, see the module doc). ``notes``
    says where possible answers came from (for the run's log).
    """

    def __init__(self, data_format: str = "auto", possible_answer: str = "") -> None:
        if data_format not in DATA_FORMATS:
            raise ValueError(f"data format {data_format!r}: expected one of {DATA_FORMATS}")
        self.data_format = data_format
        self.notes: list[str] = []
        self.answers: dict[str, tuple[Any, str]] = {}  # id: (ground truth, file:line)
        self._answer_files: set[str] = set()
        self._named_answers = bool(possible_answer)
        self.file_formats: dict[str, str] = {}
        if possible_answer:
            self._read_answers(Path(possible_answer), "--possible_answer")

    def open_file(self, path: str) -> None:
        """Before reading ``path``: its BFCL possible answers, when they lie beside it."""
        if self.data_format not in ("auto", "bfcl") or self._named_answers:
            return
        beside = Path(path).parent / "possible_answer" / Path(path).name
        if beside.is_file():
            self._read_answers(beside, f"beside {path}")

    def _read_answers(self, path: Path, why: str) -> None:
        if str(path) in self._answer_files:
            return
        if not path.is_file():
            raise FunctionCallDataError(f"{why}: no possible-answer file {path}")
        self._answer_files.add(str(path))
        count = 0
        for number, text, problem in iter_jsonl_lines(str(path)):
            try:
                if problem is not None or text is None:
                    raise ValueError(problem)
                entry = json.loads(text)
                # Checked when a record uses it (BFCL's other categories write answers of
                # other shapes, and their records are skipped for their own reasons).
                self.answers[str(entry["id"])] = (entry["ground_truth"], f"{path}:{number}")
            except (ValueError, KeyError, TypeError) as exc:
                raise FunctionCallDataError(
                    f"{path}:{number}: not a possible answer ({{id, ground_truth}}): {exc}"
                ) from None
            count += 1
        self.notes.append(f"possible answers: {count} from {path} ({why})")

    def see(self, source: str, record: Any) -> None:
        """Note the format of ``source`` from its first record (``auto``: a file's records
        are all read in the format of its first one)."""
        fresh = self.data_format == "auto" and source not in self.file_formats
        if fresh and isinstance(record, Mapping):
            self.file_formats[source] = detect_format(record)

    def format_of(self, source: str) -> str:
        """The format the records of ``source`` are read in."""
        if self.data_format != "auto":
            return self.data_format
        return self.file_formats.get(source, "prompts")

    def convert(self, record: dict[str, Any], source: str = "") -> dict[str, Any] | None:
        """The prompt record of a function-calling ``record`` from ``source`` (a file seen
        by :meth:`see`, or '' to detect the record's own format); None for a record of the
        pool's own shapes. Raises :class:`SkipRecord` for one that cannot be read."""
        fmt = self.format_of(source) if source else self.data_format
        if fmt == "auto":
            fmt = detect_format(record)
        if fmt == "prompts":
            return None
        messages, specs, calls, docs = getattr(self, f"_{fmt}")(record)
        if record.get(GROUND_TRUTH) is not None:
            truth = check_ground_truth(record[GROUND_TRUTH])
        elif fmt == "bfcl":
            truth = self._bfcl_truth(record)
        else:
            truth = calls_ground_truth(calls or [], specs)
        skip = _READ_FIELDS[fmt]
        out = {k: v for k, v in record.items() if k not in skip}
        out.update(
            messages=messages,
            tools=specs,
            ground_truth=truth,
            function_docs=docs,
            data_format=fmt,
        )
        return out

    # ---- the formats: (messages, specs, target calls, function docs) ----

    def _bfcl(self, record: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
        question = record.get("question")
        if isinstance(question, str):
            question = [[{"role": "user", "content": question}]]
        if not isinstance(question, list) or not question:
            raise SkipRecord("bad_messages", "question is not a list of turns")
        if len(question) != 1:
            raise SkipRecord(
                "bad_messages", f"question has {len(question)} turns: one turn is read"
            )
        turn = question[0]
        messages = [turn] if isinstance(turn, dict) else turn
        docs = record.get("function")
        return messages, _specs(docs), None, docs

    def _bfcl_truth(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        if record.get("possible_answer") is not None:
            return check_ground_truth(record["possible_answer"])
        key = str(record.get("id", ""))
        if key in self.answers:
            value, where = self.answers[key]
            try:
                return check_ground_truth(value)
            except SkipRecord as skip:
                raise SkipRecord(skip.reason, f"{where}: {skip.detail}") from None
        if "irrelevance" in key:
            return []
        raise SkipRecord(
            "bad_gt",
            f"no possible answer for id {key!r} (a ground_truth column, or BFCL's "
            "possible-answer file: --possible_answer)",
        )

    def _xlam(self, record: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
        query = record.get("query")
        if not isinstance(query, str) or not query.strip():
            raise SkipRecord("no_messages", "query is not text")
        docs = _json_field(record.get("tools"), "tools", "bad_tools")
        answers = _json_field(record.get("answers"), "answers", "bad_tool_calls")
        if not isinstance(answers, list):
            raise SkipRecord("bad_tool_calls", "answers is not a list of calls")
        calls = _calls(answers)
        return [{"role": "user", "content": query}], _specs(docs), calls, docs

    def _openai(self, record: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
        messages = record.get("messages")
        if not isinstance(messages, list):
            raise SkipRecord("bad_messages", "messages is not a list")
        roles = [m.get("role") if isinstance(m, Mapping) else None for m in messages]
        if "assistant" not in roles:
            raise SkipRecord("no_messages", "no assistant turn to take as the target")
        at = len(roles) - 1 - roles[::-1].index("assistant")
        calls = _calls(messages[at].get("tool_calls"))
        docs = _json_field(record.get("tools"), "tools", "bad_tools")
        return messages[:at], _specs(docs or []), calls, docs

    def _hermes(self, record: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
        turns = record.get("conversations")
        if not isinstance(turns, list):
            raise SkipRecord("bad_messages", "conversations is not a list")
        docs: Any = record.get("tools")
        prompt: list[Any] = []
        read = [_turn(turn) for turn in turns]
        calling = any(who == "assistant" and "<tool_call>" in text for who, text in read)
        for turn, (who, text) in zip(turns, read, strict=True):
            if who == "system" and "<tools>" in text:
                docs = _tool_list(_between(text, "<tools>", "</tools>")[0])
                continue
            if who == "assistant":
                blocks = _between(text, "<tool_call>", "</tool_call>")
                if blocks or not calling:  # the first turn with calls, else the first reply
                    calls = _calls([_literal(b, "a <tool_call> block") for b in blocks])
                    docs = _json_field(docs, "tools", "bad_tools")
                    return prompt, _specs(docs or []), calls, docs
            prompt.append(turn)
        raise SkipRecord("no_messages", "no gpt turn to take as the target")


def _turn(turn: Any) -> tuple[str, str]:
    """``(role, text)`` of a ShareGPT turn (``gpt`` read as ``assistant``)."""
    if not isinstance(turn, Mapping):
        raise SkipRecord("bad_message", "a turn is not an object")
    who = str(turn.get("from", turn.get("role", ""))).strip().lower()
    value = turn.get("value", turn.get("content", ""))
    return ("assistant" if who == "gpt" else who), (value if isinstance(value, str) else "")


def _between(text: str, start: str, end: str) -> list[str]:
    """The texts between each ``start`` and the next ``end`` (an unclosed one: to the end)."""
    out, at = [], 0
    while True:
        begin = text.find(start, at)
        if begin < 0:
            return out
        begin += len(start)
        close = text.find(end, begin)
        out.append(text[begin : close if close >= 0 else len(text)].strip())
        if close < 0:
            return out
        at = close + len(end)


def _tool_list(text: str) -> list[Any]:
    """The tools of a ``<tools>`` block: one list, or one object per line."""
    try:
        value = _literal(text, "the <tools> block")
    except SkipRecord:
        lines = [line for line in text.splitlines() if line.strip()]
        value = [_literal(line, "a line of the <tools> block", "bad_tools") for line in lines]
    tools = object_list(value)
    if tools is None:
        raise SkipRecord("bad_tools", "the <tools> block is not a list of functions")
    return tools


__all__ = [
    "DATA_FORMATS",
    "FUNCTION_CALL_FORMATS",
    "FUNCTION_DOCS",
    "GROUND_TRUTH",
    "FunctionCallDataError",
    "FunctionCallReader",
    "calls_ground_truth",
    "check_ground_truth",
    "detect_format",
]
