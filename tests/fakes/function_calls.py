"""Function-calling data files in each format the prompt pool reads, made from generated
tasks (`agentrl.data.function_tasks`): BFCL (with its possible-answer file beside it),
xLAM, OpenAI and Hermes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentrl.data.function_tasks import CallTask, CallTaskGenerator

FORMATS = ("bfcl", "xlam", "openai", "hermes")


def _doc(spec: dict[str, Any]) -> dict[str, Any]:
    """A spec as a BFCL function doc (``"type": "dict"``)."""
    fn = json.loads(json.dumps(spec["function"]))
    fn["parameters"]["type"] = "dict"
    return fn


def _bfcl(task: CallTask) -> dict[str, Any]:
    question = [[{"role": "user", "content": task.text}]]
    return {"id": task.id, "question": question, "function": [_doc(s) for s in task.tools]}


def _xlam(task: CallTask) -> dict[str, Any]:
    return {
        "id": task.id,
        "query": task.text,
        "tools": json.dumps([s["function"] for s in task.tools], ensure_ascii=False),
        "answers": json.dumps(task.calls, ensure_ascii=False),
    }


def _hermes(task: CallTask) -> dict[str, Any]:
    tools = json.dumps(task.tools, ensure_ascii=False)
    system = f"You may call functions.\n<tools>\n{tools}\n</tools>"
    blocks = "\n".join(
        f"<tool_call>\n{json.dumps(c, ensure_ascii=False)}\n</tool_call>" for c in task.calls
    )
    reply = blocks or task.messages()[-1]["content"]
    turns = [
        {"from": "system", "value": system},
        {"from": "human", "value": task.text},
        {"from": "gpt", "value": reply},
    ]
    return {"id": task.id, "conversations": turns}


def write_function_call_data(root: Path, fmt: str, n: int = 8, seed: int = 5) -> Path:
    """``n`` generated tasks in format ``fmt`` (one of :data:`FORMATS`) under ``root``."""
    tasks = list(CallTaskGenerator(seed=seed).tasks(n))
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{fmt}.jsonl"
    if fmt == "openai":
        records = [t.record() for t in tasks]
    else:
        records = [{"bfcl": _bfcl, "xlam": _xlam, "hermes": _hermes}[fmt](t) for t in tasks]
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    if fmt == "bfcl":
        answers = root / "possible_answer"
        answers.mkdir(exist_ok=True)
        truths = [{"id": t.id, "ground_truth": t.ground_truth} for t in tasks]
        text = "\n".join(json.dumps(a, ensure_ascii=False) for a in truths)
        (answers / path.name).write_text(text + "\n", encoding="utf-8")
    return path


def first_value(value: object) -> object:
    """The first acceptable value of a possible answer's argument, nested dicts and lists of
    dicts included."""
    if isinstance(value, dict):
        return {k: v[0] for k, v in value.items() if isinstance(v, list) and v and v[0] != ""}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [first_value(v) for v in value]
    return value


def answer_text(truth: list[dict]) -> str:
    """A possible answer rendered as tagged calls, each argument at its first acceptable
    value; no call: a plain reply."""
    out = []
    for entry in truth:
        ((name, arguments),) = entry.items()
        call = {k: first_value(v[0]) for k, v in arguments.items() if v and v[0] != ""}
        out.append(f"<tool_call>{json.dumps({'name': name, 'arguments': call})}</tool_call>")
    return "\n".join(out) or "No function fits."


__all__ = ["FORMATS", "answer_text", "first_value", "write_function_call_data"]
