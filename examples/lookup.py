"""Look facts up in a small bundled corpus: search, read the right entry, answer.

Each episode's `LookupEnv` counts what it was asked to read. The reward uses the record's
``answer`` and ``doc_id`` columns: 1.0 for ``<answer>…</answer>`` holding the answer, plus
0.5 when the episode read the entry the answer comes from; None (left out) for a record
without an answer.

    python examples/lookup.py runs/lookup.jsonl        # write 120 questions
    agentrl train --data runs/lookup.jsonl \\
        --environment examples.lookup:LookupEnv --reward_funcs examples.lookup:reward
"""

from __future__ import annotations

import json
import random
import re
import sys
from typing import Any

# id -> (title, text): a corpus of made-up islands, so no model knows the answers already.
CORPUS = {
    "isl-1": ("Varnholm", "Varnholm is an island of 1200 people; its harbour is Kessa."),
    "isl-2": ("Odrin", "Odrin has 340 people and a lighthouse named Pell."),
    "isl-3": ("Mirrow", "Mirrow, 5100 people, exports salt from the town of Tavi."),
    "isl-4": ("Quell", "Quell is uninhabited since 1931; its peak is Harrow Top."),
    "isl-5": ("Sabine Rock", "Sabine Rock has 75 people who keep goats on Drum Hill."),
    "isl-6": ("Eastmere", "Eastmere, 880 people, is reached by the ferry Lune."),
}
QUESTIONS = {  # doc id -> (question about the island, answer)
    "isl-1": ("What is the harbour of {title} called?", "Kessa"),
    "isl-2": ("What is the lighthouse on {title} named?", "Pell"),
    "isl-3": ("From which town does {title} export salt?", "Tavi"),
    "isl-4": ("What is the peak of {title} called?", "Harrow Top"),
    "isl-5": ("On which hill are goats kept on {title}?", "Drum Hill"),
    "isl-6": ("Which ferry reaches {title}?", "Lune"),
}


class LookupEnv:
    """One episode's reader: the corpus, and the entries this episode read."""

    def __init__(self) -> None:
        self.read_ids: list[str] = []
        self.tools = [self.search, self.read]

    def search(self, query: str) -> list[dict[str, str]]:
        """Entries whose title or text shares a word with the query.

        Args:
            query: words to look for
        """
        words = set(re.findall(r"\w+", query.lower()))
        hits = [
            {"id": doc_id, "title": title}
            for doc_id, (title, text) in CORPUS.items()
            if words & set(re.findall(r"\w+", f"{title} {text}".lower()))
        ]
        return hits[:3]

    def read(self, doc_id: str) -> str:
        """The text of one entry.

        Args:
            doc_id: an id from search, e.g. isl-1
        """
        if doc_id not in CORPUS:
            raise KeyError(f"no entry {doc_id}")
        self.read_ids.append(doc_id)
        return CORPUS[doc_id][1]

    def close(self) -> None:
        self.read_ids.clear()


def _answer(text: str) -> str:
    found = re.findall(r"<answer>(.*?)</answer>", text, flags=re.S)
    return found[-1].strip() if found else ""


def reward(
    completions: list[str], answer: list[str | None], doc_id: list[str], **kwargs: Any
) -> list[float | None]:
    """1.0 for the right answer, +0.5 for reading its entry; None without an answer."""
    out: list[float | None] = []
    for text, want, source, trajectory in zip(
        completions, answer, doc_id, kwargs["trajectories"], strict=True
    ):
        if want is None:
            out.append(None)
            continue
        read = any(
            e.ok and e.name == "read" and e.args.get("doc_id") == source
            for e in trajectory.tool_events
        )
        out.append((1.0 if _answer(text).lower() == want.lower() else 0.0) + 0.5 * read)
    return out


def write_data(path: str, n: int = 120, seed: int = 0) -> None:
    """``n`` questions as prompt-pool JSONL with ``answer`` and ``doc_id`` columns."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(n):
            doc_id = rng.choice(sorted(QUESTIONS))
            question, answer = QUESTIONS[doc_id]
            record = {
                "messages": [
                    {
                        "role": "system",
                        "content": "Search the corpus, read the entry, reply <answer>…</answer>.",
                    },
                    {"role": "user", "content": question.format(title=CORPUS[doc_id][0])},
                ],
                "answer": answer,
                "doc_id": doc_id,
            }
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    write_data(sys.argv[1] if len(sys.argv) > 1 else "lookup.jsonl")
