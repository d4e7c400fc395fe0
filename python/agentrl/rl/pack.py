"""Rollout groups -> padded training tensors.

Every per-token array is laid out for next-token prediction: position ``t`` of a
"shifted" tensor (``loss_mask``, ``behavior_logps``, ``token_versions``) is the
prediction of ``input_ids[:, t + 1]`` from the prefix ending at ``t``. That is why a
sequence of ``n`` tokens carries ``n - 1`` behaviour log-probs.

Rules:

- a sequence longer than ``max_total_len`` keeps its *last* ``max_total_len`` tokens
  (the response is what we learn from, the head of the prompt is what we can lose);
- a trajectory that is misaligned, shorter than two tokens, has an empty prompt, or
  has no generated token left after truncation cannot be trained on;
- strict mode (the default) trains only on complete groups: a group with the wrong
  number of trajectories, or with one unusable trajectory, is dropped whole, because
  group-relative advantages of a partial group mean something else. Non-strict mode
  keeps the usable trajectories of any group (advantages then use ``group_ids``).

A dropped group is counted in ``dropped_groups`` with its reason, never lost silently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from agentrl.trajectory import RolloutGroup, Trajectory, response_turns

__all__ = ["EmptyBatchError", "PackedBatch", "cut_after_first_eos", "pack_groups"]


class EmptyBatchError(RuntimeError):
    """No group survived packing; carries the drop reasons so the caller can report them."""

    def __init__(self, dropped_groups: int, reasons: dict[str, int]) -> None:
        super().__init__(f"empty packed batch: {dropped_groups} group(s) dropped {reasons}")
        self.dropped_groups = dropped_groups
        self.reasons = reasons


@dataclass
class PackedBatch:
    """Right-padded tensors for one training step plus the trajectories they came from."""

    input_ids: torch.Tensor  # [B, T] long, padded with pad_id
    attention_mask: torch.Tensor  # [B, T] long, 1 inside each sequence
    response_mask: torch.Tensor  # [B, T] float, 1 on generated tokens
    loss_mask: torch.Tensor  # [B, T-1] float, shifted response mask cut after EOS
    behavior_logps: torch.Tensor  # [B, T-1] float, 0 off the response
    token_versions: torch.Tensor  # [B, T-1] long, -1 off the response
    token_turns: torch.Tensor  # [B, T-1] long, the assistant turn of each target, -1 off it
    seq_lens: torch.Tensor  # [B] long
    group_ids: torch.Tensor  # [B] long, index into `groups`
    row_versions: torch.Tensor  # [B] long, policy version of each row's group
    groups: list[RolloutGroup]
    trajectories: list[Trajectory]
    dropped_groups: int = 0
    dropped_trajectories: int = 0
    truncated_rows: int = 0
    drop_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def num_rows(self) -> int:
        return int(self.input_ids.size(0))

    def metrics(self, current_version: int) -> dict[str, float]:
        """Drop counts and staleness (versions behind ``current_version``) of this batch.

        Group staleness is per kept group; token staleness covers the trained tokens.
        """
        gaps = [float(current_version - g.policy_version) for g in self.groups]
        tokens = (self.token_versions >= 0) & (self.loss_mask > 0)
        stale = (int(current_version) - self.token_versions[tokens]).float()
        out = {
            "pack/dropped_groups": float(self.dropped_groups),
            "pack/dropped_trajectories": float(self.dropped_trajectories),
            "pack/truncated_rows": float(self.truncated_rows),
            "async/staleness_group_mean": sum(gaps) / len(gaps) if gaps else 0.0,
            "async/staleness_group_max": max(gaps) if gaps else 0.0,
        }
        for name, q in (("mean", None), ("p05", 0.05), ("p50", 0.5), ("p95", 0.95)):
            value = 0.0
            if stale.numel():
                value = float(stale.mean() if q is None else torch.quantile(stale, q))
            out[f"async/token_staleness_{name}"] = value
        return out

    def to(self, device: torch.device | str) -> PackedBatch:
        """The same batch with every tensor on `device`."""
        moved = {
            name: value.to(device)
            for name, value in vars(self).items()
            if isinstance(value, torch.Tensor)
        }
        return PackedBatch(**{**vars(self), **moved})


def cut_after_first_eos(
    mask: torch.Tensor, target_ids: torch.Tensor, eos_id: int | None
) -> torch.Tensor:
    """Zero the mask after the first EOS of every generated segment, keeping the EOS.

    A segment is a maximal run of mask == 1 (one assistant turn). Tokens sampled after
    the model said EOS are padding the sampler did not stop in time; they must not be
    trained on. For single-turn data this is a plain "cut after the first EOS";
    cutting per segment keeps later turns of a multi-turn episode whose turns each
    end in EOS. Shapes: ``mask`` and ``target_ids`` are [B, L].
    """
    if eos_id is None or mask.numel() == 0:
        return mask
    on = mask > 0
    is_eos = (target_ids == eos_id) & on
    eos_before = torch.cumsum(is_eos.long(), dim=1) - is_eos.long()
    prev_on = torch.zeros_like(on)
    prev_on[:, 1:] = on[:, :-1]
    starts = on & ~prev_on
    # eos_before never decreases along a row, so a running max carries each segment's
    # starting count forward until the next segment starts.
    base = torch.cummax(torch.where(starts, eos_before, torch.zeros_like(eos_before)), dim=1)
    keep = (eos_before - base.values) == 0
    return mask * keep.to(mask.dtype)


def _row_problem(traj: Trajectory) -> str | None:
    try:
        traj.check_alignment()
    except ValueError:
        return "misaligned"
    if not traj.prompt_ids:
        return "empty_prompt"
    if len(traj.prompt_ids) + len(traj.response_ids) < 2:
        return "too_short"
    return None


Row = tuple[list[int], list[int], list[float], list[int], list[int]]


def _pack_row(traj: Trajectory, max_total_len: int) -> tuple[Row, bool] | str:
    """One trajectory as ((ids, mask, shifted logps, versions, turns), truncated) or a reason."""
    problem = _row_problem(traj)
    if problem is not None:
        return problem
    n_prompt = len(traj.prompt_ids)
    ids = list(traj.prompt_ids) + list(traj.response_ids)
    mask = [0] * n_prompt + list(traj.response_mask)
    logps = [0.0] * (n_prompt - 1) + [float(x) for x in traj.response_logps]
    versions = [-1] * (n_prompt - 1) + [int(v) for v in traj.response_versions]
    turns = [-1] * (n_prompt - 1) + response_turns(traj)
    truncated = len(ids) > max_total_len
    if truncated:
        keep = max_total_len - 1
        ids, mask = ids[-max_total_len:], mask[-max_total_len:]
        logps, versions, turns = logps[-keep:], versions[-keep:], turns[-keep:]
    # Position 0 is never a prediction target, so only mask[1:] can carry loss.
    if sum(mask[1:]) <= 0:
        return "no_response_tokens"
    return (ids, mask, logps, versions, turns), truncated


def pack_groups(
    groups: Sequence[RolloutGroup],
    *,
    num_generations: int,
    max_total_len: int,
    pad_id: int,
    eos_id: int | None = None,
    strict_group_packing: bool = True,
    device: torch.device | str = "cpu",
) -> PackedBatch:
    """Pack `groups` into a :class:`PackedBatch`; raise :class:`EmptyBatchError` if none fit."""
    if max_total_len < 2:
        raise ValueError(f"max_total_len must be at least 2, got {max_total_len}")
    reasons: Counter[str] = Counter()
    rows: list[Row] = []
    kept_groups: list[RolloutGroup] = []
    kept_trajs: list[Trajectory] = []
    group_ids: list[int] = []
    row_versions: list[int] = []
    dropped_groups = dropped_trajs = truncated_rows = 0

    for group in groups:
        expected = num_generations if group.size is None else group.size
        if strict_group_packing and len(group.trajectories) != expected:
            reasons["group_size"] += 1
            dropped_groups += 1
            dropped_trajs += len(group.trajectories)
            continue
        packed: list[tuple[Trajectory, Row]] = []
        n_truncated = 0
        failure = None
        for traj in group.trajectories:
            result = _pack_row(traj, max_total_len)
            if isinstance(result, str):
                failure = failure or result
                if strict_group_packing:
                    break
                dropped_trajs += 1
                continue
            row, truncated = result
            n_truncated += int(truncated)
            packed.append((traj, row))
        if (strict_group_packing and failure is not None) or not packed:
            reasons[failure or "empty_group"] += 1
            dropped_groups += 1
            if strict_group_packing:
                # A group dropped whole loses every trajectory, not only the bad one.
                dropped_trajs += len(group.trajectories)
            continue
        if failure is not None:
            reasons[f"partial_{failure}"] += 1
        index = len(kept_groups)
        kept_groups.append(group)
        truncated_rows += n_truncated
        for traj, row in packed:
            rows.append(row)
            kept_trajs.append(traj)
            group_ids.append(index)
            row_versions.append(int(group.policy_version))

    if not rows:
        raise EmptyBatchError(dropped_groups, dict(reasons))
    width = max(len(r[0]) for r in rows)
    input_ids = torch.full((len(rows), width), int(pad_id), dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    response_mask = torch.zeros((len(rows), width), dtype=torch.float32)
    logps = torch.zeros((len(rows), width - 1), dtype=torch.float32)
    versions = torch.full((len(rows), width - 1), -1, dtype=torch.long)
    turns = torch.full((len(rows), width - 1), -1, dtype=torch.long)
    for i, (ids, mask, row_logps, row_versions_, row_turns) in enumerate(rows):
        n = len(ids)
        input_ids[i, :n] = torch.tensor(ids, dtype=torch.long)
        attention[i, :n] = 1
        response_mask[i, :n] = torch.tensor(mask, dtype=torch.float32)
        logps[i, : n - 1] = torch.tensor(row_logps, dtype=torch.float32)
        versions[i, : n - 1] = torch.tensor(row_versions_, dtype=torch.long)
        turns[i, : n - 1] = torch.tensor(row_turns, dtype=torch.long)
    loss_mask = cut_after_first_eos(response_mask[:, 1:], input_ids[:, 1:], eos_id)
    batch = PackedBatch(
        input_ids=input_ids,
        attention_mask=attention,
        response_mask=response_mask,
        loss_mask=loss_mask,
        behavior_logps=logps,
        token_versions=versions,
        token_turns=torch.where(loss_mask > 0, turns, torch.full_like(turns, -1)),
        seq_lens=torch.tensor([len(r[0]) for r in rows], dtype=torch.long),
        group_ids=torch.tensor(group_ids, dtype=torch.long),
        row_versions=torch.tensor(row_versions, dtype=torch.long),
        groups=kept_groups,
        trajectories=kept_trajs,
        dropped_groups=dropped_groups,
        dropped_trajectories=dropped_trajs,
        truncated_rows=truncated_rows,
        drop_reasons=dict(reasons),
    )
    return batch.to(device) if str(device) != "cpu" else batch
