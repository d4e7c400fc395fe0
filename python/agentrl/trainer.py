"""The RL trainer loop: rollout <-> train, evaluation, checkpoints, clean stops.

:meth:`Trainer.run` reads as the table of contents of a run; every step it names lives
in its own module under `agentrl.training` (parts, sources, dynamic_sampling, step,
step_metrics, run_log, evaluation, resume, signals) or `agentrl.observability`, with the
math in `agentrl.rl`.

One trainer serves every layout. Where the parts of the run live is its placement
(`agentrl.placement`: one process, data parallel, trainer/rollout split) and which
weights train is its adapter (all of them, or a LoRA adapter); the trainer asks them at
named points: build models, sync weights, reduce gradients, agree, gather metrics, save.
:func:`run_training` is the entry point: it picks this process's placement and runs the
trainer, or, on a rollout rank of the trainer/rollout split, the rollout worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any, Generic, TypeVar

from agentrl.assembly.models import WarmStartStopped, preflight
from agentrl.assembly.parts import RunParts, build_run_parts
from agentrl.assembly.run_log import open_run_log
from agentrl.assembly.sources import run_agent
from agentrl.assembly.task import config_parts
from agentrl.config import TrainConfig
from agentrl.data import PromptPool
from agentrl.envs import EnvironmentFactory, TaskParts
from agentrl.models.minimind import export_pth
from agentrl.observability.trackers import check_installed, tracker_names
from agentrl.placement import (
    DistributedError,
    Placement,
    RolloutSetup,
    SingleProcess,
    placement_for,
)
from agentrl.placement.adapters import adapter_for
from agentrl.rl.kl_control import BetaController
from agentrl.rl.optim import Optimization
from agentrl.rollout import EpisodeConfig
from agentrl.tools import ToolRegistry
from agentrl.training import resume as resume_io
from agentrl.training.dumps import Observer, show_episodes
from agentrl.training.dynamic_sampling import DrawnBatch, draw_batch, informative_groups
from agentrl.training.models import Models
from agentrl.training.result import TrainResult
from agentrl.training.signals import StopRequest
from agentrl.training.sources import GroupSource
from agentrl.training.step import StepOutcome, StepSettings, packable, train_on_groups
from agentrl.training.step_metrics import logged_metrics
from agentrl.utils.atomic import saving
from agentrl.utils.run_lock import RunLock

Callback = Callable[["Trainer", int, StepOutcome], None]
T = TypeVar("T")


class _Built(Generic[T]):
    """A read-only attribute of the trainer: the built part (`RunParts`) of the same name."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, trainer: Trainer | None, owner: type | None = None) -> T:
        if trainer is None:  # the class's attribute: this descriptor
            return self  # type: ignore[return-value]
        return getattr(trainer._built, self.name)

    def __set__(self, trainer: Trainer, value: object) -> None:
        raise AttributeError(f"{self.name} is a built part of the run: read-only")


class Trainer:
    """Runs one training job described by a :class:`TrainConfig`, in the part of the run
    its placement gives this process (the whole run by default)."""

    def __init__(
        self,
        config: TrainConfig,
        callbacks: Sequence[Callback] = (),
        *,
        tools: Sequence[Any] | Any = (),
        reward_funcs: Sequence[Any] | None = None,
        reward_weights: Sequence[float] | None = None,
        environment: EnvironmentFactory | None = None,
        placement: Placement | None = None,
        agent: Any = None,
    ) -> None:
        """``callbacks`` run after every step with (trainer, step, outcome): hooks for tools
        and tests (e.g. ``trainer.stop.request("why")`` ends the run after this step).

        Your task (see `agentrl.envs`): ``tools`` (``@tool`` functions, plain functions,
        a ``ToolRegistry``, sync or async), ``reward_funcs`` (built-in names or callables
        called with ``prompts``, ``completions``, ``trajectories``, ``completion_ids`` and
        the data record's columns as keyword lists, returning a float or None each),
        ``reward_weights`` (one per function) and ``environment`` (a factory making one
        object per episode). With none of them the built-in arithmetic task runs.
        Or your own agent (`agentrl.agents`): ``agent(endpoint, sample) -> reward``, a
        function or ``pkg.module:fn``, trained through the OpenAI-compatible endpoint.
        """
        self.config = config
        self.callbacks = list(callbacks)
        self.parts: TaskParts = config_parts(
            config,
            tools=tools,
            reward_funcs=reward_funcs,
            reward_weights=reward_weights,
            environment=environment,
        )
        self.agent = run_agent(config.agent, agent)
        self.placement: Placement = placement if placement is not None else SingleProcess()
        self.placement.check(config)
        self.adapter = adapter_for(config)
        self.run_dir = config.run_dir
        self.counters = resume_io.Counters()
        self.first_eval: dict[str, float] = {}
        self.last_eval: dict[str, float] = {}
        self.last_saved_step = -1
        self.resumed_from: Path | None = None
        # The run's models, tools, prompts, optimizer, source...: built once by run().
        self.run_parts: RunParts | None = None
        self.trackers, self.tracker_warning = tracker_names(
            config.report_to, tensorboard_dir=config.tensorboard_dir, use_wandb=config.use_wandb
        )
        check_installed(self.trackers)  # before any model loads: a missing package is an error

    # ------------------------------------------------------------------ the loop

    def run(self) -> TrainResult:
        began = time.perf_counter()
        preflight(self.config)  # run directory and data files, before anything loads
        # One owner per run directory, taken before anything is written (agentrl.utils.run_lock).
        owner = RunLock(self.run_dir, self._early_log) if self.placement.is_main else nullcontext()
        with owner, StopRequest(self.config.max_time, self._early_log) as stop:
            self.stop = stop
            try:
                self.build()
            except WarmStartStopped as stopped:
                self._early_log(str(stopped))
                return TrainResult(
                    run_dir=self.config.run_dir,
                    steps_done=0,
                    total_steps=self.config.total_steps,
                    stopped=stop.reason,
                    wall_seconds=time.perf_counter() - began,
                    warm_start_seconds=stopped.seconds,
                    signal=stop.signum,
                )
            self._resume_if_asked()
            self._write_config()  # the run directory appears once model and data are loaded
            self._open_observer()
            try:
                self._evaluate_before_training()
                self._start_rollout()
                for step in range(self.counters.step + 1, self.total_steps + 1):
                    if self.placement.agree_on_stop(stop):
                        break
                    drawn = self._next_batch(step)
                    if drawn is None:
                        break
                    outcome = self._train(step, drawn)
                    self._sync_policy_if_due(outcome)
                    self._log_step(step, outcome)
                    self._evaluate_if_due(step)
                    self._checkpoint_if_due(step)
                    for callback in self.callbacks:
                        callback(self, step, outcome)
            except BaseException:
                self.observer.abort()
                raise
            finally:
                self.source.stop()
            self._end_accumulation()
            checkpoint = self._save_checkpoint()
            export = self._export_policy()
            report = self.observer.close()
        return self._result(began, checkpoint, export, report)

    # ------------------------------------------------------------------ building

    def _write_config(self) -> None:
        with saving(self.run_dir / "config.toml"):
            self.run_dir.mkdir(parents=True, exist_ok=True)
            if self.placement.is_main:
                (self.run_dir / "config.toml").write_text(self.config.to_toml(), encoding="utf-8")

    def _early_log(self, message: str) -> None:
        observer = getattr(self, "observer", None)
        (observer.log if observer is not None else print)(message)

    def build(self) -> None:
        """Load the models, data, task parts and rollout source of the run (what
        :meth:`run` does before its first step; called alone to inspect a built run)."""
        place, log = self.placement, self._early_log

        def make_source(models, prompts, tools, episode):  # type: ignore[no-untyped-def]
            setup = RolloutSetup(self.config, models, prompts, tools, episode, log, self.agent)
            return place.rollout_source(setup)

        self.run_parts = build_run_parts(
            self.config,
            self.parts,
            placement=place,
            adapter=self.adapter,
            agent=self.agent,
            make_source=make_source,
            log=log,
            should_stop=lambda: self.stop.requested,
        )

    # The built parts by name, read-only (tests, callbacks and the loop read them).
    models: _Built[Models] = _Built()
    tools: _Built[ToolRegistry] = _Built()
    train_pool: _Built[PromptPool] = _Built()
    eval_pool: _Built[PromptPool] = _Built()
    rewards: _Built[Any] = _Built()
    total_steps: _Built[int] = _Built()
    settings: _Built[StepSettings] = _Built()
    optimization: _Built[Optimization] = _Built()
    beta: _Built[BetaController] = _Built()
    episode: _Built[EpisodeConfig] = _Built()
    source: _Built[GroupSource] = _Built()
    evaluator: _Built[Any] = _Built()

    @property
    def _built(self) -> RunParts:
        if self.run_parts is None:
            raise RuntimeError("the trainer's parts are built when run() starts")
        return self.run_parts

    def _resume_if_asked(self) -> None:
        self.resumed_from = None
        if not self.config.from_resume:
            return
        path = resume_io.find_resume_point(self.run_dir)
        if path is None:
            self._early_log(f"from_resume=1 but no checkpoint in {self.run_dir}: starting fresh")
        else:
            self.counters = resume_io.restore_run(
                path,
                self.models,
                self.optimization,
                self.beta,
                self.source,
                weights=self.adapter,
                reference_too=bool(self.config.ref_from_rl_checkpoint),
            )
            self.resumed_from = path
            self.last_saved_step = self.counters.step
        steps = self.placement.gather(self.counters.step, "agree on the resume step")
        if len(set(steps)) > 1:
            raise DistributedError(
                f"ranks resumed from different steps {steps}: checkpoints must be on a "
                "filesystem every rank reads"
            )

    def _open_observer(self) -> None:
        """Rank 0's observer reports the run, opening with its banner; other processes get
        a quiet one."""
        self.observer: Observer = open_run_log(
            self.config,
            self._built,
            self.trackers,
            self.tracker_warning,
            is_main=self.placement.is_main,
            data_shards=self.placement.data_shards,
            start_step=self.counters.step,
            resumed_from=self.resumed_from,
        )

    # ------------------------------------------------------------------ per step

    def _evaluate(self, step: int, label: str) -> None:
        if not self.placement.is_main:
            return
        metrics = self.evaluator.run(self.source.engine)
        if not metrics:
            return
        self.first_eval = self.first_eval or metrics
        self.last_eval = metrics
        self.observer.evaluation(step, metrics, label)
        if self.config.dump_rollouts > 0:
            self.observer.dump("eval", step, self.evaluator.records(step))

    def _evaluate_before_training(self) -> None:
        # A resumed run's history holds this evaluation already (not one at the resume step).
        if self.config.eval_before_train and self.resumed_from is None:
            self._evaluate(self.counters.step, "eval-init")

    def _start_rollout(self) -> None:
        cfg = self.config
        target = cfg.prefill_queue_groups or min(cfg.effective_max_queue_groups, 2 * cfg.batch_size)
        ready = self.source.start(target, cfg.prefill_timeout_sec)
        if not ready:
            self.observer.log(f"rollout queue not filled to {target} groups in time; going on")

    def _next_batch(self, step: int) -> DrawnBatch | None:
        """The step's groups (see `agentrl.training.dynamic_sampling`), or None to stop when
        a rank has fewer than a batch."""
        cfg, reward = self.config, self.settings.reward
        drawn = draw_batch(
            self.source,
            step,
            cfg.batch_size,
            cfg.dynamic_sampling_rounds,
            lambda groups: informative_groups(groups, reward, step, cfg.adv_min_std, self.rewards),
        )
        counts = self.placement.gather(len(drawn.groups), "agree on the batch")
        if min(counts) < cfg.batch_size:
            got = counts[0] if len(counts) == 1 else f"per rank: {counts}"
            self.stop.request(f"not enough rollout groups at step {step} ({got})")
            self.observer.log(f"stopping: {self.stop.reason}")
            return None
        return drawn

    def _train(self, step: int, drawn: DrawnBatch) -> StepOutcome:
        """The step's update; its outcome carries the step's timings."""
        began = time.perf_counter()
        outcome = self._update(step, drawn.groups)
        return replace(
            outcome,
            rollout_seconds=drawn.seconds,
            train_seconds=time.perf_counter() - began,
            sampling_metrics=drawn.sampling_metrics,
        )

    def _update(self, step: int, groups: list[Any]) -> StepOutcome:
        able = self.placement.ranks_able_to_train(
            lambda: packable(groups, self.settings, self.models)
        )
        if not all(able):
            self.counters.step = step
            self.observer.log(f"step {step}: skipped on every rank (ranks packable: {able})")
            return StepOutcome(
                {"train/skipped": 1.0}, None, None, None, self.counters.reward_baseline
            )
        before = self.counters.reward_baseline
        outcome = train_on_groups(
            groups,
            step=step,
            current_version=self.source.version.get(),
            reward_baseline=self.counters.reward_baseline,
            settings=self.settings,
            models=self.models,
            optimization=self.optimization,
            beta=self.beta,
        )
        decay = self.settings.advantage.reward_ema_decay
        self.placement.batch_reward_baseline(outcome, before, decay)
        self.counters.step = step
        self.counters.reward_baseline = outcome.reward_baseline
        trained = 0
        if outcome.batch is not None and outcome.report is not None and not outcome.report.skipped:
            trained = int(outcome.batch.loss_mask.sum())
        self.counters.trained_tokens += sum(self.placement.gather(trained, "count trained tokens"))
        outcome.metrics["train/trained_tokens"] = float(self.counters.trained_tokens)
        if outcome.report is not None and outcome.report.skipped:
            self.observer.log(f"step {step}: update skipped ({outcome.report.skipped})")
        return outcome

    def _sync_policy_if_due(self, outcome: StepOutcome) -> None:
        report = outcome.report
        if report is None or not report.stepped:
            return
        if report.opt_step % self.config.policy_sync_interval != 0:
            self.counters.rollout_current = False
            return
        before = self.source.version.get()
        if self.source.sync(self.adapter.rollout_weights(self.models.policy)) == before:
            self.observer.log("policy sync skipped: the trained weights are not finite")
            self.counters.rollout_current = False
        else:
            self.counters.rollout_current = True

    def _log_step(self, step: int, outcome: StepOutcome) -> None:
        cfg, models = self.config, self.models
        metrics = logged_metrics(outcome, self.source, cfg.effective_max_version_gap, models.device)
        self.observer.train_step(step, self.placement.gather_metrics(metrics))
        show_episodes(self.observer, step, outcome, self.source, cfg.max_turns, models.tokenizer)

    def _evaluate_if_due(self, step: int) -> None:
        interval = self.config.eval_interval
        if interval > 0 and (step % interval == 0 or step == self.total_steps):
            self._evaluate(step, "eval")

    def _checkpoint_if_due(self, step: int) -> None:
        interval = self.config.save_interval
        if interval > 0 and step % interval == 0:
            self._save_checkpoint()

    # ------------------------------------------------------------------ the end

    def _end_accumulation(self) -> None:
        """A partial accumulation window at the run's end: applied with
        ``flush_accumulation``, else kept in the checkpoint for a resume (and said so)."""
        pending = self.optimization.pending
        if pending == 0 or self.counters.step < self.total_steps:
            return
        if not self.config.flush_accumulation:
            self.observer.log(
                f"the last {pending} step(s)' gradient is not applied (accumulation_steps="
                f"{self.config.accumulation_steps}); it stays in the checkpoint "
                "(--flush_accumulation 1 applies it)"
            )
            return
        report = self.optimization.flush()
        applied = report is not None and report.stepped
        self.observer.log(
            f"the last {pending} step(s)' gradient "
            + ("applied" if applied else "not applied: not finite")
            + " (flush_accumulation)"
        )
        self.last_saved_step = -1  # the weights moved after any save of this step

    def _save_checkpoint(self) -> Path | None:
        if not (self.placement.is_main or self.placement.collective_io):
            return None
        if self.counters.step == self.last_saved_step:
            return resume_io.find_resume_point(self.run_dir)
        path = resume_io.save_run(
            self.run_dir,
            self.counters,
            self.models,
            self.optimization,
            self.beta,
            self.source,
            self.config.keep_last,
            weights=self.adapter,
        )
        if path is None:
            self.observer.log("checkpoint skipped: the weights are not finite")
        else:
            self.last_saved_step = self.counters.step
            if self.config.save_pth and self.placement.is_main:
                self._save_pth()
        return path

    def _save_pth(self) -> None:
        """The weights as ``save_dir/<run name>_<hidden size>[_moe].pth`` (``save_pth``)."""
        cfg, policy = self.config, self.models.policy
        hidden = getattr(getattr(policy, "config", None), "hidden_size", cfg.hidden_size)
        name = f"{self.run_dir.name}_{hidden}{'_moe' if cfg.use_moe else ''}.pth"
        self.observer.log(f"weights saved: {export_pth(policy, self.run_dir.parent / name)}")

    def _export_policy(self) -> Path | None:
        policy = self.placement.final_policy(self.models)
        if policy is None:
            return None
        try:
            return self.adapter.export(policy, self.models.tokenizer, self.run_dir)
        except ValueError as exc:
            self.observer.log(f"policy export skipped: {exc}")
            return None

    def _result(
        self, began: float, checkpoint: Path | None, export: Path | None, report: Path | None
    ) -> TrainResult:
        done = self.counters.step
        stopped = self.stop.reason if done < self.total_steps else None
        evals = [r for r in self.observer.history() if r["kind"] == "eval"]
        first = {k: v for k, v in evals[0].items() if k.startswith("eval/")} if evals else {}
        return TrainResult(
            run_dir=self.run_dir,
            steps_done=done,
            total_steps=self.total_steps,
            stopped=stopped,
            wall_seconds=time.perf_counter() - began,
            first_eval=first or self.first_eval,
            last_eval=self.last_eval,
            report=report,
            policy_export=export,
            checkpoint=checkpoint,
            warm_start_seconds=self.models.warm_start_seconds,
            is_main=self.placement.is_main,
            signal=self.stop.signum if stopped else None,
        )


def run_training(
    config: TrainConfig,
    callbacks: Sequence[Callback] = (),
    *,
    placement: Placement | None = None,
    **parts: Any,
) -> TrainResult:
    """Run ``config`` in this process: `agentrl train`'s library function.

    ``parts`` are :class:`Trainer`'s keywords (``tools``, ``reward_funcs``,
    ``reward_weights``, ``environment``, ``agent``); a rollout rank of the trainer/rollout
    split takes only those the config names: Python objects stay in this process.

    The placement defaults to :func:`agentrl.placement.placement_for` (one process, or this
    rank's part of a ``torchrun`` launch). A rollout rank of the trainer/rollout split runs
    its rollout worker until rank 0 ends the run, and returns a result with no steps.
    """
    placement = placement if placement is not None else placement_for(config)
    if placement.is_rollout_rank:
        began = time.perf_counter()
        placement.rollout_worker(config).run()
        return TrainResult(
            run_dir=config.run_dir,
            steps_done=0,
            total_steps=0,
            stopped=None,
            wall_seconds=time.perf_counter() - began,
            is_main=False,
        )
    return Trainer(config, callbacks, placement=placement, **parts).run()


__all__ = ["TrainResult", "Trainer", "run_training"]
