"""One training step on a batch of rollout groups: the policy loss, assembled.

pack -> rewards -> advantages -> staleness weights -> (per micro-batch: policy and
reference log-probs, clipped/decoupled loss with KL penalty, backward) -> behaviour-cloning
loss -> hard KL stop check -> optimizer step (or skip) -> reward baseline and beta.

Every piece is a function of `agentrl.rl`; this module only wires them. How the rows are
cut into updates and micro-batches is `agentrl.training.minibatch`; the metrics are named
in `agentrl.training.step_metrics`. Micro-batches add up to the full-batch loss exactly:
each contributes its reduction numerator over the denominator of the whole batch. Metrics
stay on the device until ``host_floats`` reads them all at once, before the optimizer step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from agentrl.chat import apply_chat_template
from agentrl.rl.advantages import (
    TurnRewards,
    compute_advantages,
    token_advantages,
    update_reward_baseline,
)
from agentrl.rl.kl_control import BetaController
from agentrl.rl.logprobs import moe_kwargs
from agentrl.rl.losses import (
    advantage_weighted,
    policy_loss,
    reduction_denominator,
    staleness_weights,
)
from agentrl.rl.optim import Optimization, StepReport, merge_microbatch_metrics
from agentrl.rl.pack import EmptyBatchError, PackedBatch, pack_groups
from agentrl.tools.mcp import mcp_metrics
from agentrl.training.demonstrations import compute_bc_aux_loss
from agentrl.training.forward import masked_logps
from agentrl.training.minibatch import (
    combined_report,
    gradient_rows,
    prefix_plan,
    row_chunks,
    select_rows,
    update_plan,
)
from agentrl.training.models import Models
from agentrl.training.scoring import Scores, score_trajectories
from agentrl.training.step_data import StepOutcome, StepSettings, TokenStats
from agentrl.training.step_metrics import (
    generation_metrics,
    host_floats,
    reward_metrics,
    tool_metrics,
    update_metrics,
)
from agentrl.trajectory import RolloutGroup


def pack_batch(
    groups: Sequence[RolloutGroup], settings: StepSettings, models: Models
) -> PackedBatch:
    """The step's groups packed into rows; raises `EmptyBatchError` when none fit."""
    tok = models.tokenizer
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    return pack_groups(
        groups,
        num_generations=settings.num_generations,
        max_total_len=settings.max_total_len,
        pad_id=int(pad_id),
        eos_id=tok.eos_token_id,
        strict_group_packing=settings.strict_group_packing,
        device=models.device,
    )


def packable(groups: Sequence[RolloutGroup], settings: StepSettings, models: Models) -> bool:
    """Whether the step's groups pack into at least one row (see :func:`pack_batch`)."""
    try:
        pack_batch(groups, settings, models)
    except EmptyBatchError:
        return False
    return True


def _policy_pass(
    batch: PackedBatch,
    advantages: torch.Tensor,
    row_weights: torch.Tensor,
    settings: StepSettings,
    models: Models,
    optimization: Optimization,
    beta: float,
    current_version: int,
    keep: Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], None] | None = None,
) -> dict[str, torch.Tensor]:
    """Forward + loss + backward over the micro-batches; merged metrics, still on the device.
    ``keep(rows, logps, entropy)`` sees each micro-batch's trained log-probs.

    Metrics are merged in float64, so the merged values do not depend on where the sums
    are taken.
    """
    cfg = settings.loss
    mask = batch.loss_mask
    total_tokens = mask.sum()
    extra = {"max_completion_length": cfg.max_completion_length, "global_tokens": total_tokens}
    total = reduction_denominator(mask, cfg.loss_reduction, row_weights, **extra)
    lens = batch.seq_lens.cpu()  # micro-batch widths are needed on the host to slice
    skippable = (
        beta == 0.0
        and advantage_weighted(cfg.importance_sampling_level)
        and moe_kwargs(models.policy)[1] is None
    )
    live = gradient_rows(advantages, mask, skippable=skippable)
    live_tokens = mask[live.to(mask.device)].sum().double().clamp(min=1.0)
    parts: list[tuple[dict[str, torch.Tensor], float, torch.Tensor]] = []
    policy_sum = aux_sum = torch.zeros((), dtype=torch.float64, device=mask.device)
    for chunk in row_chunks(lens[live], settings.micro_batch_size):
        rows_host = live[chunk]
        width = int(lens[rows_host].max())
        rows = rows_host.to(mask.device)
        ids, attn = batch.input_ids[rows, :width], batch.attention_mask[rows, :width]
        rows_mask = mask[rows, : width - 1]
        tau = settings.logprob_temperature
        # rows_host lives on the CPU: reading it is no device sync.
        prefixes = prefix_plan(batch, rows_host.numpy().tolist(), settings.max_total_len)
        out = masked_logps(
            models.forward,
            ids,
            attn,
            rows_mask,
            with_entropy=True,
            autocast=models.autocast,
            temperature=tau,
            prefixes=prefixes,
        )
        if keep is not None:
            keep(rows, out.logps, out.entropy)
        ref = None
        if models.reference is not models.policy:  # the policy stands in when KL is off
            with torch.no_grad():
                ref = masked_logps(
                    models.reference,
                    ids,
                    attn,
                    rows_mask,
                    autocast=models.autocast,
                    temperature=tau,
                    prefixes=prefixes,
                )
        result = policy_loss(
            out.logps,
            batch.behavior_logps[rows, : width - 1],
            advantages[rows] if advantages.dim() == 1 else advantages[rows, : width - 1],
            rows_mask,
            cfg,
            beta=beta,
            ref_logps=None if ref is None else ref.logps,
            token_versions=batch.token_versions[rows, : width - 1],
            current_version=current_version,
            row_weights=row_weights[rows],
            global_tokens=total_tokens,
            entropy=out.entropy,
        )
        share = float(ids.size(0)) / live.numel()
        contribution = result.numerator / total
        if out.aux_loss is not None:
            contribution = contribution + share * out.aux_loss
            aux_sum = aux_sum + share * out.aux_loss.detach().double()
        policy_sum = policy_sum + contribution.detach().double()
        token_share = rows_mask.sum().double() / live_tokens
        parts.append(({k: v.double() for k, v in result.metrics.items()}, share, token_share))
        if not optimization.backward(contribution):
            break
    metrics = merge_microbatch_metrics(parts)
    metrics["loss/policy"] = policy_sum - aux_sum
    metrics["loss/aux"] = aux_sum
    # Rows left out for carrying no gradient: the policy metrics above are the others'.
    metrics["train/idle_rows"] = torch.tensor(float(batch.num_rows - live.numel()))
    return metrics


def _bc_pass(
    batch: PackedBatch,
    settings: StepSettings,
    models: Models,
    optimization: Optimization,
    step: int,
) -> dict[str, float]:
    """The behaviour-cloning auxiliary loss on this batch's prompts (one row per group)."""
    firsts = [g.trajectories[0] for g in batch.groups]
    tok = models.tokenizer
    loss, metrics = compute_bc_aux_loss(
        models.forward,
        tok,
        [t.messages for t in firsts],
        [t.tools for t in firsts],
        [t.gt for t in firsts],
        step=step,
        config=settings.bc,
        render=lambda messages, tools: apply_chat_template(tok, messages, tools, True, False),
        default_tools=settings.default_tools,
        device=models.device,
        autocast=models.autocast,
    )
    coef = float(metrics.get("bc/coef", 0.0))
    if coef > 0 and metrics.get("bc/examples", 0.0) > 0:
        optimization.backward(coef * loss)
    return metrics


# The mean reward of the rows trained on, read with the metrics for the reward baseline.
_TRAINED_REWARD_MEAN = "_trained_reward_mean"


def train_on_groups(
    groups: Sequence[RolloutGroup],
    *,
    step: int,
    current_version: int,
    reward_baseline: float,
    settings: StepSettings,
    models: Models,
    optimization: Optimization,
    beta: BetaController,
) -> StepOutcome:
    """Train on one batch; the optimizer steps when an accumulation window completes."""
    try:
        batch = pack_batch(groups, settings, models)
    except EmptyBatchError as exc:
        metrics = {"pack/dropped_groups": float(exc.dropped_groups), "train/skipped": 1.0}
        return StepOutcome(metrics, None, None, None, reward_baseline)
    scores = score_trajectories(batch.trajectories, settings.reward, step, settings.rewards)
    rewards = scores.rewards.to(models.device)
    turns = turn_rewards(scores, batch, models.device)
    advantages, adv_metrics = compute_advantages(
        rewards, batch.group_ids, settings.advantage, reward_baseline, turns
    )
    turn_advantages = None
    if advantages.dim() == 2:  # one per turn: spread over each turn's tokens
        turn_advantages = advantages
        advantages = token_advantages(turn_advantages, batch.token_turns)
    tokens = TokenStats.empty(batch, advantages)
    row_weights, stale_metrics = staleness_weights(
        batch.row_versions, current_version, settings.stale_discount
    )
    metrics: dict[str, float] = {}
    parts: list[tuple[dict[str, float], float, float]] = []
    reports: list[StepReport] = []
    plan = update_plan(batch.num_rows, settings, step, models.device)
    for n, rows in enumerate(plan):
        optimization.begin()
        part = batch if rows is None else select_rows(batch, rows)
        picked = (
            (advantages, row_weights) if rows is None else (advantages[rows], row_weights[rows])
        )
        on_device = _policy_pass(
            part,
            *picked,
            settings,
            models,
            optimization,
            beta.beta,
            current_version,
            tokens.keeper(rows),
        )
        on_device.update(adv_metrics)
        on_device.update(stale_metrics)
        versions = batch.row_versions.float()
        on_device["async/row_version_min"] = versions.min()
        on_device["async/row_version_max"] = versions.max()
        # The trained rows' mean reward (for the reward baseline) joins the one host read.
        metrics = host_floats({**on_device, _TRAINED_REWARD_MEAN: rewards.mean()})
        trained_reward_mean = metrics.pop(_TRAINED_REWARD_MEAN)
        if n == len(plan) - 1:  # the demonstration loss joins the last update
            metrics.update(_bc_pass(batch, settings, models, optimization, step))
        metrics["policy/kl_control"] = beta.control_value(metrics)
        if settings.loss.kl_estimator == "k3":
            metrics["policy/kl_ref_k3"] = metrics.get("policy/kl_ref", 0.0)
        reports.append(optimization.finish(skip=beta.should_stop(metrics)))
        parts.append((metrics, 1.0 / len(plan), 1.0 / len(plan)))
    if len(plan) > 1:  # the mean over the updates; keys of the last update alone stay
        merged = merge_microbatch_metrics(parts)
        every = set.intersection(*(set(m) for m, _, _ in parts))
        metrics = {**metrics, **{k: v for k, v in merged.items() if k in every}}
        metrics["train/updates"] = float(sum(r.stepped for r in reports))
    report = combined_report(reports)
    if report.stepped:
        reward_baseline = update_reward_baseline(
            reward_baseline,
            trained_reward_mean,
            settings.advantage.reward_ema_decay,
            report.opt_step,
        )
        beta.update(metrics, report.opt_step)
    metrics.update(reward_metrics(scores, reward_baseline))
    if settings.rewards is not None or settings.user_tools:  # a user task: how tools are used
        metrics.update(tool_metrics(batch.trajectories))
        metrics.update(mcp_metrics(settings.tool_servers))
    metrics.update(generation_metrics(batch.trajectories))
    metrics.update(update_metrics(batch, report, beta, current_version))
    episode_advantages = advantages.detach()
    if turn_advantages is not None:  # an episode's mean over its turns, for the dumps
        counts = turns.mask.sum(1).clamp(min=1)
        episode_advantages = (turn_advantages * turns.mask).sum(1).detach() / counts
    return StepOutcome(
        metrics,
        report,
        scores,
        batch,
        reward_baseline,
        episode_advantages,
        current_version,
        turn_advantages,
        tokens,
    )


def turn_rewards(scores: Scores, batch: PackedBatch, device: torch.device) -> TurnRewards:
    """Each episode's reward per turn: as scored, or the episode reward at its last turn."""
    if scores.turn_rewards is not None:
        return TurnRewards.from_lists(scores.turn_rewards, device)
    counts = [t.num_turns for t in batch.trajectories]
    return TurnRewards.at_last_turn(scores.rewards.to(device), counts)


__all__ = [
    "StepOutcome",
    "StepSettings",
    "generation_metrics",
    "host_floats",
    "pack_batch",
    "packable",
    "prefix_plan",
    "tool_metrics",
    "train_on_groups",
]
