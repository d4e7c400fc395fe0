"""``reasoning_gym``: the reward of prompts made by a reasoning-gym generator, by its own scorer.

Each prompt of ``--data reasoning_gym:NAME`` (`agentrl.data.reasoning_gym`) carries the
task's ``answer`` and ``metadata`` columns; the reward takes the completion's last
``<answer>…</answer>`` (reasoning-gym's answer format), hands it with the task to the
scorer of the generator that made it (``reasoning_gym.get_score_answer_fn``, looked up by
``metadata["source_dataset"]``) and returns its score in [0, 1]: 0 without an answer, as
reasoning-gym scores one. A prompt from elsewhere (no ``metadata`` of reasoning-gym) is
``None``. The scorer is reasoning-gym's code: an exception in it stops the run with one
line naming the task.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from agentrl.data.reasoning_gym import reasoning_gym_module
from agentrl.errors import call_user_code

NAME = "reasoning_gym"


def answer_text(completion: str) -> str | None:
    """The text inside the completion's last ``<answer>…</answer>``, stripped; None when
    there is none (found in linear time, whatever the completion holds)."""
    end = completion.rfind("</answer>")
    if end < 0:
        return None
    start = completion.rfind("<answer>", 0, end)
    if start < 0:
        return None
    return completion[start + len("<answer>") : end].strip()


@functools.cache
def _scorer(task: str) -> Callable[[str | None, dict[str, Any]], float]:
    reasoning_gym_module(f"the {NAME} reward")
    from reasoning_gym import get_score_answer_fn

    return call_user_code(f"reasoning-gym task {task!r} (its scorer)", get_score_answer_fn, task)


def _question(prompt: Any) -> str:
    users = [m for m in prompt or [] if isinstance(m, dict) and m.get("role") == "user"]
    return str(users[-1].get("content", "")) if users else ""


def reasoning_gym_reward(
    *,
    prompts: Sequence[Any],
    completions: Sequence[str],
    metadata: Sequence[Any] | None = None,
    answer: Sequence[Any] | None = None,
    **extra: Any,
) -> list[float | None]:
    """reasoning-gym's score of each completion (see the module doc)."""
    del extra
    n = len(completions)
    metadata = list(metadata) if metadata is not None else [None] * n
    answers = list(answer) if answer is not None else [None] * n
    out: list[float | None] = []
    for prompt, completion, meta, expected in zip(
        prompts, completions, metadata, answers, strict=True
    ):
        task = meta.get("source_dataset") if isinstance(meta, dict) else None
        if not task:
            out.append(None)
            continue
        entry = {"question": _question(prompt), "answer": expected, "metadata": meta}
        scorer = _scorer(str(task))
        what = f"reasoning-gym task {task!r} (its scorer)"
        score = call_user_code(what, scorer, answer_text(completion), entry)
        out.append(float(score))
    return out


reasoning_gym_reward.__name__ = NAME  # metrics name it as --reward_funcs does

__all__ = ["NAME", "answer_text", "reasoning_gym_reward"]
