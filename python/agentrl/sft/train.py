"""The supervised warm-start loop: masked LM loss, AdamW, warm-up + cosine, accumulation.

The loop reads top to bottom: draw `grad_accum` length-bucketed batches, weight every
assistant token equally across them, clip, step, log; evaluate greedy tool use and save an
atomic checkpoint at fixed intervals; finally publish the model where RL will look for it.

A LoRA model (a peft model, `agentrl.models.lora`) trains the same way: only its adapter has
gradients, so only the adapter is optimized and checkpointed; the published model is the
merged full weights (`agentrl.sft.checkpoint`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from agentrl.errors import SaveError, UsageError
from agentrl.models.compile import compile_decoder_layers, eager_generation
from agentrl.models.loading import autocast_context
from agentrl.models.lora import AdapterCheckpointView, adapter_signature, base_model_of
from agentrl.rl.optim import load_masters, master_weights, step_on_masters
from agentrl.sft import checkpoint as ckpt
from agentrl.sft.data import Example, bucketed_batches, collate
from agentrl.sft.tasks import HeldoutTask, ToolEnv
from agentrl.training.forward import common_prefix, masked_logps
from agentrl.utils.atomic import saving
from agentrl.utils.schedule import lr_factor


@dataclass
class SFTConfig:
    """Everything that shapes a run; stored in each checkpoint and in the summary."""

    output_dir: str = "runs/tiny-sft"
    steps: int = 4000
    batch_tokens: int = 4096
    max_batch: int = 16
    # Batches of similar length (less padding); False: drawn at random, each batch the
    # data's mix (agentrl.sft.data.bucketed_batches says when that matters).
    group_by_length: bool = True
    grad_accum: int = 1
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 50
    # The rate holds until the last fifth, then decays: the tiny model learns to copy
    # numbers late and suddenly, and a plateau gets it there on more machines than a cosine
    # over the whole run did (docs/tuning.md).
    decay_fraction: float = 0.2
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.95)
    clip: float = 1.0
    eval_interval: int = 500
    eval_subset: int = 64
    max_turns: int = 4
    max_new_tokens: int = 96
    eval_batch: int = 100
    save_interval: int = 200
    keep_last: int = 2
    log_interval: int = 10
    max_time: float = 0.0
    # Stop (with a checkpoint) after this many steps while the schedule still spans `steps`:
    # lets a run be split into pieces that resume into the same trajectory.
    stop_after: int = 0
    seed: int = 0
    progress: bool = True
    resume: bool = False
    # Compile each decoder layer for training steps (agentrl.models.compile); generation
    # for the evaluations stays eager.
    compile: bool = False


@dataclass
class SFTResult:
    steps: int
    seconds: float
    final_loss: float
    eval: dict[str, float] = field(default_factory=dict)
    skipped_steps: int = 0
    # Asked to stop before the last step: a checkpoint was saved, the model not published.
    stopped: bool = False


class BatchStream:
    """Endless, resumable sequence of index batches (epoch k is shuffled with seed + k)."""

    def __init__(
        self,
        lengths: Sequence[int],
        batch_tokens: int,
        max_batch: int,
        seed: int,
        group_by_length: bool = True,
    ):
        self.lengths, self.batch_tokens, self.max_batch, self.seed = (
            list(lengths),
            batch_tokens,
            max_batch,
            seed,
        )
        self.group_by_length = group_by_length
        self.epoch, self.pos = 0, 0
        self._batches = self._make()

    def _make(self) -> list[list[int]]:
        return bucketed_batches(
            self.lengths,
            self.batch_tokens,
            self.max_batch,
            self.seed + self.epoch,
            group_by_length=self.group_by_length,
        )

    def next(self) -> list[int]:
        if self.pos >= len(self._batches):
            self.epoch, self.pos = self.epoch + 1, 0
            self._batches = self._make()
        batch = self._batches[self.pos]
        self.pos += 1
        return batch

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "pos": self.pos}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.pos = int(state["epoch"]), int(state["pos"])
        self._batches = self._make()


def masked_loss_sum(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Summed next-token cross-entropy over assistant tokens only.

    The output layer runs only where the loss looks (most tokens are prompt and tool
    output), and the prefix every row shares (system prompt, tool specs) runs once for the
    batch: on the built-in demonstrations that is 64 of about 148 tokens a row.
    """
    ids, attn = batch["input_ids"], batch["attention_mask"]
    trained = batch["loss_mask"][:, 1:]
    plan = common_prefix(ids, attn, trained)
    logps = masked_logps(model, ids, attn, trained, prefixes=plan).logps
    return -(logps * trained).sum()


def _param_groups(params: Sequence[torch.Tensor], weight_decay: float) -> list[dict[str, Any]]:
    decay, plain = [], []
    for p in params:
        (decay if p.dim() >= 2 else plain).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0.0}]


class MetricsLog:
    """Append-only JSONL of metric records, truncated to `step` on resume."""

    def __init__(self, path: Path, resume_step: int | None):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        kept: list[str] = []
        if resume_step is not None and path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    if int(json.loads(line).get("step", 0)) <= resume_step:
                        kept.append(line)
                except (ValueError, AttributeError):
                    continue
        path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        size = self.path.stat().st_size if self.path.exists() else 0
        try:
            with saving(self.path), self.path.open("a", encoding="utf-8") as handle:
                handle.write(line)
        except SaveError:
            with contextlib.suppress(OSError):  # no torn line: the file stays whole lines
                os.truncate(self.path, size)
            raise


def accumulate_step(
    model: torch.nn.Module,
    batches: Sequence[dict[str, torch.Tensor]],
    weight_dtype: torch.dtype,
) -> tuple[float, int]:
    """Forward/backward over micro-batches; every assistant token weighs the same.

    Returns (loss, tokens processed). Gradients are left in `.grad` for the caller.
    """
    device = next(model.parameters()).device
    n_target = sum(int(b["loss_mask"][:, 1:].sum()) for b in batches)
    total, tokens = 0.0, 0
    for batch in batches:
        batch = {k: v.to(device) for k, v in batch.items()}
        with autocast_context(device, weight_dtype):
            loss = masked_loss_sum(model, batch) / max(n_target, 1)
        loss.backward()
        total += float(loss.detach())
        tokens += int(batch["attention_mask"].sum())
    return total, tokens


class _Run:
    """State of one SFT run: model, optimizer, schedule, data position, logs."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        examples: Sequence[Example],
        env: ToolEnv,
        cfg: SFTConfig,
        log: Callable[[str], None],
    ) -> None:
        self.model, self.tokenizer, self.examples, self.env, self.cfg, self.log = (
            model,
            tokenizer,
            examples,
            env,
            cfg,
            log,
        )
        self.out = Path(cfg.output_dir)
        if cfg.compile:
            compile_decoder_layers(model)
        # LoRA: what a resume must match, and the module whose state a checkpoint holds.
        self.adapter = adapter_signature(model)
        self.saved = AdapterCheckpointView(model) if self.adapter is not None else model
        self.device = next(model.parameters()).device
        self.weight_dtype = next(model.parameters()).dtype
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        # Weights in bfloat16 or float16 (a LoRA adapter takes the model's dtype) step on
        # float32 masters, as in RL (`agentrl.rl.optim`): small updates would round away.
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.masters = master_weights(self.params)
        self.opt = torch.optim.AdamW(
            _param_groups(self.masters or self.params, cfg.weight_decay),
            lr=cfg.lr,
            betas=cfg.betas,
        )
        # Seconds of training before this process (from the checkpoint on resume).
        self.elapsed_before = 0.0
        self.started = time.perf_counter()
        self.stream = BatchStream(
            [len(e) for e in examples],
            cfg.batch_tokens,
            cfg.max_batch,
            cfg.seed,
            cfg.group_by_length,
        )
        self.step, self.skipped = 0, 0

    def resume(self) -> bool:
        """Load the latest complete checkpoint, if any; True when one was found."""
        found = ckpt.list_checkpoints(self.out / "checkpoints")
        if not found:
            return False
        state = ckpt.load_trainer_state(found[-1])
        _check_same_adapter(found[-1], state.get("adapter"), self.adapter)
        ckpt.load_weights(self.saved, found[-1])
        self.opt.load_state_dict(state["optimizer"])
        load_masters(self.masters, state.get("master_weights"), self.params)
        self.elapsed_before = float(state.get("elapsed", 0.0))
        self.stream.load_state_dict(state["stream"])
        self.step, self.skipped = int(state["step"]), int(state.get("skipped", 0))
        ckpt.set_rng_state(state["rng"])
        self.log(f"resumed from {found[-1]} at step {self.step}")
        return True

    def train_step(self) -> tuple[float, float, int]:
        """One optimizer step; returns (loss, grad norm, tokens). Non-finite: no update."""
        batches = [
            collate([self.examples[i] for i in self.stream.next()], self.pad_id)
            for _ in range(self.cfg.grad_accum)
        ]
        loss, tokens = accumulate_step(self.model, batches, self.weight_dtype)
        stepped, grad_norm = False, math.nan
        if math.isfinite(loss):
            stepped, grad_norm = step_on_masters(
                self.params, self.masters, self.opt, None, self.cfg.clip
            )
        if not stepped:
            self.skipped += 1
            self.log(f"step {self.step + 1}: non-finite loss or gradient, update skipped")
        self.model.zero_grad(set_to_none=True)
        self.opt.zero_grad(set_to_none=True)
        self.step += 1
        self.set_lr()
        return loss, grad_norm, tokens

    def evaluate(self, tasks: Sequence[HeldoutTask]) -> dict[str, float]:
        """Greedy held-out episodes through the rollout's loop and the reward's details."""
        from agentrl.training.evaluation import evaluate_model

        eager = eager_generation() if self.cfg.compile else nullcontext()
        with eager:
            scores, _ = evaluate_model(
                base_model_of(self.model),  # a LoRA model's layers carry the adapter
                self.tokenizer,
                tasks,
                self.env.tools,
                max_turns=self.cfg.max_turns,
                max_new_tokens=self.cfg.max_new_tokens,
                batch_rows=self.cfg.eval_batch,
            )
        self.model.train()
        return scores

    def save(self) -> None:
        state = {
            "optimizer": self.opt.state_dict(),
            "elapsed": self.elapsed(),
            "stream": self.stream.state_dict(),
            "skipped": self.skipped,
            "config": asdict(self.cfg),
            "adapter": self.adapter,
            "master_weights": None
            if self.masters is None
            else [m.detach().cpu().clone() for m in self.masters],
        }
        root = self.out / "checkpoints"
        saved = ckpt.save_checkpoint(
            root, self.step, self.saved, self.tokenizer, state, self.cfg.keep_last
        )
        if saved is None:
            self.log(f"step {self.step}: non-finite weights, checkpoint skipped")

    def elapsed(self) -> float:
        return self.elapsed_before + time.perf_counter() - self.started

    def set_lr(self) -> float:
        """Learning rate for the next step, from the step count and the time budget."""
        cfg = self.cfg
        progress = self.elapsed() / cfg.max_time if cfg.max_time > 0 else 0.0
        lr = cfg.lr * lr_factor(
            self.step, cfg.steps, cfg.warmup_steps, cfg.min_lr_ratio, progress, cfg.decay_fraction
        )
        for group in self.opt.param_groups:
            group["lr"] = lr
        return lr

    def out_of_time(self) -> bool:
        return self.cfg.max_time > 0 and self.elapsed() >= self.cfg.max_time

    def due(self, interval: int) -> bool:
        return interval > 0 and self.step % interval == 0 and self.step < self.cfg.steps


def _describe(adapter: dict[str, Any] | None) -> str:
    if adapter is None:
        return "all weights (--lora_rank 0)"
    return (
        f"a LoRA adapter (--lora_rank {adapter['rank']} --lora_alpha {adapter['alpha']:g} "
        f"--lora_dropout {adapter['dropout']:g}, targets {adapter['target_modules']})"
    )


def _check_same_adapter(
    path: Path, saved: dict[str, Any] | None, current: dict[str, Any] | None
) -> None:
    """A checkpoint resumes only the kind of run that wrote it: an adapter-only checkpoint
    needs an adapter of its shape on the base weights it was trained on."""
    shape = {k: v for k, v in (saved or {}).items() if k != "base"}
    if (saved is None) != (current is None) or (
        current is not None and shape != {k: v for k, v in current.items() if k != "base"}
    ):
        raise UsageError(
            f"{path} trained {_describe(saved)}; this run trains {_describe(current)}: "
            "resume with the run's own options, or remove its checkpoints to start again"
        )
    if saved is not None and current is not None and saved["base"] != current["base"]:
        raise UsageError(
            f"{path}: the base model differs from the one its LoRA adapter was trained on "
            "(another --model, --tiny or --dtype?): resume with the run's own base model"
        )


def train_sft(
    model: torch.nn.Module,
    tokenizer: Any,
    examples: Sequence[Example],
    eval_tasks: Sequence[HeldoutTask],
    env: ToolEnv,
    cfg: SFTConfig,
    log: Callable[[str], None] = print,
    should_stop: Callable[[], bool] | None = None,
) -> SFTResult:
    """Train `model` in place on `examples`; evaluate on `eval_tasks`; save under output_dir.

    ``should_stop`` is asked after every step (a caller's SIGINT/SIGTERM flag): when it says
    so, the run saves a checkpoint that ``resume`` continues from and returns ``stopped``,
    without publishing the unfinished model or evaluating it.
    """
    if not examples:
        raise ValueError("no training examples")
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    model.train()
    run = _Run(model, tokenizer, examples, env, cfg, log)
    resumed = cfg.resume and run.resume()
    run.set_lr()
    metrics = MetricsLog(run.out / "metrics.jsonl", run.step if resumed else None)
    periodic = list(eval_tasks)[: cfg.eval_subset]
    bar = _progress(cfg, run.step)
    start = time.perf_counter()
    window: list[float] = []
    window_tokens, window_start, last = 0, start, float("nan")
    stopped = False
    while run.step < cfg.steps:
        loss, grad_norm, tokens = run.train_step()
        last = loss
        window.append(loss)
        window_tokens += tokens
        if run.step % cfg.log_interval == 0 or run.step == cfg.steps:
            now = time.perf_counter()
            record = {
                "step": run.step,
                "loss": sum(window) / len(window),
                "lr": run.opt.param_groups[0]["lr"],
                "grad_norm": grad_norm,
                "tokens_per_s": window_tokens / max(now - window_start, 1e-9),
                "elapsed_s": now - start,
                "epoch": run.stream.epoch,
            }
            metrics.write(record)
            if bar is not None:
                bar.set_postfix(
                    loss=f"{record['loss']:.3f}",
                    tok_s=f"{record['tokens_per_s']:.0f}",
                    lr=f"{record['lr']:.1e}",
                )
            window, window_tokens, window_start = [], 0, now
        if bar is not None:
            bar.update(1)
        if run.due(cfg.eval_interval) and periodic:
            scores = run.evaluate(periodic)
            metrics.write({"step": run.step, **scores})
            log(
                f"step {run.step}: exact match {scores['eval/exact_match']:.3f} "
                f"on {len(periodic)} tasks"
            )
        if run.due(cfg.save_interval):
            run.save()
        if run.out_of_time():
            log(f"time budget of {cfg.max_time:.0f}s reached at step {run.step}")
            break
        if 0 < cfg.stop_after <= run.step:
            break
        if should_stop is not None and should_stop():
            stopped = True
            break
    if bar is not None:
        bar.close()
    train_seconds = time.perf_counter() - start
    run.save()
    if stopped:
        log(f"stopped at step {run.step} of {cfg.steps}: checkpoint saved in {run.out}")
        return SFTResult(run.step, train_seconds, last, {}, run.skipped, stopped=True)
    ckpt.publish_into(model, tokenizer, run.out)
    final = run.evaluate(eval_tasks) if eval_tasks else {}
    if final:
        metrics.write({"step": run.step, "final": True, **final})
    result = SFTResult(run.step, train_seconds, last, final, run.skipped)
    summary = {**asdict(result), "config": asdict(cfg), "adapter": run.adapter}
    with saving(run.out / "sft_summary.json"):
        (run.out / "sft_summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return result


def _progress(cfg: SFTConfig, initial: int) -> Any:
    if not cfg.progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=cfg.steps, initial=initial, desc="sft", unit="step", dynamic_ncols=True)
