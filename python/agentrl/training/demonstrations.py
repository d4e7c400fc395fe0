"""Demonstrations for the behaviour-cloning loss, built from the prompts of a batch.

For each math prompt we build two demonstrations from the prompt alone: (1) after the
prompt, the canonical ``<tool_call>`` for every arithmetic expression in the task; (2)
after those calls and their tool results, ``<answer>v1, v2</answer>``. Building them
runs the expression extractor and the calculator tool, which is why this lives beside the
training step rather than in the pure loss math of `agentrl.rl.bc`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch

from agentrl.data.task_text import task_text_from_messages
from agentrl.parsing import extract_expressions
from agentrl.rl.bc import (
    BCConfig,
    BCExample,
    bc_coef_at_step,
    bc_cross_entropy,
    bc_tensors,
    tokenize_bc_examples,
)
from agentrl.tools.builtin import calculate_math

__all__ = [
    "CALL_STYLES",
    "build_math_bc_examples",
    "canonical_tool_call",
    "compute_bc_aux_loss",
]

Message = Mapping[str, Any]
RenderFn = Callable[[Sequence[Message], Sequence[Mapping[str, Any]] | None], str]


CALL_STYLES = ("compact", "template")


def canonical_tool_call(name: str, arguments: Mapping[str, Any], style: str = "compact") -> str:
    """The one spelling of a call we teach, non-ASCII kept, in the tags.

    ``compact``: compact JSON. ``template``: exactly what the chat template
    writes for an assistant ``tool_calls`` entry (see :mod:`agentrl.chat`).
    """
    if style == "compact":
        body = json.dumps(
            {"name": name, "arguments": dict(arguments)}, ensure_ascii=False, separators=(",", ":")
        )
        return "<tool_call>" + body + "</tool_call>"
    if style == "template":
        args = json.dumps(dict(arguments), ensure_ascii=False)
        return '<tool_call>\n{"name": "' + name + '", "arguments": ' + args + "}\n</tool_call>"
    raise ValueError(f"unknown bc_call_style {style!r} ({', '.join(CALL_STYLES)})")


def build_math_bc_examples(
    messages_batch: Sequence[Sequence[Message]],
    tools_batch: Sequence[Sequence[Mapping[str, Any]] | None],
    gt_batch: Sequence[Sequence[Any] | None],
    *,
    render: RenderFn,
    default_tools: Sequence[Mapping[str, Any]] | None,
    max_examples: int = 24,
    max_exprs: int = 8,
    call_style: str = "compact",
) -> list[BCExample]:
    """Up to ``max_examples`` demonstrations (two per usable math prompt).

    The final answer uses the ground truth when it lists exactly one value per
    expression found; otherwise the tool results (the expression extractor and the
    data can disagree, and a wrong target is worse than a tool-derived one).
    """
    examples: list[BCExample] = []
    for messages, tools, gt in zip(messages_batch, tools_batch, gt_batch, strict=True):
        if len(examples) >= max_examples:
            break
        tools = tools or default_tools
        exprs = extract_expressions(task_text_from_messages(messages), max(1, int(max_exprs)))
        calls: list[str] = []
        results: list[dict[str, Any]] = []
        for expr in exprs:
            try:
                result = calculate_math({"expression": expr})
            except Exception:  # a tool failure only means no demonstration for it
                continue
            calls.append(canonical_tool_call("calculate_math", {"expression": expr}, call_style))
            results.append(result)
        if not calls:
            continue
        gt_values = [str(x).strip() for x in (gt or []) if str(x).strip()]
        if not (gt_values and len(gt_values) == len(results)):
            gt_values = [str(r.get("result", "")) for r in results]
        call_text = "\n".join(calls)
        examples.append(BCExample(render(messages, tools), call_text))
        history = [dict(m) for m in messages] + [{"role": "assistant", "content": call_text}]
        for result in results:
            content = json.dumps(result, ensure_ascii=False, separators=(",", ":"))
            history.append({"role": "tool", "content": content})
        answer = "<answer>" + ", ".join(gt_values) + "</answer>"
        examples.append(BCExample(render(history, tools), answer))
    return examples[:max_examples]


def compute_bc_aux_loss(
    model: torch.nn.Module,
    tokenizer: Any,
    messages_batch: Sequence[Sequence[Message]],
    tools_batch: Sequence[Sequence[Mapping[str, Any]] | None],
    gt_batch: Sequence[Sequence[Any] | None],
    *,
    step: int,
    config: BCConfig,
    render: RenderFn,
    default_tools: Sequence[Mapping[str, Any]] | None,
    device: torch.device | str = "cpu",
    autocast: Callable[[], AbstractContextManager[object]] | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """(unweighted BC loss, metrics with its coefficient); zero loss when BC is off or idle.

    The caller adds ``metrics["bc/coef"] * loss`` to the policy loss.
    """
    coef = bc_coef_at_step(step, config)
    zero = torch.zeros((), device=device)
    if coef <= 0:
        return zero, {"bc/loss": 0.0, "bc/coef": 0.0, "bc/examples": 0.0}
    examples = build_math_bc_examples(
        messages_batch,
        tools_batch,
        gt_batch,
        render=render,
        default_tools=default_tools,
        max_examples=config.bc_max_examples,
        max_exprs=config.bc_max_exprs,
        call_style=config.bc_call_style,
    )
    pad_id = (
        tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    )
    rows = tokenize_bc_examples(
        examples,
        lambda text: list(tokenizer(text, add_special_tokens=False)["input_ids"]),
        tokenizer.eos_token_id if tokenizer.eos_token_id is not None else pad_id,
        int(config.bc_max_len),
    )
    if not rows:
        return zero, {"bc/loss": 0.0, "bc/coef": float(coef), "bc/examples": 0.0}
    input_ids, attention, labels = bc_tensors(rows, pad_id, device)
    loss = bc_cross_entropy(model, input_ids, attention, labels, autocast)
    return loss, {
        "bc/loss": float(loss.detach().item()),
        "bc/coef": float(coef),
        "bc/examples": float(len(rows)),
    }
