"""The run's log: the observer that reports it, the banner that opens it, and the episodes
a step shows and dumps.

Rank 0's observer reports the run (metrics file, progress, trackers, report); other
processes get a quiet one, whose metrics reach rank 0's averaged.
"""

from __future__ import annotations

from pathlib import Path

from agentrl.assembly.parts import RunParts
from agentrl.assembly.settings import steps_text
from agentrl.config import TrainConfig
from agentrl.observability import QuietObserver, RunObserver

Observer = RunObserver | QuietObserver


def open_run_log(
    config: TrainConfig,
    parts: RunParts,
    trackers: list[str],
    tracker_warning: str,
    *,
    is_main: bool,
    data_shards: int,
    start_step: int,
    resumed_from: Path | None,
) -> Observer:
    """The run's observer (quiet off the main process), its banner and any tracker warning
    logged."""
    cfg = config
    if not is_main:
        return QuietObserver()
    observer = RunObserver(
        cfg.run_dir,
        parts.total_steps,
        start_step=start_step,
        resumed=resumed_from is not None,
        progress=bool(cfg.progress),
        log_interval=cfg.log_interval,
        debug_interval=cfg.debug_interval,
        report=bool(cfg.report),
        report_to=trackers,
        tracker_dir=cfg.tensorboard_dir,
        tracker_project=cfg.wandb_project,
        dump_rollouts=cfg.dump_rollouts,
        max_turns=cfg.max_turns,
        run_name=cfg.run_name,
        config=cfg.flat(),
    )
    observer.log(banner(cfg, parts, data_shards, start_step, resumed_from))
    if tracker_warning:
        observer.log(tracker_warning)
    return observer


def banner(
    config: TrainConfig,
    parts: RunParts,
    data_shards: int,
    start_step: int,
    resumed_from: Path | None,
) -> str:
    """The run's first line: where it starts, the model, the prompts, the step's shape."""
    cfg, m = config, parts.models
    params = sum(p.numel() for p in m.policy.parameters()) / 1e6
    start = f"resumed at step {start_step} from {resumed_from}; " if resumed_from else ""
    rounds = cfg.dynamic_sampling_rounds
    dynamic = f", dynamic sampling up to {rounds} extra round(s)" if rounds else ""
    return (
        f"{start}model {m.spec} ({params:.2f}M params) on {m.device}; "
        f"{len(parts.train_pool)} train / {len(parts.evaluator.indices)} eval prompts; "
        f"{steps_text(cfg, parts.total_steps, data_shards)} x "
        f"{cfg.batch_size} prompts x G={cfg.num_generations}; "
        f"rollout {'inline' if cfg.async_workers == 0 else f'{cfg.async_workers} worker(s)'}"
        f", max_version_gap {cfg.effective_max_version_gap}{dynamic}"
        f"; advantage {cfg.advantage_mode}, "
        f"loss {cfg.loss_reduction}, decoupled {cfg.use_decoupled_ppo}, beta {parts.beta.beta}"
        f", bc {cfg.bc_coef}; writing to {cfg.run_dir}"
    )


__all__ = ["banner", "open_run_log"]
