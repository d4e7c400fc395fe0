"""`ScaleOutTrainer`: the `Trainer` loop plus torchrun modes, remote engines and LoRA.

:func:`build_trainer` is what ``agentrl train`` runs: a plain `Trainer` when nothing here
is asked for, otherwise a `ScaleOutTrainer` (or, on the rollout ranks of the
trainer/rollout split, a `RolloutRank`). Each feature overrides a few of the `Trainer`'s
named steps and nothing else:

- ``ddp`` (every rank trains on its shard): rank 0 prepares the run first (warm start,
  generated prompts) and then every rank builds; weights start equal (broadcast from
  rank 0); the prompt pool is sharded; steps are agreed and gradients averaged
  (`agentrl.distributed.ddp`); metrics are averaged; only rank 0 logs, evaluates,
  writes checkpoints and exports. Stop requests (signals, time limit, not enough groups)
  are agreed at the end of every step, so all ranks leave the loop together.
- ``trainer_rollout``: rank 0 is a `ScaleOutTrainer` whose groups come from the other
  ranks (`agentrl.distributed.split`); ranks 1..N-1 run a `RolloutRank`.
- ``rollout_engine`` sglang/vllm: the rollout engine is a remote one
  (`agentrl.rollout.remote`), loaded with the policy's weights before the first rollout.
- LoRA (``lora_rank`` > 0): the policy gets a peft adapter, the reference policy is the
  same model with the adapter off, checkpoints hold the adapter only, rollout engines
  receive merged weights, and the run exports both the adapter and a merged HF model.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import torch

from agentrl.config import TrainConfig
from agentrl.distributed.ddp import (
    DistributedBeta,
    DistributedOptimization,
    broadcast_module_,
    shard_pool,
)
from agentrl.distributed.runtime import (
    DEFAULT_TIMEOUT_S,
    DistContext,
    DistributedError,
    init_distributed,
    launched_by_torchrun,
)
from agentrl.distributed.split import GatheredSource, RolloutWorker
from agentrl.rl.advantages import update_reward_baseline
from agentrl.rl.optim import Optimization
from agentrl.rollout.remote.weights import policy_state_dict
from agentrl.rollout.types import PolicyVersion
from agentrl.trainer import Trainer, TrainResult
from agentrl.training.step import StepOutcome

MODES = ("trainer_rollout", "ddp")
# How long ranks > 0 wait while rank 0 prepares the run (warm start, generated prompts).
PREPARE_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class ScaleOptions:
    """Options of this module, read from the config by name when it has them.

    ``lora_rank`` 0 means no LoRA. ``dist_timeout_sec`` bounds every collective: a rank
    that dies or hangs fails the run after at most this long (it must exceed the longest
    pause between collectives: a training step, an evaluation, a checkpoint).
    """

    lora_rank: int = 0
    lora_alpha: float = 32.0
    lora_target_modules: str = "all-linear"
    lora_dropout: float = 0.0
    dist_backend: str = "auto"
    dist_timeout_sec: float = DEFAULT_TIMEOUT_S
    rollout_engine: str = ""  # "" = the config's rollout_engine
    sglang_wait_sec: float = 60.0
    vllm_gpu_memory_utilization: float = 0.3

    @classmethod
    def from_config(cls, config: Any, **overrides: Any) -> ScaleOptions:
        values = {f.name: getattr(config, f.name) for f in dataclasses.fields(cls)
                  if hasattr(config, f.name)}  # fmt: skip
        values.update(overrides)
        return cls(**values)

    def engine(self, config: TrainConfig) -> str:
        return self.rollout_engine or str(getattr(config, "rollout_engine", "torch"))

    def lora(self) -> Any:
        if self.lora_rank <= 0:
            return None
        from agentrl.models.lora import LoraSettings

        return LoraSettings(
            rank=self.lora_rank,
            alpha=self.lora_alpha,
            target_modules=self.lora_target_modules,
            dropout=self.lora_dropout,
        )


def split_version_gap(config: TrainConfig) -> int:
    """The seed's staleness bound for the split mode when max_version_gap is -1: rollout
    ranks lag more than one in-process worker does."""
    if config.max_version_gap >= 0:
        return int(config.max_version_gap)
    return max(int(config.max_head_offpolicyness),
               min(max(2, int(config.policy_sync_interval) * 2), 4))  # fmt: skip


def _with(config: TrainConfig, **changes: Any) -> TrainConfig:
    return dataclasses.replace(config, **changes)


def rank_config(config: TrainConfig, ctx: DistContext | None) -> TrainConfig:
    """What a rank > 0 builds from: rank 0's generated prompt file instead of writing its
    own copy (ranks writing one file at once could read it half-written)."""
    if ctx is None or ctx.rank == 0 or config.data_path:
        return config
    generated = config.run_dir / "data" / "train_prompts.jsonl"
    return _with(config, data_path=str(generated), eval_ratio=0.0, eval_data_path="")


@contextlib.contextmanager
def _as_single_process() -> Iterator[None]:
    """Hide ``WORLD_SIZE`` from the shared setup's single-process guard while building."""
    saved = os.environ.get("WORLD_SIZE")
    if saved is not None:
        os.environ["WORLD_SIZE"] = "1"
    try:
        yield
    finally:
        if saved is not None:
            os.environ["WORLD_SIZE"] = saved


class _Observer:
    """Averages each step's metrics over the ranks; only rank 0 has a real observer."""

    def __init__(self, inner: Any, ctx: DistContext | None) -> None:
        self._inner = inner
        self._ctx = ctx

    def train_step(self, step: int, metrics: Any) -> None:
        if self._ctx is not None:
            metrics = self._ctx.average_metrics(metrics, what="average step metrics")
            metrics["dist/world_size"] = float(self._ctx.world_size)
        if self._inner is not None:
            self._inner.train_step(step, metrics)

    def history(self) -> list[dict[str, Any]]:
        return self._inner.history() if self._inner is not None else []

    def __getattr__(self, name: str) -> Any:
        if self._inner is not None:
            return getattr(self._inner, name)
        return lambda *args, **kwargs: None


class _SyncMerged:
    """A `GroupSource` that hands engines plain (LoRA-merged) weights on sync."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def sync(self, model: torch.nn.Module) -> int:
        from agentrl.models.lora import merged_state_dict

        return self._inner.sync(merged_state_dict(model))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _LoraResumeView(torch.nn.Module):
    """What a LoRA resume hands `restore_run` as the policy: it loads the adapter-only
    checkpoint and gives the rollout engine merged weights."""

    def __init__(self, policy: torch.nn.Module) -> None:
        super().__init__()
        self._policy = [policy]

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:  # type: ignore[override]
        from agentrl.models.lora import load_adapter_state_dict

        load_adapter_state_dict(self._policy[0], state_dict)
        return torch.nn.modules.module._IncompatibleKeys([], [])

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, torch.Tensor]:  # type: ignore[override]
        from agentrl.models.lora import merged_state_dict

        return merged_state_dict(self._policy[0])


class ScaleOutTrainer(Trainer):
    """`Trainer` with the features of this package (see module doc)."""

    def __init__(
        self,
        config: TrainConfig,
        callbacks: Sequence[Callable[[Trainer, int, StepOutcome], None]] = (),
        *,
        options: ScaleOptions | None = None,
        ctx: DistContext | None = None,
    ) -> None:
        super().__init__(config, callbacks)
        self.options = options or ScaleOptions.from_config(config)
        self.ctx = ctx if ctx is not None and ctx.world_size > 1 else None
        self.mode = str(config.multi_gpu_mode) if self.ctx is not None else "single"
        if self.mode not in (*MODES, "single"):
            raise ValueError(f"multi_gpu_mode must be one of {MODES}, got {self.mode!r}")
        if self.mode == "trainer_rollout" and self.ctx is not None and self.ctx.rank != 0:
            raise ValueError("ranks > 0 of trainer_rollout run a RolloutRank, not a trainer")
        self.lora = self.options.lora()
        if self.lora is not None and config.ref_from_rl_checkpoint:
            # With LoRA the reference is the base model itself; nothing to load into it.
            self.config = _with(config, ref_from_rl_checkpoint=0)
        self.engine_kind = engine = self.options.engine(config)
        if engine == "sglang" and self.ctx is not None:
            raise ValueError(
                "the SGLang engine is one server for one trainer: run a single process "
                "(the server is the rollout fleet), not torchrun"
            )
        if self.mode == "trainer_rollout" and engine != "torch":
            raise ValueError("trainer_rollout rolls out with the torch engine on ranks 1..N-1")
        self._pending_stop: str | None = None
        self._signals = 0
        if self.mode == "ddp":
            self.callbacks.append(_agree_on_stop)

    @property
    def ddp(self) -> bool:
        return self.mode == "ddp"

    @property
    def is_main(self) -> bool:
        return self.ctx is None or self.ctx.rank == 0

    # ------------------------------------------------------------------ building

    def _build(self) -> None:
        ctx = self.ctx
        if ctx is not None and ctx.rank > 0:
            ctx.barrier("wait for rank 0 to prepare the run", PREPARE_TIMEOUT_S)
        own = self.config
        # The shared setup builds the torch rollout engine and refuses multi-process
        # launches (both right for the plain Trainer); this trainer swaps in the selected
        # engine afterwards and runs the launch itself.
        self.config = _with(rank_config(own, ctx), rollout_engine="torch")
        try:
            with _as_single_process():
                super()._build()
        finally:
            self.config = own
        if self.lora is not None:
            self._apply_lora()
        if ctx is not None and ctx.rank == 0:
            ctx.barrier("wait for rank 0 to prepare the run", PREPARE_TIMEOUT_S)
        if self.ddp:
            self._become_data_parallel()
        if self.lora is not None and not isinstance(self.source, _SyncMerged):
            self.source = _SyncMerged(self.source)

    def _apply_lora(self) -> None:
        from agentrl.models.lora import ReferenceView, apply_lora

        m = self.models
        policy = apply_lora(m.policy, self.lora)
        policy.train()
        forward = torch.compile(policy) if self.config.use_compile else policy
        # The reference is the policy with its adapter off: drop the separate copy.
        self.models = dataclasses.replace(m, policy=policy, forward=forward,
                                          reference=ReferenceView(policy))  # fmt: skip
        self.optimization = self._optimization(self.optimization.config, self.total_steps)

    def _optimization(self, config: Any, total_steps: int) -> Optimization:
        if self.ddp and self.ctx is not None:
            return DistributedOptimization(self.models.policy, config, total_steps, self.ctx)
        return Optimization(self.models.policy, config, total_steps)

    def _become_data_parallel(self) -> None:
        ctx, cfg = self.ctx, self.config
        assert ctx is not None
        broadcast_module_(ctx, self.models.policy)
        # Reference and rollout copies start as the (now common) policy weights.
        state = policy_state_dict(self.models.policy)
        if self.lora is None:
            self.models.reference.load_state_dict(state)
        self.source.engine.update_weights(state, version=self.source.version.get())
        if cfg.total_steps > 0:
            scale = bool(cfg.scale_total_steps_by_world_size)
            self.total_steps = math.ceil(cfg.total_steps / ctx.world_size) if scale else (
                cfg.total_steps)  # fmt: skip
        else:
            self.total_steps = math.ceil(len(self.train_pool) / cfg.batch_size) * cfg.epochs
        self.optimization = self._optimization(self.optimization.config, self.total_steps)
        self.beta = DistributedBeta(self.beta.config, ctx)

    def _rollout_source(self) -> Any:
        cfg, ctx = self.config, self.ctx
        if self.mode == "trainer_rollout":
            assert ctx is not None
            return self._gathered_source()
        if self.ddp:
            assert ctx is not None
            self.train_pool = shard_pool(self.train_pool, ctx.world_size, ctx.rank)
            # Different rollout randomness on every rank, the same split and evaluation.
            self.config = _with(cfg, seed=cfg.seed + ctx.rank)
        try:
            source = super()._rollout_source()
        finally:
            self.config = cfg
        if self.engine_kind != "torch":
            self._use_remote_engine(source, self.engine_kind)
        return source

    def _gathered_source(self) -> GatheredSource:
        from agentrl.rollout.engine import TorchEngine

        assert self.ctx is not None
        m, cfg = self.models, self.config
        engine = TorchEngine(m.rollout, m.tokenizer, device=m.device, autocast=m.autocast,
                             seed=cfg.seed)  # fmt: skip
        return GatheredSource(
            self.ctx,
            engine,
            batch_size=cfg.batch_size,
            max_version_gap=split_version_gap(cfg),
            fetch_timeout_s=cfg.fetch_timeout_sec,
            version=PolicyVersion(0),
            log=self._early_log,
        )

    def _use_remote_engine(self, source: Any, kind: str) -> None:
        from agentrl.rollout.remote import create_rollout_engine

        engine = create_rollout_engine(kind, **self._remote_options(kind, source.version.get()))
        source.engine = engine
        inner = getattr(source, "rollout", None)
        if inner is not None:
            inner.engine = engine
        self._remote_fresh = True

    def _remote_options(self, kind: str, version: int) -> dict[str, Any]:
        cfg, m = self.config, self.models
        options: dict[str, Any] = {"tokenizer": m.tokenizer, "seed": cfg.seed, "version": version}
        if kind == "sglang":
            options.update(
                sglang_base_url=cfg.sglang_base_url,
                sglang_model_path=cfg.sglang_model_path,
                sglang_shared_path=cfg.sglang_shared_path,
                sglang_wait_s=self.options.sglang_wait_sec,
            )
        elif kind == "vllm":
            options.update(
                vllm_model_path=str(self._vllm_start_dir()),
                vllm_gpu_memory_utilization=self.options.vllm_gpu_memory_utilization,
                vllm_dtype=cfg.dtype,
            )
        return options

    def _vllm_start_dir(self) -> Path:
        """An HF directory vLLM can start from: the policy's own, else an export of it."""
        spec = Path(self.models.spec)
        if (spec / "config.json").is_file():
            return spec
        from agentrl.rl.checkpoint import export_policy

        return export_policy(self.models.rollout, self.models.tokenizer,
                             self.run_dir / "rollout_start", fmt="hf")  # fmt: skip

    # ------------------------------------------------------------------ resume, observer

    def _resume_if_asked(self) -> None:
        if self.lora is None:
            super()._resume_if_asked()
        else:
            models = self.models
            self.models = dataclasses.replace(models, policy=_LoraResumeView(models.policy))
            try:
                super()._resume_if_asked()
            finally:
                self.models = models
        if self.ddp and self.ctx is not None:
            steps = self.ctx.all_gather_objects(self.counters.step, what="agree on the resume step")
            if len(set(steps)) > 1:
                raise DistributedError(
                    f"ranks resumed from different steps {steps}: checkpoints must be on a "
                    "filesystem every rank reads"
                )

    def _open_observer(self) -> None:
        if self.is_main:
            super()._open_observer()
            inner = self.observer
        else:
            inner = None
        self.observer = _Observer(inner, self.ctx if self.ddp else None)  # type: ignore[assignment]

    # ------------------------------------------------------------------ per step

    def _start_rollout(self) -> None:
        if getattr(self, "_remote_fresh", False):
            # The server starts from its own copy of the model: give it the policy's.
            self.source.engine.update_weights(self.models.policy, version=self.source.version.get())
            self._remote_fresh = False
        if self.ddp:
            self._take_over_signals()
            _agree_on_stop(self, self.counters.step, None)
        super()._start_rollout()

    def _next_batch(self, step: int) -> list[Any] | None:
        if not self.ddp:
            return super()._next_batch(step)
        assert self.ctx is not None
        began = time.perf_counter()
        groups = self._draw_groups(step)
        self.rollout_seconds = time.perf_counter() - began
        counts = self.ctx.all_gather_objects(len(groups), what="agree on the batch")
        if min(counts) < self.config.batch_size:
            self.stop.request(f"not enough rollout groups at step {step} (per rank: {counts})")
            self.observer.log(f"stopping: {self.stop.reason}")
            return None
        return groups

    def _train(self, step: int, groups: list[Any]) -> StepOutcome:
        if not self.ddp:
            return super()._train(step, groups)
        assert self.ctx is not None
        packable = self.ctx.all_gather_objects(self._packable(groups), what="agree on packing")
        if not all(packable):
            self.counters.step = step
            self.train_seconds = 0.0
            self.observer.log(f"step {step}: skipped on every rank (ranks packable: {packable})")
            metrics = {"train/skipped": 1.0}
            return StepOutcome(metrics, None, None, None, self.counters.reward_baseline)
        before = self.counters.reward_baseline
        outcome = super()._train(step, groups)
        report = outcome.report
        if report is not None and report.stepped:
            # The reward baseline follows the mean reward of the whole (all-rank) batch.
            (mean,) = self.ctx.mean([outcome.metrics.get("reward/mean", 0.0)],
                                    what="average the reward")  # fmt: skip
            decay = self.settings.advantage.reward_ema_decay
            baseline = update_reward_baseline(before, mean, decay, report.opt_step)
            self.counters.reward_baseline = baseline
            outcome.reward_baseline = baseline
            outcome.metrics["reward/baseline"] = baseline
        return outcome

    def _packable(self, groups: list[Any]) -> bool:
        from agentrl.rl.pack import EmptyBatchError, pack_groups

        tok = self.models.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        try:
            pack_groups(groups, num_generations=self.config.num_generations,
                        max_total_len=self.config.max_total_len, pad_id=int(pad),
                        eos_id=tok.eos_token_id,
                        strict_group_packing=bool(self.config.strict_group_packing),
                        device="cpu")  # fmt: skip
        except EmptyBatchError:
            return False
        return True

    def _evaluate(self, step: int, label: str) -> None:
        if self.is_main:
            super()._evaluate(step, label)

    def _save_checkpoint(self) -> Path | None:
        if not self.is_main:
            self.last_saved_step = self.counters.step
            return None
        if self.lora is None:
            return super()._save_checkpoint()
        from agentrl.models.lora import AdapterCheckpointView

        models = self.models
        self.models = dataclasses.replace(models, policy=AdapterCheckpointView(models.policy))
        try:
            return super()._save_checkpoint()
        finally:
            self.models = models

    def _export_policy(self) -> Path | None:
        if not self.is_main:
            return None
        if self.lora is None:
            return super()._export_policy()
        from agentrl.models.lora import export_merged, save_adapter

        try:
            save_adapter(self.models.policy, self.run_dir / "adapter")
            return export_merged(self.models.policy, self.models.tokenizer, self.run_dir / "policy")
        except ValueError as exc:
            self.observer.log(f"policy export skipped: {exc}")
            return None

    # ------------------------------------------------------------------ agreed stops

    def _take_over_signals(self) -> None:
        """Signals and the time limit only mark a stop as pending; the ranks then agree on
        it at the end of the step, so they all leave the loop at the same step."""
        self._max_time = float(self.stop.max_time)
        self.stop.max_time = 0.0
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals > 1 and signum == signal.SIGINT:
            raise KeyboardInterrupt
        name = signal.Signals(signum).name
        self._pending_stop = self._pending_stop or f"received {name}"
        self._early_log(f"{name} received: finishing the current step, then saving and exiting")

    def _local_stop_reason(self) -> str | None:
        if self.stop.reason is not None:
            return self.stop.reason
        limit = getattr(self, "_max_time", 0.0)
        if self._pending_stop is None and 0 < limit <= time.monotonic() - self.stop.started:
            self._pending_stop = f"time limit of {limit:.0f}s reached"
        return self._pending_stop


def _agree_on_stop(trainer: Trainer, step: int, outcome: Any) -> None:
    """End-of-step callback (data-parallel): if any rank wants to stop, all stop."""
    assert isinstance(trainer, ScaleOutTrainer) and trainer.ctx is not None
    reasons = trainer.ctx.all_gather_objects(trainer._local_stop_reason(), what="agree on stop")
    wanted = [f"rank {r}: {why}" for r, why in enumerate(reasons) if why]
    if wanted and trainer.stop.reason is None:
        trainer.stop.request("; ".join(wanted))
    elif wanted:
        trainer.stop.reason = "; ".join(wanted)


# ---------------------------------------------------------------- rollout ranks


class RolloutRank:
    """A rank > 0 of the trainer/rollout split: load the policy, roll out, serve rank 0."""

    def __init__(self, config: TrainConfig, ctx: DistContext, options: ScaleOptions) -> None:
        self.config = config
        self.ctx = ctx
        self.options = options
        self.summary: dict[str, float] = {}
        self.engine: Any = None

    def _log(self, message: str) -> None:
        print(f"[rank {self.ctx.rank}] {message}", flush=True)

    def run(self) -> TrainResult:
        from agentrl.models import frozen_copy, load_policy, resolve_device
        from agentrl.rollout import AsyncRollout
        from agentrl.rollout.engine import TorchEngine
        from agentrl.training.setup import (
            autocast_factory,
            build_tools,
            episode_config,
            load_prompts,
            model_spec,
        )

        began = time.perf_counter()
        ctx = self.ctx
        ctx.barrier("wait for rank 0 to prepare the run", PREPARE_TIMEOUT_S)
        cfg = rank_config(self.config, ctx)
        device = ctx.device if ctx.device.type == "cuda" else resolve_device(
            None if cfg.device == "auto" else cfg.device)  # fmt: skip
        model, tokenizer = load_policy(model_spec(cfg), "float32", device,
                                       tokenizer=cfg.tokenizer or None)  # fmt: skip
        model = frozen_copy(model)
        if hasattr(model, "config"):
            model.config.use_cache = True
        tools = build_tools(cfg)
        train_pool, _ = load_prompts(cfg, tools, self._log)
        self.engine = engine = TorchEngine(model, tokenizer, device=device,
                             autocast=autocast_factory(device, cfg.dtype),
                             seed=cfg.seed + ctx.rank)  # fmt: skip
        rollout = AsyncRollout(
            engine,
            train_pool,
            tools,
            version=PolicyVersion(0),
            config=episode_config(cfg),
            num_generations=cfg.num_generations,
            batch_size=cfg.batch_size,
            max_version_gap=split_version_gap(cfg),
            max_queue_groups=cfg.max_queue_groups or (split_version_gap(cfg) + 1) * cfg.batch_size,
            num_workers=max(1, cfg.async_workers),
            seed=cfg.seed + ctx.rank,
        )
        self.summary = RolloutWorker(ctx, rollout, log=self._log).run()
        self._log(f"rollout rank done: {self.summary}")
        return TrainResult(
            run_dir=cfg.run_dir,
            steps_done=0,
            total_steps=0,
            stopped=None,
            wall_seconds=time.perf_counter() - began,
        )


# ---------------------------------------------------------------- entry point


def build_trainer(
    config: TrainConfig,
    callbacks: Sequence[Callable[[Trainer, int, StepOutcome], None]] = (),
    *,
    options: ScaleOptions | None = None,
    ctx: DistContext | None = None,
) -> Trainer | RolloutRank:
    """The runner for ``config`` in this process (see module doc).

    Under `torchrun` this joins the process group first (``ctx`` may be passed instead).
    """
    options = options or ScaleOptions.from_config(config)
    if ctx is None and launched_by_torchrun():
        ctx = init_distributed(options.dist_backend, options.dist_timeout_sec)
    if ctx is not None and ctx.world_size > 1:
        if str(config.multi_gpu_mode) == "trainer_rollout" and ctx.rank > 0:
            return RolloutRank(config, ctx, options)
        return ScaleOutTrainer(config, callbacks, options=options, ctx=ctx)
    if options.lora_rank > 0 or options.engine(config) != "torch":
        return ScaleOutTrainer(config, callbacks, options=options)
    return Trainer(config, callbacks)


__all__ = [
    "MODES",
    "RolloutRank",
    "ScaleOptions",
    "ScaleOutTrainer",
    "build_trainer",
    "rank_config",
    "split_version_gap",
]
