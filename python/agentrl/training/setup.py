"""Everything a run needs before its first step: models, tools, prompts.

- The policy comes from ``--model`` (any `load_policy` spec) or, by checkpoint naming, from
  ``save_dir/<from_weight>_<hidden_size>[_moe].pth``. The built-in warm start
  (``runs/tiny-sft``) is trained first, as ``agentrl sft --compile`` would, when missing.
- The reference policy (KL anchor) and the rollout copy start as frozen copies of the
  policy as loaded, before any checkpoint is applied: the reference must stay the warm
  start for the whole run, resumed or not. With the KL penalty off (beta 0, not
  auto-tuned) there is no reference copy; with ``ref_offload`` it lives on the CPU
  (`agentrl.training.memory`).
- Prompts: a prompt-pool JSONL, split into train/held-out by a seeded random split; or, with
  ``data_path = ""``, generated tasks for training and, held out, the exact 200-task set
  that ``agentrl sft`` reports on, so exact match before and after RL is comparable.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from agentrl.config import TrainConfig
from agentrl.data import PromptPool, split_prompt_pool
from agentrl.data.dataset_files import ColumnMap
from agentrl.data.prompt_pool import PromptSample
from agentrl.envs import TaskParts, task_parts, task_tools
from agentrl.models import TINY_SFT_DIR, frozen_copy, load_policy, resolve_device
from agentrl.models.compile import missing_compiler
from agentrl.models.precision import auto_dtype
from agentrl.rollout import EpisodeConfig, SamplingParams
from agentrl.tools import ToolRegistry, builtin_registry
from agentrl.training.memory import OffloadedReference, enable_gradient_checkpointing
from agentrl.utils.imports import split_list
from agentrl.utils.launch import launched_by_torchrun
from agentrl.utils.paths import check_creatable_dir, check_readable_file
from agentrl.utils.threads import set_cpu_threads, usable_cores

Log = Callable[[str], None]

# Where an answer ends: ``stop_at_answer_end`` ends a turn there.
ANSWER_END = "</answer>"
# The held-out tasks generated for ``eval_samples -1`` (all) when there is no data file.
GENERATED_HELDOUT_ALL = 200
AutocastFactory = Callable[[], contextlib.AbstractContextManager[Any]]

# Stream of generated RL prompts; the SFT demonstrations use stream 0, its held-out set 1.
RL_TASK_STREAM = 2


@dataclass
class Models:
    policy: torch.nn.Module  # the trained weights (what checkpoints and syncs read)
    forward: torch.nn.Module  # what training forwards call: the policy, maybe compiled
    reference: torch.nn.Module
    rollout: torch.nn.Module
    tokenizer: Any
    device: torch.device
    autocast: AutocastFactory
    spec: str
    warm_start_seconds: float = 0.0  # spent running `agentrl sft` first, if it ran


def hardware_notes(config: TrainConfig) -> list[str]:
    """What this process does with options meant for hardware it does not have, or that
    work against each other on it."""
    notes = []
    on_cpu = config.device == "cpu" or not torch.cuda.is_available()
    if config.device.startswith("cuda") and not torch.cuda.is_available():
        notes.append(f"device={config.device}: no CUDA device here; running on the CPU")
    threads = _cpu_threads(config)
    # Under torchrun's trainer/rollout split no process both trains and rolls out.
    split = config.multi_gpu_mode == "trainer_rollout" and launched_by_torchrun()
    both = config.rollout_engine == "torch" and config.async_workers > 0 and not split
    if on_cpu and both and threads > 1:
        notes.append(
            f"async_workers={config.async_workers} on the CPU with {threads} torch threads: "
            "rollout and training each run OpenMP teams on the same cores, and idle team "
            "threads then sleep between operations (on 2 cores a step took 1.4x-1.6x as long "
            "as with rollout inline); --async_workers 0, or --num_threads 1 to give each its core"
        )
    return notes


def _cpu_threads(config: TrainConfig) -> int:
    """The torch thread count this run will use (see :func:`configure_threads`)."""
    if config.num_threads > 0:
        return min(config.num_threads, usable_cores())
    return torch.get_num_threads()


def check_data_files(config: TrainConfig) -> None:
    """Fail now, in one line, when a prompt file the config names is not a readable file."""
    for option, path in (
        ("--data_path", config.data_path),
        ("--eval_data_path", config.eval_data_path),
    ):
        if path:
            check_readable_file(path, option)


def preflight(config: TrainConfig) -> None:
    """Fail now, in one line, when ``save_dir/save_weight`` cannot become the run directory
    or a prompt file is missing: before the model and data load (which may take minutes),
    and before anything is written."""
    check_creatable_dir(config.run_dir, "--save_dir/--save_weight")
    check_data_files(config)


def model_spec(config: TrainConfig) -> str:
    """``--model`` when given, else the compatible ``<save_dir>/<from_weight>_<hidden>.pth``."""
    if config.model:
        return config.model
    suffix = "_moe" if config.use_moe else ""
    return str(Path(config.save_dir) / f"{config.from_weight}_{config.hidden_size}{suffix}.pth")


class WarmStartStopped(Exception):
    """A stop request (SIGINT/SIGTERM) ended the warm start before its last step; its
    checkpoint is kept, and the next run that needs the warm start resumes from it."""

    def __init__(self, step: int, seconds: float) -> None:
        super().__init__(f"warm start stopped at step {step}; the next run resumes it")
        self.seconds = seconds  # counted as warm-start time in the run's result


def ensure_warm_start(
    spec: str, log: Log, should_stop: Callable[[], bool] | None = None, progress: bool = True
) -> bool:
    """Train the built-in warm start (`agentrl sft --compile`) when asked for but absent,
    resuming an earlier one that was stopped. Returns whether it ran.

    ``should_stop`` (the run's stop flag) is asked after every step; when it says so the
    warm start saves a checkpoint and :class:`WarmStartStopped` is raised.
    """
    if Path(spec) != Path(TINY_SFT_DIR) or (Path(spec) / "config.json").is_file():
        return False
    from agentrl.sft.checkpoint import list_checkpoints
    from agentrl.sft.pipeline import SFTRunOptions, run_sft
    from agentrl.sft.train import SFTConfig

    resume = bool(list_checkpoints(Path(spec) / "checkpoints"))
    doing = "resuming the stopped warm start" if resume else "training the warm start first"
    log(f"{spec} not found: {doing} (as `agentrl sft --compile` would)")
    began = time.perf_counter()
    # Compiled layers train the built-in warm start faster (docs/tuning.md); a machine that
    # cannot compile gets told so and trains eagerly, to a different (still valid) model.
    cannot_compile = missing_compiler(resolve_device(None))
    if cannot_compile is not None:
        log(f"{cannot_compile}: the warm start trains eagerly, more slowly")
    train = SFTConfig(
        output_dir=spec, resume=resume, compile=cannot_compile is None, progress=progress
    )
    options = SFTRunOptions(train=train)
    result = run_sft(options, log, should_stop)
    if result.training.stopped:
        raise WarmStartStopped(result.training.steps, time.perf_counter() - began)
    if not (Path(spec) / "config.json").is_file():
        raise RuntimeError(f"the warm start did not produce {spec}")
    log(f"warm start: held-out exact match {result.exact_match:.3f}; model saved to {spec}")
    return True


def run_dtype(config: TrainConfig, device: torch.device | str | None = None) -> str:
    """``--dtype``, with ``auto`` made the one detected for `device` (None: the device
    ``--device`` names, CUDA when present for ``auto``): :mod:`agentrl.models.precision`."""
    if config.dtype != "auto":
        return config.dtype
    if device is None:
        device = None if config.device == "auto" else config.device
    return auto_dtype(device).dtype


def weight_dtype(config: TrainConfig, device: torch.device | str | None = None) -> str:
    """The dtype the policy and its copies are loaded in: ``--dtype``, except under FSDP,
    whose float32 shards are cast to ``--dtype`` for compute by FSDP itself."""
    return "float32" if config.fsdp else run_dtype(config, device)


def autocast_factory(device: torch.device, dtype: str) -> AutocastFactory:
    """Autocast to the configured half dtype on CUDA (the weights are held in it already,
    but autocast keeps its float32 ops: softmax, norms); the CPU computes in the weights'
    dtype. ``auto`` is resolved for `device`."""
    if dtype == "auto":
        dtype = auto_dtype(device).dtype
    if device.type != "cuda" or dtype == "float32":
        return contextlib.nullcontext
    amp = torch.bfloat16 if dtype == "bfloat16" else torch.float16
    return lambda: torch.autocast("cuda", dtype=amp)


def torch_engine_options(
    config: TrainConfig, model: Any, device: Any, autocast: Any
) -> dict[str, Any]:
    """`create_rollout_engine` options of the in-process torch engine over ``model``."""
    return {
        "rollout_model": model,
        "device": device,
        "autocast": autocast,
        "kv_reuse": bool(config.rollout_kv_reuse),
        "max_batch_rows": int(config.rollout_batch_rows),
        "compile_decode": bool(config.rollout_compile),
    }


def configure_threads(config: TrainConfig) -> None:
    """Pin torch's CPU thread count when asked (see :mod:`agentrl.utils.threads`)."""
    set_cpu_threads(config.num_threads)


def load_models(
    config: TrainConfig, log: Log, should_stop: Callable[[], bool] | None = None
) -> Models:
    """Policy (trainable), reference and rollout copies, on the configured device.

    ``should_stop`` is handed to a warm start that has to be trained first."""
    configure_threads(config)
    spec = model_spec(config)
    began = time.perf_counter()
    warmed = ensure_warm_start(spec, log, should_stop, progress=bool(config.progress))
    warm_seconds = time.perf_counter() - began if warmed else 0.0
    for note in hardware_notes(config):
        log(note)
    cuda_missing = config.device.startswith("cuda") and not torch.cuda.is_available()
    device = resolve_device(None if config.device == "auto" or cuda_missing else config.device)
    if config.dtype == "auto":
        log(auto_dtype(device).describe())
    policy, tokenizer = load_policy(
        spec,
        weight_dtype(config, device),
        device,
        tokenizer=config.tokenizer or None,
        chat_template=config.chat_template,
        tool_format=config.tool_format,
    )
    policy.train()
    policy.requires_grad_(True)
    if hasattr(policy, "config"):
        policy.config.use_cache = False  # training forwards never reuse a KV cache
    reference, rollout = reference_model(policy, config, device), frozen_copy(policy)
    if hasattr(rollout, "config"):
        rollout.config.use_cache = True
    if config.gradient_checkpointing:
        enable_gradient_checkpointing(policy)
    forward = torch.compile(policy) if config.use_compile else policy
    return Models(
        policy,
        forward,
        reference,
        rollout,
        tokenizer,
        device,  # type: ignore[arg-type]
        autocast_factory(device, config.dtype),
        spec,
        warm_seconds,
    )


def kl_off(config: TrainConfig) -> bool:
    """beta is 0 and stays 0: the loss never reads the reference policy."""
    return config.beta == 0 and not config.beta_auto_tune


def reference_model(
    policy: torch.nn.Module, config: TrainConfig, device: torch.device
) -> torch.nn.Module:
    """The KL anchor: a frozen copy of the policy as loaded, kept on the CPU with
    ``ref_offload``; none (the policy itself stands in, see `agentrl.training.step`)
    when the KL penalty is off."""
    if kl_off(config):
        return policy
    reference = frozen_copy(policy)
    if config.ref_offload and device.type != "cpu":
        return OffloadedReference(reference, device)
    return reference


def episode_config(config: TrainConfig) -> EpisodeConfig:
    """Episode limits and sampling of training rollouts."""
    sampling = SamplingParams(
        temperature=config.temperature,
        top_k=config.top_k,
        top_p=config.top_p,
        min_p=config.min_p,
        repetition_penalty=config.repetition_penalty,
        max_new_tokens=config.max_gen_len,
        stop=(ANSWER_END,) if config.stop_at_answer_end else (),
        logprob_temperature=config.logprob_divisor,
    )
    return EpisodeConfig(
        max_turns=config.max_turns,
        max_new_tokens=config.max_gen_len,
        max_context_len=config.max_context_len,
        thinking_ratio=config.thinking_ratio,
        sampling=sampling,
        tool_workers=config.tool_workers,
    )


def config_parts(config: TrainConfig) -> TaskParts:
    """The user's tools, reward functions and environment named in the config."""
    return task_parts(
        config_tools=config.tools,
        config_reward_funcs=config.reward_funcs,
        config_reward_weights=config.reward_weights,
        config_environment=config.environment,
        options=config,
    )


def build_tools(
    config: TrainConfig, parts: TaskParts | None = None, log: Log = print
) -> ToolRegistry:
    """The built-in tools (active subset, time mode, alias switch), plus the user's.

    ``parts`` defaults to the ones the config names. With user tools or an environment,
    the built-ins are still accepted where a prompt lists them, but prompts that list no
    tools are offered the user's only.
    """
    names = [n.strip() for n in config.tool_subset.split(",") if n.strip()]
    builtin = builtin_registry(
        config.time_mode, names or None, bool(config.augment_calculator_alias)
    )
    parts = parts if parts is not None else config_parts(config)
    if config.mcp:
        from agentrl.tools.mcp import mcp_tools

        commands = split_list(config.mcp, ";")
        served, _ = mcp_tools(
            commands,
            timeout=builtin.timeout,
            log_dir=config.run_dir,
            log=log,
            max_restarts=config.mcp_max_restarts,
        )
        parts = replace(parts, tools=[*parts.tools, *served])
    if parts.tools or parts.environment is not None:
        for name in builtin.supported_names():
            builtin.set_visibility(name, "hidden")
    return task_tools(builtin, parts, log)


def _pool_options(config: TrainConfig, tools: ToolRegistry) -> dict[str, Any]:
    return {
        "max_samples": config.max_samples,
        "filter_mode": config.filter_mode,
        "require_gt": bool(config.require_gt),
        "allowed_tools": tools.supported_names(),
        "inject_answer_instruction": bool(config.inject_answer_instruction),
        "augment_calculator_alias": bool(config.augment_calculator_alias),
        "default_tools": tools.specs(),
        "force_all_tools": bool(config.force_all_tools),
        "registered_tools": user_tool_specs(tools),
        "split": config.data_split,
        "columns": ColumnMap(config.prompt_column, config.answer_column, config.tools_column),
    }


def user_tool_specs(tools: ToolRegistry) -> dict[str, dict[str, Any]]:
    """Specs by name of the tools registered beyond the built-ins (a record may name them)."""
    builtin = set(builtin_registry())
    names = [name for name in tools if name not in builtin]
    return {spec["function"]["name"]: spec for spec in tools.specs(names)}


def generated_heldout_samples(n: int) -> list[PromptSample]:
    """The held-out tasks `agentrl sft` scores by default, as prompt samples."""
    from agentrl.data.synthetic import TaskGenerator
    from agentrl.sft import tasks as sft_tasks

    # generated_heldout only reads the user turns of the demonstrations it must avoid.
    demos = [
        SimpleNamespace(messages=[{"role": "user", "content": t.text}])
        for t in TaskGenerator(seed=sft_tasks.TRAIN_SEED).tasks(sft_tasks.DEFAULT_DEMOS)
    ]
    tasks = sft_tasks.generated_heldout(n, demos)  # type: ignore[arg-type]
    return [PromptSample(list(t.messages), t.tools, [str(g) for g in t.gt]) for t in tasks]


def write_generated_prompts(path: Path, n: int, exclude: set[str], mix: str) -> Path:
    """``n`` generated RL prompts (none of them a held-out task) as prompt-pool JSONL, their
    kinds drawn with the weights of ``mix`` (``"math=0.8,unit=0.08,..."``)."""
    from agentrl.data.synthetic import TaskConfig, TaskGenerator, parse_mix, write_tasks

    generator = TaskGenerator(TaskConfig(mix=parse_mix(mix)), seed=RL_TASK_STREAM)
    tasks, index = [], 0
    while len(tasks) < n:
        task = generator.task(index)
        index += 1
        if task.text not in exclude:
            tasks.append(task)
    write_tasks(str(path), tasks, generator.tools())
    return path


def load_prompts(
    config: TrainConfig, tools: ToolRegistry, log: Log
) -> tuple[PromptPool, PromptPool]:
    """(train, held-out) prompt pools, as the configuration says (see module doc)."""
    options = _pool_options(config, tools)
    if config.data_path:
        train = PromptPool(config.data_path, **options)
    else:
        count = GENERATED_HELDOUT_ALL if config.eval_samples < 0 else config.eval_samples
        heldout = generated_heldout_samples(max(count, 1))
        exclude = {m["content"] for s in heldout for m in s.messages if m["role"] == "user"}
        path = write_generated_prompts(
            config.run_dir / "data" / "train_prompts.jsonl",
            config.generated_tasks,
            exclude,
            config.generated_mix,
        )
        train = PromptPool(str(path), **options)
        log(f"train prompts: {train.summary()} (generated); held-out: {len(heldout)} tasks")
        return train, PromptPool.from_samples(heldout)
    log(f"train prompts: {train.summary()}")
    for skipped in train.skipped[:5]:
        log(f"  skipped {skipped}")
    if config.eval_data_path:
        eval_options = {**options, "max_samples": 0}
        return train, PromptPool(config.eval_data_path, **eval_options)
    return split_prompt_pool(train, config.eval_ratio, config.eval_max_pool, seed=config.seed)


__all__ = [
    "Models",
    "WarmStartStopped",
    "autocast_factory",
    "build_tools",
    "check_data_files",
    "config_parts",
    "configure_threads",
    "ensure_warm_start",
    "episode_config",
    "generated_heldout_samples",
    "hardware_notes",
    "kl_off",
    "load_models",
    "load_prompts",
    "model_spec",
    "preflight",
    "reference_model",
    "run_dtype",
    "torch_engine_options",
    "weight_dtype",
    "write_generated_prompts",
]
