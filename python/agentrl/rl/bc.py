"""Behaviour-cloning auxiliary loss on canonical tool-call demonstrations (the first seed).

Early in RL a small policy rarely emits a well-formed tool call, so group-relative
rewards have little to work with. For each math prompt of the batch we build two
demonstrations from the prompt alone: (1) after the prompt, the canonical
``<tool_call>`` for every arithmetic expression in the task; (2) after those calls and
their tool results, ``<answer>v1, v2</answer>``. Cross-entropy on the targets, scaled
by a coefficient that holds, decays linearly to a floor, and may stop, keeps the format
alive while RL takes over.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from agentrl.data.task_text import task_text_from_messages
from agentrl.parsing import extract_expressions
from agentrl.tools.builtin import calculate_math

__all__ = [
    "IGNORE_INDEX",
    "BCConfig",
    "BCExample",
    "bc_coef_at_step",
    "bc_cross_entropy",
    "bc_tensors",
    "build_math_bc_examples",
    "canonical_tool_call",
    "compute_bc_aux_loss",
    "tokenize_bc_examples",
]

IGNORE_INDEX = -100

Message = Mapping[str, Any]
RenderFn = Callable[[Sequence[Message], Sequence[Mapping[str, Any]] | None], str]


@dataclass
class BCConfig:
    """BC options under the first seed's flag names and defaults."""

    bc_coef: float = 0.16
    bc_min_coef: float = 0.03
    bc_stop_steps: int = 0
    bc_hold_steps: int = 1200
    bc_decay_steps: int = 4000
    bc_max_examples: int = 24
    bc_max_exprs: int = 8
    bc_max_len: int = 1536
    # (ours) "compact": the seed's spelling; "template": the chat template's, so that a
    # policy warm-started on rendered conversations is taught the calls it already writes.
    bc_call_style: str = "compact"


@dataclass(frozen=True)
class BCExample:
    prefix: str  # rendered conversation up to the assistant's turn
    target: str  # what the assistant should write


def bc_coef_at_step(step: int, config: BCConfig) -> float:
    """The BC weight at training step ``step``: hold, linear decay to a floor, optional stop."""
    base = float(config.bc_coef)
    if base <= 0:
        return 0.0
    floor = max(0.0, float(config.bc_min_coef))
    if config.bc_stop_steps > 0 and step > config.bc_stop_steps:
        return 0.0
    if step <= config.bc_hold_steps:
        return base
    if config.bc_decay_steps <= 0:
        return floor
    remaining = max(0.0, 1.0 - (step - config.bc_hold_steps) / config.bc_decay_steps)
    return max(base * remaining, floor)


CALL_STYLES = ("compact", "template")


def canonical_tool_call(name: str, arguments: Mapping[str, Any], style: str = "compact") -> str:
    """The one spelling of a call we teach, non-ASCII kept, in the tags.

    ``compact``: the seed's compact JSON. ``template``: exactly what the chat template
    writes for an assistant ``tool_calls`` entry (see :mod:`agentrl.chat`).
    """
    if style == "compact":
        body = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False,
                          separators=(",", ":"))  # fmt: skip
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


def tokenize_bc_examples(
    examples: Sequence[BCExample],
    encode: Callable[[str], list[int]],
    eos_id: int | None,
    max_len: int,
) -> list[tuple[list[int], list[int]]]:
    """(ids, labels) per example, target + EOS kept whole, prefix cut from the left.

    A target longer than ``max_len`` keeps its tail alone. Rows with nothing to learn
    (no label after the first position) are left out.
    """
    rows = []
    for ex in examples:
        prefix = encode(ex.prefix)
        target = encode(ex.target) + ([int(eos_id)] if eos_id is not None else [])
        if len(target) >= max_len:
            ids = target[-max_len:]
            labels = list(ids)
        else:
            keep = max_len - len(target)
            kept = prefix[-keep:] if keep > 0 else []
            ids = kept + target
            labels = [IGNORE_INDEX] * len(kept) + target
        if len(ids) < 2 or all(x == IGNORE_INDEX for x in labels[1:]):
            continue
        rows.append((ids, labels))
    return rows


def bc_tensors(
    rows: Sequence[tuple[list[int], list[int]]], pad_id: int, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded (input_ids, attention_mask, labels); attention covers each row's length."""
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), int(pad_id), dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (ids, lab) in enumerate(rows):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        labels[i, : len(lab)] = torch.tensor(lab)
        attention[i, : len(ids)] = 1
    return input_ids.to(device), attention.to(device), labels.to(device)


def bc_cross_entropy(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    labels: torch.Tensor,
    autocast: Callable[[], AbstractContextManager[object]] | None = None,
) -> torch.Tensor:
    """Mean next-token cross-entropy over labelled positions."""
    with (autocast or nullcontext)():
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1, :]
    return F.cross_entropy(
        logits.float().reshape(-1, logits.size(-1)),
        labels[:, 1:].reshape(-1),
        ignore_index=IGNORE_INDEX,
    )


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
