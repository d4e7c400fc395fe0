"""The system instruction that tells the policy how to use the calculator and answer."""

from __future__ import annotations

from typing import Any

from agentrl.tools.schema import MATH_TOOL

# Added to the system turn of every prompt that offers `calculate_math` (see
# `PromptPool(inject_answer_instruction=...)`) and used verbatim in generated
# demonstrations, so supervised warm start and RL show the model the same words.
ANSWER_INSTRUCTION = (
    "Do not do arithmetic in your head. Call calculate_math once for each expression in "
    "the question, in the order they appear, and use no other tool for arithmetic, e.g. "
    '<tool_call>{"name": "calculate_math", "arguments": {"expression": "2+3"}}</tool_call>. '
    "When all results are back, reply only <answer>r1, r2</answer>: the results in "
    "question order, separated by commas, nothing else."
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


__all__ = ["ANSWER_INSTRUCTION", "inject_instruction"]
