"""Prompt data: the prompt pool (every JSONL record shape it reads) and synthetic tasks."""

from agentrl.data.instructions import ANSWER_INSTRUCTION, inject_instruction
from agentrl.data.jsonl_lines import iter_jsonl_lines
from agentrl.data.prompt_pool import PromptPool, PromptPoolError
from agentrl.data.samples import MALFORMED_REASONS, POLICY_REASONS, PromptSample, SkippedLine
from agentrl.data.splits import build_fixed_eval_indices, shard_prompt_pool, split_prompt_pool
from agentrl.data.task_text import (
    prompt_text_from_messages,
    task_text_from_messages,
    task_text_from_prompt,
)

__all__ = [
    "ANSWER_INSTRUCTION",
    "MALFORMED_REASONS",
    "POLICY_REASONS",
    "PromptPool",
    "PromptPoolError",
    "PromptSample",
    "SkippedLine",
    "build_fixed_eval_indices",
    "inject_instruction",
    "iter_jsonl_lines",
    "prompt_text_from_messages",
    "shard_prompt_pool",
    "split_prompt_pool",
    "task_text_from_messages",
    "task_text_from_prompt",
]
