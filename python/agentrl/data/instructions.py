"""The system instruction that tells the policy how to use the calculator and answer."""

from __future__ import annotations

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

__all__ = ["ANSWER_INSTRUCTION"]
