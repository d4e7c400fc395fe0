"""How a step's packed rows are cut: into optimizer updates, then into micro-batches.

A step makes ``ppo_epochs`` passes over its rows, each cut into ``num_mini_batches``
updates (:func:`update_plan`, :func:`select_rows`, one :func:`combined_report` for them
all); each update runs the rows that carry gradient (:func:`gradient_rows`) in micro-batches of
similar length (:func:`row_chunks`), whose rows that share a prompt run it once
(:func:`prefix_plan`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from agentrl.rl.optim import StepReport
from agentrl.rl.pack import PackedBatch
from agentrl.training.forward import SharedPrefixes, shared_prefixes

if TYPE_CHECKING:
    from agentrl.training.step_data import StepSettings


def row_chunks(seq_lens: torch.Tensor, size: int) -> list[torch.Tensor]:
    """Row indices per micro-batch: all rows at once, or ``size`` rows of similar length.

    Sorting by length before cutting keeps each micro-batch's padding (compute spent on
    nothing) small; which rows share a micro-batch does not change the loss.
    """
    n = int(seq_lens.numel())
    if size <= 0 or size >= n:
        return [torch.arange(n, device=seq_lens.device)]
    order = torch.argsort(seq_lens, descending=True, stable=True)
    return [order[start : start + size] for start in range(0, n, size)]


def gradient_rows(
    advantages: torch.Tensor, loss_mask: torch.Tensor, *, skippable: bool
) -> torch.Tensor:
    """The rows (host indices) a policy pass must run: all of them, unless ``skippable``
    (an advantage-weighted objective, no KL term, no auxiliary loss), when a row whose
    trained tokens all have zero advantage (a group whose episodes scored alike) is left
    out: it would add exactly nothing to the gradient, whose denominators are the whole
    batch's. At least one row always runs, so an update has its metrics.
    """
    rows = int(loss_mask.size(0))
    if not skippable or rows == 0:
        return torch.arange(rows)
    if advantages.dim() == 1:
        live = advantages != 0
    else:
        live = ((advantages[:, : loss_mask.size(1)] != 0) & (loss_mask > 0)).any(dim=1)
    picked = torch.nonzero(live.cpu()).flatten()
    return picked if picked.numel() else torch.arange(1)


def update_plan(
    num_rows: int, settings: StepSettings, step: int, device: torch.device
) -> list[torch.Tensor | None]:
    """The rows of each optimizer update of a step (None: the whole batch, one update).

    Each of ``ppo_epochs`` passes shuffles the rows (seeded by step and pass, so a resumed
    run cuts them the same way) and cuts them into ``num_mini_batches`` near-equal parts.
    """
    epochs, parts = max(1, settings.ppo_epochs), max(1, settings.num_mini_batches)
    if epochs == 1 and parts == 1:
        return [None]
    plan: list[torch.Tensor | None] = []
    for epoch in range(epochs):
        generator = torch.Generator().manual_seed(1_000_003 * step + epoch)
        order = torch.randperm(num_rows, generator=generator)
        plan += [rows.to(device) for rows in torch.tensor_split(order, min(parts, num_rows))]
    return plan


def select_rows(batch: PackedBatch, rows: torch.Tensor) -> PackedBatch:
    """The batch restricted to ``rows``: its row tensors and trajectories (groups stay whole,
    so ``group_ids`` keep pointing at them)."""
    tensors = (
        "input_ids",
        "attention_mask",
        "response_mask",
        "loss_mask",
        "behavior_logps",
        "token_versions",
        "token_turns",
        "seq_lens",
        "group_ids",
        "row_versions",
    )
    picked = {name: getattr(batch, name)[rows] for name in tensors}
    trajectories = [batch.trajectories[i] for i in rows.tolist()]
    return replace(batch, trajectories=trajectories, **picked)


def combined_report(reports: Sequence[StepReport]) -> StepReport:
    """One report for a step's updates: stepped if any did, the mean loss, the last state."""
    last = reports[-1]
    if len(reports) == 1:
        return last
    stepped = [r for r in reports if r.stepped]
    skipped = None if stepped else next((r.skipped for r in reports if r.skipped), None)
    norm = stepped[-1].grad_norm if stepped else 0.0
    loss = sum(r.loss for r in reports) / len(reports)
    return StepReport(bool(stepped), skipped, norm, loss, last.opt_step, last.lr)


def prefix_plan(
    batch: PackedBatch, rows: Sequence[int], max_total_len: int
) -> SharedPrefixes | None:
    """Which of ``rows`` share their prompt (see `agentrl.training.forward`); a row cut
    to ``max_total_len`` lost the head of its prompt and shares nothing."""
    prompts: list[Sequence[int] | None] = []
    lengths: list[int] = []
    for row in rows:
        traj = batch.trajectories[row]
        length = len(traj.prompt_ids) + len(traj.response_ids)
        prompts.append(traj.prompt_ids if length <= max_total_len else None)
        lengths.append(length)
    return shared_prefixes(prompts, lengths)


__all__ = [
    "combined_report",
    "gradient_rows",
    "prefix_plan",
    "row_chunks",
    "select_rows",
    "update_plan",
]
