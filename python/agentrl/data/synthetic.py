"""Seeded generator of tool-use tasks in Chinese and English, with reference solutions.

Task kinds: ``math`` (1-3 arithmetic expressions to evaluate with ``calculate_math``),
``unit`` (one ``unit_converter`` call), ``time`` (one ``get_current_time`` call) and
``none`` (a distractor that needs no tool). Each task records the tool calls that solve
it; ground truth comes from running those calls through the built-in tools, i.e. from the
Rust evaluator and ``format_number``, exactly what the reward compares against.

Task ``i`` of seed ``s`` depends only on ``(s, i)``, so any slice of the stream can be
regenerated on its own (``start``), e.g. held-out tasks after a training range.

Demonstrations can be imperfect on purpose (``shortcut_rate``): like an annotator who does
easy sums in their head, they then answer some one-step whole-number expressions (``7 + 680``,
``50 ** 3``, ``6 // 24``) without calling the tool. The answer is still right, but a model
that copies the habit has to guess those results; reinforcement learning, rewarded for
exact answers, can unlearn it. Which expressions are eligible is the ``shortcut_scope``:
``head_math`` (those one-step whole-number ones, wherever they stand) or ``one_expression``
(the expression of every math task that asks for just one result, whatever it is: an
annotator who answers single questions outright, so a whole task goes without a call).
"""

from __future__ import annotations

import json
import math
import os
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentrl.data.arith import STYLES, ExprConfig, random_expression, render_expression
from agentrl.data.instructions import ANSWER_INSTRUCTION
from agentrl.parsing import canonicalize_expression, extract_expressions
from agentrl.tools.builtin import FIXED_TIMES, builtin_registry
from agentrl.tools.registry import tool_message
from agentrl.utils.atomic import atomic_file

KINDS = ("math", "unit", "time", "none")

# One operation on two whole numbers with a whole-number result: what one does in one's head.
HEAD_MATH_OPERATORS = frozenset({"+", "-", "*", "**", "%", "//"})
HEAD_MATH_LIMIT = 10_000  # results of four digits at most
# Which expressions a demonstration may answer without the tool (SyntheticTask.shortcuts).
SHORTCUT_SCOPES = ("head_math", "one_expression")
DEFAULT_SHORTCUT_SCOPE = "head_math"
SHORTCUT_SCOPE_HELP = (
    "which expressions --shortcut_rate applies to: head_math (one-step whole-number ones, "
    "wherever they stand) or one_expression (that of every math task asking for one result: "
    f"the whole task is answered without a call); default {DEFAULT_SHORTCUT_SCOPE}"
)
# The share of each task kind the generator draws (TaskConfig.mix; `--mix` of gen-data, sft).
DEFAULT_MIX: tuple[tuple[str, float], ...] = (
    ("math", 0.8),
    ("unit", 0.08),
    ("time", 0.05),
    ("none", 0.07),
)

_MATH_EN = {
    1: (
        "Compute {0}.",
        "What is {0}?",
        "Calculate {0}.",
        "Please evaluate {0}.",
        "Use the calculator to work out {0}.",
        "How much is {0}?",
    ),
    2: (
        "Compute {0} and {1}.",
        "Calculate {0}, then {1}.",
        "What are {0} and {1}?",
        "Evaluate these in order: {0}; {1}.",
    ),
    3: (
        "Compute {0}, {1} and {2}.",
        "Evaluate in order: {0}; {1}; {2}.",
        "Work out {0}, then {1}, then {2}.",
    ),
}
_MATH_ZH = {
    1: ("计算{0}", "请计算{0}。", "{0}等于多少？", "帮我算一下{0}", "用计算器算出{0}的结果。"),
    2: ("计算{0}和{1}", "请依次计算{0}、{1}。", "先算{0}，再算{1}。"),
    3: ("依次计算：{0}；{1}；{2}", "请计算{0}、{1}和{2}。", "先算{0}，再算{1}，最后算{2}。"),
}
_UNIT_PAIRS = (
    ("km", "miles"),
    ("miles", "km"),
    ("kg", "pounds"),
    ("pounds", "kg"),
    ("meters", "feet"),
    ("feet", "meters"),
    ("celsius", "fahrenheit"),
    ("fahrenheit", "celsius"),
)
_UNIT_EN = (
    "Convert {v} {a} to {b}.",
    "How many {b} is {v} {a}?",
    "Please convert {v} {a} into {b}.",
)
_UNIT_ZH = ("把{v} {a}换算成{b}。", "{v} {a}等于多少{b}？", "请将{v} {a}转换为{b}。")
_TIME_EN = (
    "What time is it in {tz}?",
    "Tell me the current time in {tz}.",
    "Current time in {tz}?",
)
_TIME_ZH = ("现在{tz}几点？", "查询{tz}的当前时间。", "{tz}现在是什么时间？")
_FACTS_EN = (
    ("How many days are in a week?", "7"),
    ("How many hours are in a day?", "24"),
    ("How many minutes are in an hour?", "60"),
    ("How many sides does a triangle have?", "3"),
    ("How many months are in a year?", "12"),
)
_FACTS_ZH = (
    ("一周有几天？", "7"),
    ("一天有多少小时？", "24"),
    ("一小时有多少分钟？", "60"),
    ("三角形有几条边？", "3"),
    ("一年有几个月？", "12"),
)


@dataclass(frozen=True)
class TaskConfig:
    """What to generate: the mix of kinds and languages and the arithmetic difficulty."""

    min_exprs: int = 1
    max_exprs: int = 3
    expr: ExprConfig = field(default_factory=ExprConfig)
    mix: tuple[tuple[str, float], ...] = DEFAULT_MIX
    zh_ratio: float = 0.5
    fullwidth_ratio: float = 0.1
    max_abs_result: float = 1e9
    max_attempts: int = 200

    def __post_init__(self) -> None:
        if not 1 <= self.min_exprs <= self.max_exprs <= 3:
            raise ValueError("need 1 <= min_exprs <= max_exprs <= 3")
        unknown = [k for k, _ in self.mix if k not in KINDS]
        if unknown or not any(w > 0 for _, w in self.mix):
            raise ValueError(f"mix needs positive weights over {KINDS}, got {self.mix}")


@dataclass
class SyntheticTask:
    """One generated task and its reference solution."""

    id: str
    kind: str
    lang: str
    text: str
    gt: list[str]
    calls: list[dict[str, Any]]
    results: list[Any]
    difficulty: dict[str, int] = field(default_factory=dict)
    # Indices of the expressions simple enough to do in one's head (HEAD_MATH_OPERATORS).
    head_math: tuple[int, ...] = ()

    @property
    def answer(self) -> str:
        """The final assistant message of the demonstration."""
        return "<answer>" + ", ".join(self.gt) + "</answer>"

    def prompt_record(self, tools: list[dict[str, Any]]) -> dict[str, Any]:
        """A prompt-pool line: the user turn, the tools, the ground truth and the solution."""
        return {
            "id": self.id,
            "kind": self.kind,
            "lang": self.lang,
            "messages": [{"role": "user", "content": self.text}],
            "tools": tools,
            "gt": self.gt,
            "calls": self.calls,
            "difficulty": self.difficulty,
        }

    def shortcut_candidates(self, scope: str = DEFAULT_SHORTCUT_SCOPE) -> tuple[int, ...]:
        """The expressions ``scope`` (one of `SHORTCUT_SCOPES`) lets a demonstration skip."""
        if scope == "head_math":
            return self.head_math
        if scope == "one_expression":
            return (0,) if self.kind == "math" and len(self.calls) == 1 else ()
        raise ValueError(f"shortcut scope {scope!r}: expected one of {SHORTCUT_SCOPES}")

    def shortcuts(self, rate: float, scope: str = DEFAULT_SHORTCUT_SCOPE) -> set[int]:
        """The expressions a demonstration answers without the tool.

        Each of the scope's candidates is skipped with probability ``rate``, decided by the
        task id alone, so the same task always gets the same demonstration.
        """
        candidates = self.shortcut_candidates(scope)
        if rate <= 0.0 or not candidates:
            return set()
        rng = random.Random(f"agentrl-shortcut:{self.id}")
        return {i for i in candidates if rng.random() < rate}

    def demo_messages(
        self,
        instruction: str = ANSWER_INSTRUCTION,
        shortcut_rate: float = 0.0,
        shortcut_scope: str = DEFAULT_SHORTCUT_SCOPE,
    ) -> list[dict[str, Any]]:
        """The full demonstration: instruction, task, tool calls, tool results, answer."""
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": instruction},
            {"role": "user", "content": self.text},
        ]
        skipped = self.shortcuts(shortcut_rate, shortcut_scope)
        kept = [i for i in range(len(self.calls)) if i not in skipped]
        if kept:
            calls = [self.calls[i] for i in kept]
            messages.append({"role": "assistant", "content": "", "tool_calls": calls})
            messages.extend(
                {"role": "tool", "content": tool_message(self.results[i])} for i in kept
            )
        messages.append({"role": "assistant", "content": self.answer})
        return messages

    def demo_record(
        self,
        tools: list[dict[str, Any]],
        instruction: str = ANSWER_INSTRUCTION,
        shortcut_rate: float = 0.0,
        shortcut_scope: str = DEFAULT_SHORTCUT_SCOPE,
    ) -> dict[str, Any]:
        """A supervised-warm-start line (MiniMind SFT layout: ``conversations`` + tools)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "lang": self.lang,
            "conversations": self.demo_messages(instruction, shortcut_rate, shortcut_scope),
            "tools": tools,
            "gt": self.gt,
            "calls": self.calls,
            "difficulty": self.difficulty,
        }


class TaskGenerator:
    """Generates :class:`SyntheticTask` objects; deterministic in ``(seed, index)``."""

    def __init__(self, config: TaskConfig | None = None, seed: int = 0) -> None:
        self.config = config or TaskConfig()
        self.seed = int(seed)
        self.registry = builtin_registry(time_mode="fixed")
        kinds = [(k, w) for k, w in self.config.mix if w > 0]
        self._kinds = [k for k, _ in kinds]
        self._weights = [w for _, w in kinds]

    def tools(self) -> list[dict[str, Any]]:
        """The tool specs every generated task offers."""
        return self.registry.specs()

    def task(self, index: int) -> SyntheticTask:
        rng = random.Random(f"agentrl-task:{self.seed}:{index}")
        kind = rng.choices(self._kinds, self._weights)[0]
        lang = "zh" if rng.random() < self.config.zh_ratio else "en"
        task_id = f"s{self.seed}-{index:07d}"
        for _ in range(self.config.max_attempts):
            build = getattr(self, f"_{kind}")
            task = build(rng, lang, task_id)
            if task is not None:
                return task
        raise RuntimeError(f"could not generate a valid {kind} task for index {index}")

    def tasks(self, n: int, start: int = 0) -> Iterator[SyntheticTask]:
        for index in range(start, start + n):
            yield self.task(index)

    def _solve(self, calls: list[dict[str, Any]]) -> list[Any] | None:
        events = self.registry.execute_many(calls)
        if not all(e.ok for e in events):
            return None
        return [e.result for e in events]

    # ---- kinds ----

    def _math(self, rng: random.Random, lang: str, task_id: str) -> SyntheticTask | None:
        cfg = self.config
        count = rng.randint(cfg.min_exprs, cfg.max_exprs)
        style = "fullwidth" if rng.random() < cfg.fullwidth_ratio else rng.choice(STYLES[:3])
        caret = rng.random() < cfg.expr.caret_prob
        surfaces: list[str] = []
        head_math: list[int] = []
        ops = digits = 0
        for index in range(count):
            pieces = random_expression(rng, cfg.expr)
            if _is_head_math(pieces):
                head_math.append(index)
            surfaces.append(render_expression(pieces, style, caret))
            ops += len(pieces) // 2
            digits = max([digits, *(len(p) for p in pieces if p.isdigit())])
        canon = [canonicalize_expression(s) for s in surfaces]
        if len(set(canon)) != len(canon):
            return None
        template = rng.choice((_MATH_ZH if lang == "zh" else _MATH_EN)[count])
        text = template.format(*surfaces)
        found = [canonicalize_expression(e) for e in extract_expressions(text, 16)]
        if found != canon:
            return None
        calls = [{"name": "calculate_math", "arguments": {"expression": s}} for s in surfaces]
        results = self._solve(calls)
        if results is None:
            return None
        if any(
            not math.isfinite(r["value"]) or abs(r["value"]) > cfg.max_abs_result for r in results
        ):
            return None
        difficulty = {"exprs": count, "ops": ops, "digits": digits}
        gt = [r["result"] for r in results]
        head_math = [i for i in head_math if abs(results[i]["value"]) < HEAD_MATH_LIMIT]
        return SyntheticTask(
            task_id, "math", lang, text, gt, calls, results, difficulty, tuple(head_math)
        )

    def _unit(self, rng: random.Random, lang: str, task_id: str) -> SyntheticTask | None:
        source, target = rng.choice(_UNIT_PAIRS)
        value: int | float = rng.randint(1, 500)
        if rng.random() < 0.3:
            value = round(value + rng.randint(1, 9) / 10, 1)
        template = rng.choice(_UNIT_ZH if lang == "zh" else _UNIT_EN)
        text = template.format(v=value, a=source, b=target)
        if extract_expressions(text, 16):
            return None
        args = {"value": value, "from_unit": source, "to_unit": target}
        calls = [{"name": "unit_converter", "arguments": args}]
        results = self._solve(calls)
        if results is None:
            return None
        return SyntheticTask(task_id, "unit", lang, text, [results[0]["result"]], calls, results)

    def _time(self, rng: random.Random, lang: str, task_id: str) -> SyntheticTask | None:
        zone = rng.choice(sorted(FIXED_TIMES))
        text = rng.choice(_TIME_ZH if lang == "zh" else _TIME_EN).format(tz=zone)
        calls = [{"name": "get_current_time", "arguments": {"timezone": zone}}]
        results = self._solve(calls)
        if results is None or extract_expressions(text, 16):
            return None
        return SyntheticTask(task_id, "time", lang, text, [results[0]["datetime"]], calls, results)

    def _none(self, rng: random.Random, lang: str, task_id: str) -> SyntheticTask | None:
        zh = lang == "zh"
        roll = rng.random()
        if roll < 0.3:
            text, answer = rng.choice(_FACTS_ZH if zh else _FACTS_EN)
        else:
            a, b = rng.sample(range(1, 1000), 2)
            if roll < 0.55:
                text = f"{a}和{b}哪个更大？" if zh else f"Which is larger, {a} or {b}?"
                answer = str(max(a, b))
            elif roll < 0.8:
                text = f"{a}和{b}哪个更小？" if zh else f"Which is smaller, {a} or {b}?"
                answer = str(min(a, b))
            else:
                text = f"请原样重复这个数：{a}" if zh else f"Repeat this number exactly: {a}."
                answer = str(a)
        if extract_expressions(text, 16):
            return None
        return SyntheticTask(task_id, "none", lang, text, [answer], [], [])


def _is_head_math(pieces: list[str]) -> bool:
    """One operation on two whole numbers (a whole result; its size is checked once solved)."""
    if len(pieces) != 3 or pieces[1] not in HEAD_MATH_OPERATORS:
        return False
    return pieces[0].isdigit() and pieces[2].isdigit()


def format_mix(mix: tuple[tuple[str, float], ...]) -> str:
    """``(("math", 0.8), ("unit", 0.1))`` to ``"math=0.8,unit=0.1"`` (what `parse_mix` reads)."""
    return ",".join(f"{name}={weight:g}" for name, weight in mix)


MIX_HELP = (
    f"task-kind weights: {', '.join(KINDS)} (none: distractors needing no tool); "
    f"default {format_mix(DEFAULT_MIX)}"
)


def parse_mix(text: str) -> tuple[tuple[str, float], ...]:
    """``"math=0.8,unit=0.1"`` to ``(("math", 0.8), ("unit", 0.1))``."""
    out = []
    for part in text.split(","):
        if not part.strip():
            continue
        name, sep, weight = part.partition("=")
        if not sep:
            raise ValueError(f"mix entry {part!r} is not name=weight")
        try:
            out.append((name.strip(), float(weight)))
        except ValueError:
            raise ValueError(f"mix entry {part!r}: weight {weight!r} is not a number") from None
    return tuple(out)


def write_tasks(
    path: str,
    tasks: Iterator[SyntheticTask] | list[SyntheticTask],
    tools: list[dict[str, Any]],
    sft: bool = False,
    shortcut_rate: float = 0.0,
    shortcut_scope: str = DEFAULT_SHORTCUT_SCOPE,
) -> dict[str, int]:
    """Write prompt-pool (or, with ``sft``, demonstration) JSONL atomically; counts by kind.

    ``shortcut_rate``: share of the ``shortcut_scope``'s expressions the demonstrations
    answer without the tool (see the module doc).
    """
    counts: dict[str, int] = {}
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        for task in tasks:
            record = (
                task.demo_record(tools, shortcut_rate=shortcut_rate, shortcut_scope=shortcut_scope)
                if sft
                else task.prompt_record(tools)
            )
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            counts[task.kind] = counts.get(task.kind, 0) + 1
            counts[f"lang_{task.lang}"] = counts.get(f"lang_{task.lang}", 0) + 1
    return counts


def generate_tasks(
    n: int, seed: int = 0, config: TaskConfig | Mapping[str, Any] | None = None, start: int = 0
) -> list[SyntheticTask]:
    """``n`` tasks from index ``start`` of the stream of ``seed``."""
    if isinstance(config, Mapping):
        config = TaskConfig(**config)
    return list(TaskGenerator(config, seed).tasks(n, start))


__all__ = [
    "DEFAULT_MIX",
    "DEFAULT_SHORTCUT_SCOPE",
    "HEAD_MATH_OPERATORS",
    "KINDS",
    "MIX_HELP",
    "SHORTCUT_SCOPES",
    "SHORTCUT_SCOPE_HELP",
    "SyntheticTask",
    "TaskConfig",
    "TaskGenerator",
    "format_mix",
    "generate_tasks",
    "parse_mix",
    "write_tasks",
]
