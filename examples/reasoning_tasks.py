"""reasoning-gym's task generators as prompts, each scored by its own scorer.

``--data reasoning_gym:NAME[?size=..&seed=..&<config field>=..]`` makes the prompts (any of
reasoning-gym's ~100 generators; its system prompt asks for the answer in ``<answer>``
tags); the reward is the generator's scorer (``reasoning_gym`` on the metrics line), used
alone when no ``--reward_funcs`` are given, or beside yours:

    pip install 'agentrl[reasoning-gym]'
    agentrl train --data "reasoning_gym:leg_counting?size=500&seed=1" --total_steps 50
    agentrl train --data "reasoning_gym:basic_arithmetic?size=500&max_terms=4" \\
        --tools python --reward_funcs reasoning_gym,examples.reasoning_tasks:brief \\
        --reward_weights 1.0,0.2

``brief`` (below) is such a reward of your own: it prefers a final answer of a few
characters, as reasoning-gym's format asks (the reasoning goes before the tags).
"""

from __future__ import annotations

from typing import Any

from agentrl.rewards.reasoning_gym import answer_text


def brief(completions: list[str], **kwargs: Any) -> list[float]:
    """1.0 for an answer of at most 20 characters in ``<answer>`` tags, less for a longer
    one, 0.0 without one."""
    out = []
    for completion in completions:
        answer = answer_text(completion)
        out.append(0.0 if answer is None else min(1.0, 20 / max(len(answer), 1)))
    return out
