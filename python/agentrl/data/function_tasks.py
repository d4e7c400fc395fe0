"""Seeded generator of function-calling tasks in English and Chinese, with their answers.

A task is a request, the functions offered and the call(s) that answer it, in one of five
kinds (:data:`CALL_KINDS`, BFCL's categories): ``simple`` (one function offered, one
call), ``multiple`` (a choice among several functions, one call), ``parallel`` (one
function called for several values), ``parallel_multiple`` (several functions, each
called) and ``irrelevance`` (no offered function fits: the right answer is no call; about
half of these offer the neighbours of the function the request needs, of its domain). The
functions (`agentrl.data.function_catalog`) span weather, finance, maths, science, travel,
calendars, shopping, devices, language and text, with string, integer, number, boolean, enum,
array and nested-object arguments, and optional arguments with defaults that a request
may or may not mention.

Records are written in the OpenAI form the prompt pool reads as function calling
(`agentrl.data.function_calling`): ``messages`` (the request, then the assistant turn
whose ``tool_calls`` are the answer; ``"tool_calls": []`` when no call is), ``tools`` and
``ground_truth`` (BFCL's possible-answer form: a Chinese request's place names are also
accepted in English and the other way round). As demonstrations (``sft``) the same
conversation is written under ``conversations``: `agentrl sft` renders it in the model's
own chat template and tool-call format. Task ``i`` of seed ``s`` depends only on
``(s, i)``: a held-out set is another seed, or a ``start`` past the training range.
"""

from __future__ import annotations

import json
import math
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agentrl.data.function_calling import calls_ground_truth
from agentrl.data.function_catalog import FUNCTIONS, UNRELATED, Function
from agentrl.utils.atomic import atomic_file

CALL_KINDS = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance")
DEFAULT_CALL_MIX = (
    ("simple", 0.25),
    ("multiple", 0.25),
    ("parallel", 0.15),
    ("parallel_multiple", 0.15),
    ("irrelevance", 0.2),
)

_NO_CALL = {
    "en": "None of the available functions can do this.",
    "zh": "现有的函数都无法完成这个请求。",
}


@dataclass
class CallTask:
    """One generated function-calling task and its answer."""

    id: str
    kind: str
    lang: str
    text: str
    tools: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    ground_truth: list[dict[str, Any]]

    def messages(self) -> list[dict[str, Any]]:
        """The request and the assistant turn that answers it."""
        calls = [{"type": "function", "function": call} for call in self.calls]
        answer = "" if calls else _NO_CALL[self.lang]
        return [
            {"role": "user", "content": self.text},
            {"role": "assistant", "content": answer, "tool_calls": calls},
        ]

    def record(self, sft: bool = False) -> dict[str, Any]:
        """A prompt-pool line (``messages``) or a demonstration (``conversations``)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "lang": self.lang,
            "conversations" if sft else "messages": self.messages(),
            "tools": self.tools,
            "ground_truth": self.ground_truth,
        }


def _sentence(clauses: list[str], lang: str) -> str:
    if lang == "zh":
        head = "，".join(clauses[:-1])
        return "请" + (f"{head}，并{clauses[-1]}" if head else clauses[0]) + "。"
    head = ", ".join(clauses[:-1])
    text = f"{head} and {clauses[-1]}" if head else clauses[0]
    return f"Please {text}."


class CallTaskGenerator:
    """Generates :class:`CallTask` objects; deterministic in ``(seed, index)``."""

    def __init__(self, seed: int = 0, zh_ratio: float = 0.5, mix: Any = DEFAULT_CALL_MIX) -> None:
        self.seed = int(seed)
        self.zh_ratio = float(zh_ratio)
        names = [k for k, _ in mix]
        unknown = [k for k in names if k not in CALL_KINDS]
        if unknown:
            raise ValueError(f"unknown kinds {unknown}; the kinds are {', '.join(CALL_KINDS)}")
        twice = sorted({k for k in names if names.count(k) > 1})
        if twice:
            raise ValueError(f"kinds given twice: {twice}")
        weights = [float(w) for _, w in mix]
        if not all(math.isfinite(w) and w >= 0 for w in weights) or not any(weights):
            raise ValueError("the kinds' weights must be finite and >= 0, and one of them > 0")
        self._kinds = [k for k, w in mix if w > 0]
        self._weights = [w for _, w in mix if w > 0]

    def task(self, index: int) -> CallTask:
        rng = random.Random(f"agentrl-call-task:{self.seed}:{index}")
        kind = rng.choices(self._kinds, self._weights)[0]
        lang = "zh" if rng.random() < self.zh_ratio else "en"
        chosen, offered = self._functions(rng, kind)
        calls, clauses, also = [], [], []
        for function in chosen:
            required = function.spec["function"]["parameters"]["required"]
            key = required[0]
            for _ in range(20):  # parallel calls ask about different things
                draw = function.draw(rng, lang)
                en, zh, mentioned = rng.choice(function.asks)
                args = {k: v for k, v in draw.args.items() if k in required or k in mentioned}
                call = {"name": function.name, "arguments": args}
                same = [c for c in calls if c["name"] == function.name]
                if all(c["arguments"].get(key) != args.get(key) for c in same):
                    break
            clauses.append((zh if lang == "zh" else en).format(**draw.words))
            calls.append(call)
            also.append(draw.also)
        if kind == "irrelevance":
            text = self._unrelated(rng, lang, clauses)
            calls, also = [], []
        else:
            text = _sentence(clauses, lang)
        specs = [f.spec for f in offered]
        truth = calls_ground_truth([(c["name"], c["arguments"]) for c in calls], specs)
        for entry, extra in zip(truth, also, strict=True):
            (arguments,) = entry.values()
            for key, values in extra.items():
                if key in arguments:
                    arguments[key] = [*arguments[key], *values]
        task_id = f"fc{self.seed}-{index:07d}"
        return CallTask(task_id, kind, lang, text, json.loads(json.dumps(specs)), calls, truth)

    def tasks(self, n: int, start: int = 0) -> Iterator[CallTask]:
        for index in range(start, start + n):
            yield self.task(index)

    @staticmethod
    def _functions(rng: random.Random, kind: str) -> tuple[list[Function], list[Function]]:
        """(the functions the answer calls, in order; the functions offered)."""
        if kind == "simple":
            one = rng.choice(FUNCTIONS)
            return [one], [one]
        if kind == "parallel":
            one = rng.choice(FUNCTIONS)
            return [one] * rng.randint(2, 3), [one]
        if kind == "irrelevance":
            # Half the time the functions offered are the asked one's neighbours, of its own
            # domain (air quality for a weather request): names that sound right and cannot
            # serve it, as in BFCL's irrelevance. Otherwise, functions of other domains.
            asked = rng.choice(FUNCTIONS)
            near = [f for f in FUNCTIONS if f.domain == asked.domain and f is not asked]
            if near and rng.random() < 0.5:
                return [asked], near
            others = [f for f in FUNCTIONS if f.domain != asked.domain]
            return [asked], rng.sample(others, rng.randint(1, 3))
        count = 1 if kind == "multiple" else rng.randint(2, 3)
        offered = rng.sample(FUNCTIONS, rng.randint(count + 1, count + 3))
        chosen = rng.sample(offered, count)
        return chosen, offered

    @staticmethod
    def _unrelated(rng: random.Random, lang: str, clauses: list[str]) -> str:
        """A request no offered function fits: small talk, or the task of one not offered."""
        if rng.random() < 0.5:
            en, zh = rng.choice(UNRELATED)
            return zh if lang == "zh" else en
        return _sentence(clauses, lang)


def write_call_tasks(path: str, tasks: Iterator[CallTask], sft: bool = False) -> dict[str, int]:
    """Write prompt-pool (or, with ``sft``, demonstration) JSONL atomically; counts by kind
    and language."""
    counts: dict[str, int] = {}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        for task in tasks:
            handle.write(json.dumps(task.record(sft), ensure_ascii=False) + "\n")
            for key in (task.kind, f"lang_{task.lang}"):
                counts[key] = counts.get(key, 0) + 1
    return counts


__all__ = [
    "CALL_KINDS",
    "DEFAULT_CALL_MIX",
    "CallTask",
    "CallTaskGenerator",
    "write_call_tasks",
]
