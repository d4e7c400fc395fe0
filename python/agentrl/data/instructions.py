"""The system instruction that tells the policy how to use the calculator and answer."""

from __future__ import annotations

# Added to the system turn of every prompt that offers `calculate_math` (see
# `PromptPool(inject_answer_instruction=...)`) and used verbatim in generated
# demonstrations, so supervised warm start and RL show the model the same words.
ANSWER_INSTRUCTION = (
    "You are a careful assistant that uses tools. Never work out arithmetic in your head: "
    "call calculate_math once for each separate expression in the question, in the order "
    "the expressions appear, and use no other tool for arithmetic. A call looks like "
    '<tool_call>{"name": "calculate_math", "arguments": {"expression": "2+3"}}</tool_call>. '
    "When every result is back, reply with nothing but <answer>r1, r2</answer>: the results "
    "in question order, separated by commas, without explanation."
)

__all__ = ["ANSWER_INSTRUCTION"]
