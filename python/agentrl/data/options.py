"""Where a run's prompts and tools come from (the ``data`` section of the run's config)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from agentrl.data.function_calling import DATA_FORMATS
from agentrl.data.synthetic import DEFAULT_MIX, format_mix
from agentrl.tools.mcp import MAX_RESTARTS
from agentrl.utils.options import option

__all__ = ["DataConfig"]


@dataclass(frozen=True)
class DataConfig:
    """Prompt data, its columns and filters, and the task's tools and environment."""

    SECTION: ClassVar[str] = "data"

    data_path: str = option(
        "",
        "prompts: JSONL, parquet, arrow, JSON array, a dataset directory, or a reasoning-gym "
        "generator, reasoning_gym:NAME?size=..&seed=.. ('': generated tasks)",
        flags=("--data",),
        common=True,
    )
    data_split: str = option("train", "split read from a parquet/arrow/dataset --data")
    prompt_column: str = option(
        "", "field with the prompt (text or messages) ('': prompt/question/messages)"
    )
    answer_column: str = option("", "field with the ground truth ('': gt/answer/label)")
    tools_column: str = option("", "field with the tool schemas ('': tools/functions)")
    data_format: str = option(
        "auto",
        "how records are read: prompts (messages/conversations/prompt), or function calling "
        "in bfcl, xlam, openai (tool_calls target) or hermes form (auto: each file's first "
        "record says; docs/function-calling.md)",
        DATA_FORMATS,
    )
    possible_answer: str = option(
        "",
        "BFCL data: its possible-answer file, matched by id ('': possible_answer/<same "
        "name> beside --data, else each record's ground_truth column)",
    )
    max_samples: int = option(0, "keep at most this many prompts (0: all)", check=">=0")
    filter_mode: str = option(
        "math_only", "keep every prompt or only arithmetic tasks", ("all", "math_only")
    )
    require_gt: bool = option(
        True, "skip prompts without ground truth when a reward needs it (tool_use, math_tool)"
    )
    time_mode: str = option("fixed", "get_current_time answers", ("fixed", "live"))
    tool_subset: str = option(
        "calculate_math,unit_converter,get_current_time", "comma-separated active tools"
    )
    inject_answer_instruction: bool = option(True, "add the <answer> instruction to math prompts")
    augment_calculator_alias: bool = option(False, "also offer the calculator alias")
    force_all_tools: bool = option(False, "offer every active tool to every prompt")
    lenient_prompts: bool = option(
        False,
        "read malformed prompt lines instead of skipping them (unknown roles become user; "
        "messages that are not objects and unusable tool fields are dropped)",
    )
    generated_tasks: int = option(4000, "generated prompts when data_path is ''", check=">=0")
    generated_mix: str = option(
        format_mix(DEFAULT_MIX),
        "task-kind weights of the generated prompts (math, unit, time, none), as "
        "`agentrl gen-data --mix`; the held-out tasks keep the default mix",
    )
    tools: str = option(
        "",
        "your tools: comma-separated pkg.module:object (tool, function, registry), or "
        "python (code run in a sandbox)",
        common=True,
    )
    environment: str = option(
        "",
        "episode environment factory, pkg.module:Factory (one object per episode); or "
        "openenv:URL, openenv:pkg.module:Environment, verifiers:MODULE (docs/environments.md)",
    )
    mcp: str = option("", "stdio MCP server commands whose tools the policy gets ('; '-separated)")
    mcp_max_restarts: int = option(
        MAX_RESTARTS,
        "times an exited MCP server is started again before the run stops",
        check=">=0",
    )
    # The sandboxed `python` tool (--tools python, agentrl.tools.python_sandbox).
    python_timeout: float = option(10.0, "python tool: wall-clock seconds per call", check=">0")
    python_memory_mb: int = option(512, "python tool: address space of each process (MB)")
    python_keep_state: bool = option(True, "python tool: one interpreter per episode")
    python_allow_network: bool = option(
        False, "python tool: let the code reach the network (no network namespace)"
    )
