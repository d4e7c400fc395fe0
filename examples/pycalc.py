"""Questions that want a computation, with a sandboxed Python interpreter as the tool.

The policy gets the built-in ``python`` tool (``--tools python``): each episode has its
own interpreter (its variables last for the episode), with no network, a private working
directory, and time, memory and process limits (see ``agentrl.tools.python_sandbox``).
The reward: 1.0 for the right number in ``<answer>…</answer>``, plus 0.2 when the episode
ran code that worked; None for a record without an answer.

    python examples/pycalc.py runs/pycalc.jsonl        # write 200 questions
    agentrl train --data runs/pycalc.jsonl --tools python \\
        --reward_funcs examples.pycalc:reward --python_timeout 5
"""

from __future__ import annotations

import json
import math
import random
import re
import sys
from typing import Any


def _questions(rng: random.Random) -> tuple[str, str]:
    kind = rng.randrange(4)
    if kind == 0:
        n = rng.randint(20, 60)
        return f"What is the sum of the squares of the integers 1 to {n}?", str(
            sum(i * i for i in range(1, n + 1))
        )
    if kind == 1:
        n = rng.randint(200, 2000)
        primes = [p for p in range(2, n + 1) if all(p % d for d in range(2, math.isqrt(p) + 1))]
        return f"How many primes are there below or equal to {n}?", str(len(primes))
    if kind == 2:
        a, b = rng.randint(10**5, 10**6), rng.randint(10**5, 10**6)
        return f"What is the greatest common divisor of {a * 6} and {b * 6}?", str(
            math.gcd(a * 6, b * 6)
        )
    n = rng.randint(15, 25)
    return f"How many digits does {n} factorial have?", str(len(str(math.factorial(n))))


def write_data(path: str, n: int = 200, seed: int = 0) -> None:
    """``n`` questions as prompt-pool JSONL with an ``answer`` column."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(n):
            question, answer = _questions(rng)
            record = {
                "messages": [
                    {
                        "role": "system",
                        "content": "Compute with the python tool, then reply <answer>N</answer>.",
                    },
                    {"role": "user", "content": question},
                ],
                "answer": answer,
            }
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def _answer(text: str) -> str:
    found = re.findall(r"<answer>(.*?)</answer>", text, flags=re.S)
    return found[-1].strip().replace(",", "") if found else ""


def reward(completions: list[str], answer: list[str | None], **kwargs: Any) -> list[float | None]:
    """1.0 for the right number, +0.2 for code that ran; None without an answer."""
    out: list[float | None] = []
    for text, want, trajectory in zip(completions, answer, kwargs["trajectories"], strict=True):
        if want is None:
            out.append(None)
            continue
        ran = any(e.ok and e.name == "python" for e in trajectory.tool_events)
        out.append((1.0 if _answer(text) == want else 0.0) + 0.2 * ran)
    return out


if __name__ == "__main__":
    write_data(sys.argv[1] if len(sys.argv) > 1 else "pycalc.jsonl")
