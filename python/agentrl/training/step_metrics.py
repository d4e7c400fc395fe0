"""The figures a training step reports, by name.

The step keeps its tensor metrics on the device and reads them to the host once
(:func:`host_floats`); the rest are named here from what the step saw: rewards, tool use,
generation lengths, the update itself, and what the trainer's loop adds around it (policy
version, dynamic sampling, the rollout side's counters, speed and memory).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from agentrl.observability import dashboard_metrics
from agentrl.rl.kl_control import BetaController
from agentrl.rl.optim import StepReport
from agentrl.rl.pack import PackedBatch
from agentrl.training.memory import peak_memory_mb
from agentrl.training.scoring import Scores

if TYPE_CHECKING:
    from agentrl.training.sources import GroupSource
    from agentrl.training.step_data import StepOutcome


def host_floats(metrics: Mapping[str, torch.Tensor | float]) -> dict[str, float]:
    """Every metric as a Python float, with one device-to-host transfer for all tensors.

    Metrics are kept as 0-dim tensors through the step; reading each one on its own
    would stall the accelerator once per metric per micro-batch. This is the one place
    a training step reads its tensor metrics.
    """
    keys = [k for k, v in metrics.items() if torch.is_tensor(v)]
    out = {k: float(v) for k, v in metrics.items() if not torch.is_tensor(v)}
    if keys:
        stacked = torch.stack([metrics[k].detach().reshape(()).double() for k in keys])
        out.update(zip(keys, stacked.tolist(), strict=True))
    return out


def reward_metrics(scores: Scores, baseline: float) -> dict[str, float]:
    """The batch's rewards: mean, range, the baseline, and each part and function's mean."""
    r = scores.rewards
    out = {
        "reward/mean": float(r.mean()),
        "reward/std": float(r.std(unbiased=False)) if r.numel() > 1 else 0.0,
        "reward/min": float(r.min()),
        "reward/max": float(r.max()),
        "reward/baseline": float(baseline),
    }
    out.update({f"reward_detail/{k}": v for k, v in scores.means.items()})
    out.update({f"reward_fn/{k}": v for k, v in scores.functions.items()})
    out.update(dashboard_metrics(scores.means, "train"))
    return out


def tool_metrics(trajectories: Sequence[Any]) -> dict[str, float]:
    """Tool calls per episode, the share of all calls that failed (``tools/error_rate``:
    counted per call, so an episode that needs no call does not count against it), and per
    tool its calls per episode and error rate. Answer-mode episodes (calls recorded, not
    run) add ``answer/calls_per_episode`` and ``answer/no_call_rate``."""
    n = max(len(trajectories), 1)
    calls: dict[str, int] = {}
    failed: dict[str, int] = {}
    for trajectory in trajectories:
        for event in trajectory.tool_events:
            name = str(event.get("name") or "(unparsed)")
            calls[name] = calls.get(name, 0) + 1
            failed[name] = failed.get(name, 0) + (0 if event.get("ok") else 1)
    out = {"tools/calls_per_episode": sum(calls.values()) / n}
    if calls:
        out["tools/error_rate"] = sum(failed.values()) / sum(calls.values())
    for name in sorted(calls):
        out[f"tools/{name}/calls"] = float(calls[name])
        out[f"tools/{name}/calls_per_episode"] = calls[name] / n
        out[f"tools/{name}/error_rate"] = failed[name] / calls[name]
    answers = [t.answer_calls for t in trajectories if getattr(t, "answer_calls", None) is not None]
    if answers:
        out["answer/calls_per_episode"] = sum(len(a) for a in answers) / len(answers)
        out["answer/no_call_rate"] = sum(not a for a in answers) / len(answers)
    return out


def generation_metrics(trajectories: Sequence[Any]) -> dict[str, float]:
    """Generated tokens per episode (mean, min, max) and the share of episodes with a turn
    that ran to its new-token budget (``gen/hit_limit_frac``)."""
    if not trajectories:
        return {}
    tokens = [float(sum(t.response_mask)) for t in trajectories]
    hit = [float(t.stats.get("length_stops", 0.0) > 0) for t in trajectories]
    return {
        "gen/tokens_mean": sum(tokens) / len(tokens),
        "gen/tokens_min": min(tokens),
        "gen/tokens_max": max(tokens),
        "gen/hit_limit_frac": sum(hit) / len(hit),
    }


def update_metrics(
    batch: PackedBatch, report: StepReport, beta: BetaController, current_version: int
) -> dict[str, float]:
    """The update's figures, and the batch's drops and staleness (``async/...``: versions
    behind ``current_version``, per group and per trained token)."""
    return {
        **batch.metrics(current_version),
        "loss/total": report.loss,
        "train/grad_norm": report.grad_norm,
        "train/lr": report.lr,
        "train/beta": beta.beta,
        "train/beta_ema": beta.ema,
        "train/opt_step": float(report.opt_step),
        "train/optimizer_stepped": float(report.stepped),
        "train/skipped": float(report.skipped is not None),
        "pack/rows": float(batch.num_rows),
    }


def logged_metrics(
    outcome: StepOutcome, source: GroupSource, max_version_gap: int, device: torch.device
) -> dict[str, float]:
    """What the step's log line and trackers get: the step's own figures, dynamic
    sampling's, the rollout side's (policy version, queue, engine counters, an agent's
    episodes), and the step's speed and peak memory."""
    metrics = dict(outcome.metrics)
    metrics["policy/version"] = float(source.version.get())
    metrics["policy/max_version_gap"] = float(max_version_gap)
    metrics.update(outcome.sampling_metrics)
    metrics.update(getattr(source, "step_metrics", dict)())  # an agent's episodes
    metrics.update({f"async/{k}": float(v) for k, v in source.stats().items()})
    engine_stats = getattr(source.engine, "stats", None)
    if isinstance(engine_stats, dict):  # cumulative engine counters (cache, sanitising)
        metrics.update(
            {
                f"rollout/{k}": float(v)
                for k, v in engine_stats.items()
                if isinstance(v, int | float)
            }
        )
    if outcome.batch is not None:  # tool turns whose re-rendering differs from the ids
        metrics["rollout/template_divergence"] = sum(
            t.stats.get("template_divergence", 0.0) for t in outcome.batch.trajectories
        )
    seconds = outcome.rollout_seconds + outcome.train_seconds
    tokens = float(outcome.batch.loss_mask.sum()) if outcome.batch is not None else 0.0
    metrics["perf/rollout_sec"] = outcome.rollout_seconds
    metrics["perf/train_sec"] = outcome.train_seconds
    metrics["perf/tokens_per_sec"] = tokens / max(seconds, 1e-9)
    metrics["perf/peak_mem_mb"] = peak_memory_mb(device)
    return metrics


__all__ = [
    "generation_metrics",
    "host_floats",
    "logged_metrics",
    "reward_metrics",
    "tool_metrics",
    "update_metrics",
]
