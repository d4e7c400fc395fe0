"""Where SFT gets its demonstrations, held-out tasks and tool environment by default.

Demonstrations come from the synthetic generator (`agentrl gen-data --sft` writes the same
records) or any JSONL of conversations; held-out tasks from a later, disjoint slice of a
different generator stream, or a prompt-pool file. Held-out prompts go through the same
instruction injection the RL prompt pool applies, so the warm-started model is measured on
exactly the prompts RL will show it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl.data.prompt_pool import PromptSample
from agentrl.sft.data import Conversation, LoadStats, read_conversations
from agentrl.tools import ToolRegistry

# Stream seeds of the built-in data: training demonstrations and held-out tasks differ.
TRAIN_SEED = 0
HELDOUT_SEED = 1
# Generated demonstrations when no demonstration file is given. The default held-out set
# (the one the RL trainer evaluates on) avoids the prompts of exactly these.
DEFAULT_DEMOS = 12000
# Generated demonstrations are imperfect by default: this share of the expressions simple
# enough to do in one's head is answered without the tool (`agentrl.data.synthetic`), so the
# warm start leaves reinforcement learning something to fix that it can fix.
DEFAULT_SHORTCUT_RATE = 0.75


def shortcut_settings(rate: float | None, scope: str | None) -> tuple[float, str]:
    """The shortcut rate and scope a command line asked for (None: the defaults), checked."""
    from agentrl.data.synthetic import DEFAULT_SHORTCUT_SCOPE, SHORTCUT_SCOPES
    from agentrl.errors import UsageError

    rate = DEFAULT_SHORTCUT_RATE if rate is None else rate
    if not 0.0 <= rate <= 1.0:
        raise UsageError(f"--shortcut_rate {rate}: expected a share in [0, 1]")
    scope = DEFAULT_SHORTCUT_SCOPE if scope is None else scope
    if scope not in SHORTCUT_SCOPES:
        raise UsageError(f"--shortcut_scope {scope}: expected one of {', '.join(SHORTCUT_SCOPES)}")
    return rate, scope


# render(messages, tools, add_generation_prompt) -> text
Renderer = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None, bool], str]
# A held-out task is a prompt sample (messages before the first assistant turn, tools,
# ground truth), as RL's held-out prompts are: the evaluation's episode loop plays either.
HeldoutTask = PromptSample


@dataclass(frozen=True)
class ToolEnv:
    """How SFT renders its demonstrations, and the tools its held-out episodes call."""

    render: Renderer
    tools: ToolRegistry


def tool_env(tokenizer: Any) -> ToolEnv:
    """Render with the tokenizer's template; the built-in tools (fixed time) for the eval."""
    from agentrl.chat import CHAT_TEMPLATE, apply_chat_template, render_chat
    from agentrl.tools import builtin_registry

    registry = builtin_registry(time_mode="fixed")
    # render_chat renders the built-in template from its compiled form, without the
    # tokenizer's per-call overhead; SFT renders every conversation once per assistant turn.
    builtin_layout = getattr(tokenizer, "chat_template", None) == CHAT_TEMPLATE

    def render(messages: list[dict[str, Any]], tools: Any, generation: bool) -> str:
        if builtin_layout:
            return render_chat(messages, tools, add_generation_prompt=generation)
        return apply_chat_template(tokenizer, messages, tools, add_generation_prompt=generation)

    return ToolEnv(render=render, tools=registry)


def generated_demos(
    n: int,
    seed: int = TRAIN_SEED,
    shortcut_rate: float = 0.0,
    shortcut_scope: str | None = None,
    mix: tuple[tuple[str, float], ...] | None = None,
) -> list[Conversation]:
    """`n` demonstrations from the generator stream `seed`; ``shortcut_rate`` of the
    ``shortcut_scope``'s expressions (head math by default) are answered without the tool.
    ``mix``: the task-kind weights (None: the generator's, `DEFAULT_MIX`)."""
    from agentrl.data.synthetic import TaskConfig, TaskGenerator

    generator = TaskGenerator(TaskConfig(mix=mix) if mix else None, seed=seed)
    tools = generator.tools()
    shortcut_rate, shortcut_scope = shortcut_settings(shortcut_rate, shortcut_scope)
    return [
        Conversation(
            t.demo_messages(shortcut_rate=shortcut_rate, shortcut_scope=shortcut_scope), tools
        )
        for t in generator.tasks(n)
    ]


def generated_heldout(
    n: int, exclude: Sequence[Conversation] = (), seed: int = HELDOUT_SEED
) -> list[HeldoutTask]:
    """`n` generated tasks whose prompt text appears in none of `exclude`."""
    from agentrl.data import inject_instruction
    from agentrl.data.synthetic import TaskGenerator

    seen = {m["content"] for c in exclude for m in c.messages if m["role"] == "user"}
    generator = TaskGenerator(seed=seed)
    tools = generator.tools()
    out: list[HeldoutTask] = []
    index = 0
    while len(out) < n:
        task = generator.task(index)
        index += 1
        if task.text in seen:
            continue
        messages = inject_instruction([{"role": "user", "content": task.text}])
        out.append(PromptSample(messages, tools, [str(g) for g in task.gt]))
    return out


def load_demos(paths: Sequence[str | Path]) -> tuple[list[Conversation], LoadStats]:
    """Conversations from JSONL files, with per-reason counts of what was skipped."""
    stats = LoadStats()
    return read_conversations(paths, stats), stats


def load_heldout(path: str | Path, limit: int) -> list[HeldoutTask]:
    """Held-out tasks from a prompt-pool JSONL (any record shape the prompt pool reads)."""
    from agentrl.data import PromptPool
    from agentrl.tools import builtin_registry

    pool = PromptPool(str(path), max_samples=limit, default_tools=builtin_registry().specs())
    return list(pool)
