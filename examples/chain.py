"""Follow a trail of clues: each turn's tool call can be right or wrong on its own.

Each episode's `ChainEnv` holds a hidden trail of three letters (the record's ``trail``
column). The episode opens on the first clue; the model calls ``step(letter)`` with the
letter the last clue named, and the tool answers with the next clue (whatever the call
said, so the chain always goes on), then ``end`` after the third step. The environment
scores every turn by its tool call (``turn_reward``): 1.0 for the clue's letter, 0.0 for
another one or no ``step`` call; the answer turn after the trail is not scored.

The episode reward is the sum of its turns, so the same data trains with an episode-level
advantage (``--advantage_mode grpo``: every token of the episode shares one value) or a
turn-level one (``--advantage_mode turn_grpo``: each turn's tokens get their own); the
measured comparison is in docs/turn-credit.md.

    python examples/chain.py runs/chain.jsonl runs/chain-demos.jsonl   # prompts, demos
    agentrl sft --model tiny --data runs/chain-demos.jsonl --output runs/chain-sft
    agentrl train --model runs/chain-sft --data runs/chain.jsonl \\
        --environment examples.chain:ChainEnv --advantage_mode turn_grpo --max_turns 4
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

from agentrl.tools import ToolEvent

LETTERS = "abcd"
STEPS = 3
SYSTEM = (
    "Follow the trail. Each clue names a letter: call step with that letter, e.g. "
    '<tool_call>{"name": "step", "arguments": {"letter": "a"}}</tool_call>. '
    "After the end, reply <answer>done</answer>."
)


def clue(letter: str) -> str:
    return f"clue: {letter}"


END = "end"


class ChainEnv:
    """One episode's trail, and which of its steps the model got right."""

    def __init__(self) -> None:
        self.trail = ""
        self.taken: list[str] = []
        self.tools = [self.step]

    def reset(self, sample: Any) -> str:
        self.trail = str(sample["trail"])
        self.taken = []
        return clue(self.trail[0])

    def step(self, letter: str) -> str:
        """Take one step of the trail.

        Args:
            letter: the letter the last clue named
        """
        self.taken.append(str(letter))
        n = len(self.taken)
        return clue(self.trail[n]) if n < len(self.trail) else END

    def turn_reward(self, turn: int, text: str, events: list[ToolEvent]) -> float | None:
        """1.0 when this turn's first call steps to the letter of the clue it answers."""
        if turn >= len(self.trail):
            return None  # the answer after the trail
        steps = [e for e in events if e.name == "step"]
        if not steps:
            return 0.0
        first = steps[0]
        letter = str(first.args.get("letter", ""))
        return 1.0 if first.ok and letter == self.trail[turn] else 0.0

    def close(self) -> None:
        self.taken = []


def _trail(rng: random.Random) -> str:
    return "".join(rng.choice(LETTERS) for _ in range(STEPS))


def _prompt(trail: str) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Start."},
        ],
        "trail": trail,
    }


def write_data(path: str, n: int = 400, seed: int = 0) -> None:
    """``n`` prompts as prompt-pool JSONL with the hidden ``trail`` column."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(n):
            handle.write(json.dumps(_prompt(_trail(rng))) + "\n")


def write_demos(path: str, n: int = 3000, seed: int = 1, accuracy: float = 0.4) -> None:
    """``n`` demonstrations in `agentrl sft`'s format whose calls follow the clue with
    probability ``accuracy`` (another letter otherwise): a warm start that knows the form
    and half the rule, for reinforcement learning to finish."""
    from agentrl.envs import task_parts, task_tools
    from agentrl.tools import builtin_registry, tool_message

    specs = task_tools(builtin_registry(), task_parts(environment=ChainEnv)).specs()
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(n):
            env = ChainEnv()
            trail = _trail(rng)
            messages = [*_prompt(trail)["messages"]]
            messages.append({"role": "user", "content": env.reset({"trail": trail})})
            for want in trail:
                letter = want
                if rng.random() >= accuracy:
                    letter = rng.choice([x for x in LETTERS if x != want])
                call = {"name": "step", "arguments": {"letter": letter}}
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
                messages.append({"role": "tool", "content": tool_message(env.step(letter), 1024)})
            messages.append({"role": "assistant", "content": "<answer>done</answer>"})
            handle.write(json.dumps({"conversations": messages, "tools": specs}) + "\n")


if __name__ == "__main__":
    write_data(sys.argv[1] if len(sys.argv) > 1 else "chain.jsonl")
    if len(sys.argv) > 2:
        write_demos(sys.argv[2])
