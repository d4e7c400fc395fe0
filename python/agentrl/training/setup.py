"""Everything a run needs before its first step: models, tools, prompts.

- The policy comes from ``--model`` (any `load_policy` spec) or, by checkpoint naming, from
  ``save_dir/<from_weight>_<hidden_size>[_moe].pth``. The built-in warm start
  (``runs/tiny-sft``) is trained first, with the ``agentrl sft`` defaults, when missing.
- The reference policy (KL anchor) and the rollout copy start as frozen copies of the
  policy as loaded, before any checkpoint is applied: the reference must stay the warm
  start for the whole run, resumed or not.
- Prompts: a prompt-pool JSONL, split into train/held-out by a seeded random split; or, with
  ``data_path = ""``, generated tasks for training and, held out, the exact 200-task set
  that ``agentrl sft`` reports on, so exact match before and after RL is comparable.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from agentrl.config import TrainConfig
from agentrl.data import PromptPool, split_prompt_pool
from agentrl.data.dataset_files import ColumnMap
from agentrl.data.prompt_pool import PromptSample
from agentrl.models import TINY_SFT_DIR, frozen_copy, load_policy, resolve_device
from agentrl.rollout import EpisodeConfig, SamplingParams
from agentrl.tools import ToolRegistry, builtin_registry
from agentrl.utils.threads import set_cpu_threads

Log = Callable[[str], None]
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
    """What this process does with options meant for hardware it does not have."""
    notes = []
    if config.device.startswith("cuda") and not torch.cuda.is_available():
        notes.append(f"device={config.device}: no CUDA device here; running on the CPU")
    return notes


def model_spec(config: TrainConfig) -> str:
    """``--model`` when given, else the compatible ``<save_dir>/<from_weight>_<hidden>.pth``."""
    if config.model:
        return config.model
    suffix = "_moe" if config.use_moe else ""
    return str(Path(config.save_dir) / f"{config.from_weight}_{config.hidden_size}{suffix}.pth")


def ensure_warm_start(spec: str, log: Log) -> bool:
    """Train the built-in warm start (the `agentrl sft` defaults) when asked for but absent.

    Returns whether it ran.
    """
    if Path(spec) != Path(TINY_SFT_DIR) or (Path(spec) / "config.json").is_file():
        return False
    from agentrl.sft.pipeline import SFTRunOptions, run_sft
    from agentrl.sft.train import SFTConfig

    log(f"{spec} not found: training the warm start first (the `agentrl sft` defaults)")
    result = run_sft(SFTRunOptions(train=SFTConfig(output_dir=spec)), log)
    if not (Path(spec) / "config.json").is_file():
        raise RuntimeError(f"the warm start did not produce {spec}")
    log(f"warm start: held-out exact match {result.exact_match:.3f}; model saved to {spec}")
    return True


def autocast_factory(device: torch.device, dtype: str) -> AutocastFactory:
    """Mixed precision on CUDA in the configured dtype; CPU runs in float32."""
    if device.type != "cuda" or dtype == "float32":
        return contextlib.nullcontext
    amp = torch.bfloat16 if dtype == "bfloat16" else torch.float16
    return lambda: torch.autocast("cuda", dtype=amp)


def configure_threads(config: TrainConfig) -> None:
    """Pin torch's CPU thread count when asked (see :mod:`agentrl.utils.threads`)."""
    set_cpu_threads(config.num_threads)


def load_models(config: TrainConfig, log: Log) -> Models:
    """Policy (trainable), reference and rollout copies, on the configured device."""
    configure_threads(config)
    spec = model_spec(config)
    began = time.perf_counter()
    warmed = ensure_warm_start(spec, log)
    warm_seconds = time.perf_counter() - began if warmed else 0.0
    for note in hardware_notes(config):
        log(note)
    cuda_missing = config.device.startswith("cuda") and not torch.cuda.is_available()
    device = resolve_device(None if config.device == "auto" or cuda_missing else config.device)
    policy, tokenizer = load_policy(spec, "float32", device, tokenizer=config.tokenizer or None,
                                    chat_template=config.chat_template)  # fmt: skip
    policy.train()
    policy.requires_grad_(True)
    if hasattr(policy, "config"):
        policy.config.use_cache = False  # training forwards never reuse a KV cache
    reference, rollout = frozen_copy(policy), frozen_copy(policy)
    if hasattr(rollout, "config"):
        rollout.config.use_cache = True
    forward = torch.compile(policy) if config.use_compile else policy
    return Models(policy, forward, reference, rollout, tokenizer, device,  # type: ignore[arg-type]
                  autocast_factory(device, config.dtype), spec, warm_seconds)  # fmt: skip


def episode_config(config: TrainConfig) -> EpisodeConfig:
    """Episode limits and sampling of training rollouts."""
    sampling = SamplingParams(
        temperature=config.temperature,
        top_k=config.top_k,
        top_p=config.top_p,
        repetition_penalty=config.repetition_penalty,
        max_new_tokens=config.max_gen_len,
        logprob_temperature=config.logprob_divisor,
    )
    return EpisodeConfig(
        max_turns=config.max_turns,
        max_new_tokens=config.max_gen_len,
        max_context_len=config.max_context_len,
        thinking_ratio=config.thinking_ratio,
        sampling=sampling,
    )


def build_tools(config: TrainConfig) -> ToolRegistry:
    """The built-in tools with the configured active subset, time mode and alias switch."""
    names = [n.strip() for n in config.tool_subset.split(",") if n.strip()]
    return builtin_registry(config.time_mode, names or None, bool(config.augment_calculator_alias))


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
        "split": config.data_split,
        "columns": ColumnMap(config.prompt_column, config.answer_column, config.tools_column),
    }


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


def write_generated_prompts(path: Path, n: int, exclude: set[str]) -> Path:
    """``n`` generated RL prompts (none of them a held-out task) as prompt-pool JSONL."""
    from agentrl.data.synthetic import TaskGenerator, write_tasks

    generator = TaskGenerator(seed=RL_TASK_STREAM)
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
        heldout = generated_heldout_samples(max(config.eval_samples, 1))
        exclude = {m["content"] for s in heldout for m in s.messages if m["role"] == "user"}
        path = write_generated_prompts(
            config.run_dir / "data" / "train_prompts.jsonl", config.generated_tasks, exclude
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
    "autocast_factory",
    "build_tools",
    "configure_threads",
    "ensure_warm_start",
    "episode_config",
    "generated_heldout_samples",
    "hardware_notes",
    "load_models",
    "load_prompts",
    "model_spec",
    "write_generated_prompts",
]
