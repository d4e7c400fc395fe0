"""The run's prompts, from its config.

A prompt-pool JSONL, split into train/held-out by a seeded random split; or, with
``data_path = ""``, generated tasks for training and, held out, the exact 200-task set
that ``agentrl sft`` reports on, so exact match before and after RL is comparable.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from agentrl.config import TrainConfig
from agentrl.data import PromptPool, split_prompt_pool
from agentrl.data.dataset_files import ColumnMap
from agentrl.data.prompt_pool import PromptSample
from agentrl.envs import EnvironmentTools, TaskParts, rewards_read_gt
from agentrl.tools import ToolRegistry, builtin_registry
from agentrl.training.models import Log

# The held-out tasks generated for ``eval_samples -1`` (all) when there is no data file.
GENERATED_HELDOUT_ALL = 200

# Stream of generated RL prompts; the SFT demonstrations use stream 0, its held-out set 1.
RL_TASK_STREAM = 2


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
        "lenient": bool(config.lenient_prompts),
        "registered_tools": user_tool_specs(tools),
        "split": config.data_split,
        "columns": ColumnMap(config.prompt_column, config.answer_column, config.tools_column),
        "data_format": config.data_format,
        "possible_answer": config.possible_answer,
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
    for note in train.notes:
        log(f"  {note}")
    for skipped in train.skipped[:5]:
        log(f"  skipped {skipped}")
    if config.eval_data_path:
        eval_options = {**options, "max_samples": 0}
        return train, PromptPool(config.eval_data_path, **eval_options)
    return split_prompt_pool(train, config.eval_ratio, config.eval_max_pool, seed=config.seed)


def prompt_config(
    config: TrainConfig, task: TaskParts, tools: ToolRegistry, log: Log
) -> TrainConfig:
    """The config the prompts load with: ``require_gt`` applies when a reward needs
    the ground truth (the built-in tool_use or math_tool), not to the user's own."""
    env_reward = isinstance(tools, EnvironmentTools) and tools.has_reward
    if not config.require_gt or rewards_read_gt(task, env_reward):
        return config
    log("prompts without ground truth are kept: no reward here reads it (require_gt)")
    return replace(config, require_gt=0)
