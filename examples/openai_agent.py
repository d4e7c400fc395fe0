"""An agent written against the plain `openai` client, trained unchanged by agentrl.

It answers an arithmetic question with a calculator it runs itself: it asks the model,
executes the tool calls it gets back, sends the results, and stops when the model
answers without calling a tool. The reward is the share of the record's ground-truth
numbers found in the final answer. agentrl only hands it the endpoint to use:

    agentrl train --agent examples.openai_agent:agent --total_steps 2

(on the built-in arithmetic tasks; ``--data FILE`` for your own records). Outside
training, point ``endpoint`` at any OpenAI-compatible server and the agent runs as is.
"""

from __future__ import annotations

import ast
import json
import operator
import re
from typing import Any

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculate_math",
        "description": "Evaluate an arithmetic expression",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. 2*(3+4)"}},
            "required": ["expression"],
        },
    },
}
_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def calculate(expression: str) -> float:
    """+ - * / ** % over numbers, nothing else (no names, no calls)."""

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            right = value(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 64:
                raise ValueError("exponent too large")
            return _OPS[type(node.op)](value(node.left), right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.operand))
        raise ValueError(f"unsupported expression: {ast.dump(node)[:40]}")

    text = str(expression).replace("×", "*").replace("÷", "/")[:200]
    return value(ast.parse(text, mode="eval").body)


def run_tool(name: str, arguments: str) -> str:
    try:
        args = json.loads(arguments or "{}")
        if name != "calculate_math":
            return json.dumps({"error": f"unknown tool {name}"})
        result = calculate(args["expression"])
        return json.dumps({"result": round(result, 6)})
    except Exception as exc:  # the model sees the error and may try again
        return json.dumps({"error": f"{type(exc).__name__}: {exc}"})


def score(answer: str, expected: list[str]) -> float:
    """The share of the expected numbers that the answer states (as whole numbers)."""
    if not expected:
        return 0.0
    stated = set()
    for text in re.findall(r"-?\d+(?:\.\d+)?", answer):
        stated.add(round(float(text), 6))
    hits = 0
    for gt in expected:
        try:
            hits += round(float(gt), 6) in stated
        except ValueError:
            hits += str(gt) in answer
    return hits / len(expected)


def agent(endpoint: Any, sample: dict[str, Any], max_turns: int = 3) -> dict[str, float]:
    """One episode: the question, tool calls run here, the final answer scored."""
    client = endpoint.client  # an openai.OpenAI(base_url=..., api_key=...)
    messages = list(sample["messages"])
    tools_used = 0
    answer = ""
    for _ in range(max_turns):
        reply = (
            client.chat.completions.create(
                model=endpoint.model,
                messages=messages,
                tools=[CALCULATOR],
                temperature=0.7,
                max_tokens=96,
            )
            .choices[0]
            .message
        )
        messages.append(reply.model_dump(exclude_none=True))
        answer = reply.content or ""
        if not reply.tool_calls:
            break
        for call in reply.tool_calls:
            tools_used += 1
            result = run_tool(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return {"reward": score(answer, sample.get("gt") or []), "tool_calls": float(tools_used)}
