"""Describe an island in one sentence, judged by a model against a rubric.

No rule can score a description, so the ``judge`` reward does: a judge model reads the
task, the entry and the policy's sentence and scores it 0-9 by :data:`RUBRIC` (a reward in
[0, 1]). ``--judge_mode rank`` shows the judge each group's sentences together and asks it
to score them against each other instead. The judge's reasoning is in the rollout dumps
(``--dump_rollouts 1``) and in ``agentrl view``.

    python examples/judged.py runs/judged.jsonl        # write 120 tasks
    agentrl train --data runs/judged.jsonl --reward_funcs judge \\
        --judge_model Qwen/Qwen2.5-0.5B-Instruct --judge_rubric @examples/judged_rubric.txt
    # or a judge served elsewhere:  --judge_url http://localhost:8000/v1
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

RUBRIC_FILE = Path(__file__).with_name("judged_rubric.txt")
RUBRIC = RUBRIC_FILE.read_text(encoding="utf-8").strip()

ENTRIES = {
    "Varnholm": "1200 people; its harbour is Kessa; fishing and ferries to the mainland.",
    "Odrin": "340 people; a lighthouse named Pell; sheep on the western cliffs.",
    "Mirrow": "5100 people; exports salt from the town of Tavi; a summer music festival.",
    "Quell": "uninhabited since 1931; its peak is Harrow Top; a bird reserve.",
    "Sabine Rock": "75 people who keep goats on Drum Hill; no roads, one pier.",
    "Eastmere": "880 people; reached by the ferry Lune; known for its apple orchards.",
}
ASKS = (
    "Describe {name} in one sentence for a travel guide.",
    "Write one sentence telling a visitor what {name} is like.",
    "Sum up {name} in a single sentence.",
)


def write_data(path: str, n: int = 120, seed: int = 0) -> None:
    """``n`` tasks as prompt-pool JSONL (the entry is in the prompt; no ground truth)."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(n):
            name = rng.choice(sorted(ENTRIES))
            ask = rng.choice(ASKS).format(name=name)
            record = {
                "messages": [
                    {"role": "system", "content": "You write short, accurate travel notes."},
                    {"role": "user", "content": f"{ask}\nFacts: {ENTRIES[name]}"},
                ],
                "island": name,
            }
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    write_data(sys.argv[1] if len(sys.argv) > 1 else "judged.jsonl")
