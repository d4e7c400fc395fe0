"""A verifiers environment, written as verifiers' docs and `vf-init -T` write one, trained
unchanged: count a letter in a word, with a tool server that counts.

verifiers runs in a virtual environment of its own (its pins clash with agentrl's; see
docs/environments.md), made once from the repository root:

    make verifiers-venv
    PYTHONPATH=examples agentrl train \\
        --environment "verifiers:verifiers_letters?num_tasks=200" --total_steps 50

(verifiers imports an environment as a top-level module, hence ``PYTHONPATH=examples``.)

The tasks are the prompts; verifiers' own harness plays each episode against the run's
endpoint, with the ``letters_count`` tool of examples/verifiers_letters_tools.py; the
rubric (``correct`` below) is the reward.
"""

from __future__ import annotations

import random

import verifiers.v1 as vf
from verifiers_letters_tools import LettersToolset

WORDS = ("banana", "committee", "mississippi", "bookkeeper", "parallel", "assessment")


class LettersData(vf.TaskData):
    answer: str = ""


class LettersTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class LettersTask(vf.Task[LettersData, vf.State, LettersTaskConfig]):
    @classmethod
    def toolsets(cls, config: LettersTaskConfig) -> list[vf.Toolset]:
        return [LettersToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        """1.0 when the last reply holds the right count in <answer> tags."""
        return float(f"<answer>{self.data.answer}</answer>" in (trace.last_reply or ""))


class LettersConfig(vf.TasksetConfig):
    num_tasks: int = 100
    seed: int = 0
    task: LettersTaskConfig = LettersTaskConfig()


class LettersTaskset(vf.Taskset[LettersTask, LettersConfig]):
    def load(self) -> list[LettersTask]:
        rng = random.Random(self.config.seed)
        tasks = []
        for _ in range(self.config.num_tasks):
            word = rng.choice(WORDS)
            letter = rng.choice(sorted(set(word)))
            prompt = (
                f"How many times does the letter {letter!r} occur in {word!r}? "
                "Answer in <answer></answer> tags."
            )
            data = LettersData(prompt=prompt, answer=str(word.count(letter)))
            tasks.append(LettersTask(data, self.config.task))
        return tasks


__all__ = ["LettersTaskset"]
