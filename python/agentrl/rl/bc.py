"""Behaviour-cloning auxiliary loss: its weight schedule, tokenised rows and cross-entropy.

Early in RL a small policy rarely emits a well-formed tool call, so group-relative
rewards have little to work with. A cross-entropy on demonstrations of the canonical
calls (built in `agentrl.training.demonstrations`), scaled by a coefficient that holds,
decays linearly to a floor, and may stop, keeps the format alive while RL takes over.
This module holds the math only: the schedule, the (ids, labels) rows and the loss.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F

from agentrl.utils.options import option

__all__ = [
    "IGNORE_INDEX",
    "BCConfig",
    "BCExample",
    "bc_coef_at_step",
    "bc_cross_entropy",
    "bc_tensors",
    "tokenize_bc_examples",
]

IGNORE_INDEX = -100


@dataclass(frozen=True)
class BCConfig:
    """Behaviour-cloning options (the ``bc`` section of the run's config)."""

    SECTION: ClassVar[str] = "bc"

    bc_coef: float = option(0.16, "BC weight while held (0: off)", check=">=0")
    bc_min_coef: float = option(0.03, "BC weight floor after the decay", check=">=0")
    bc_stop_steps: int = option(0, "no BC after this step (0: never stop)", check=">=0")
    bc_hold_steps: int = option(1200, "steps at the full BC weight", check=">=0")
    bc_decay_steps: int = option(4000, "steps of linear decay to the floor", check=">=0")
    bc_max_examples: int = option(24, "demonstrations per step", check=">=0")
    bc_max_exprs: int = option(8, "expressions per demonstration", check=">=1")
    bc_max_len: int = option(1536, "tokens per demonstration", check=">=1")
    # "compact": compact JSON inside the tags; "template": the chat template's spelling,
    # so that a policy warm-started on rendered conversations is taught the calls it
    # already writes.
    bc_call_style: str = option(
        "compact", "call spelling: compact JSON or the chat template's", ("compact", "template")
    )


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
