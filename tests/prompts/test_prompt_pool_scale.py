"""Prompt data at scale: a kept line is stored as its bytes and decoded when asked for, by
the same code that checked it, so a large file stays small while the counts and the
bad-line report stay exact; splits and shards share the storage."""

from __future__ import annotations

import dataclasses
import json
import tracemalloc

from agentrl.data.prompt_pool import PromptPool
from agentrl.data.splits import shard_prompt_pool, split_prompt_pool

TOOL = {
    "type": "function",
    "function": {
        "name": "calculate_math",
        "description": "math",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
    },
}


def _lines(n: int) -> list[str]:
    out = []
    for i in range(n):
        plain = {"messages": [{"role": "user", "content": f"What is {i} + 1?"}], "gt": [str(i + 1)]}
        shapes = [
            plain,
            {**plain, "tools": [TOOL], "id": f"t{i}"},
            {
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "hi"},
                ],
                "gt": "1",
                "secret": i,
            },
            {"messages": [{"role": "user", "content": "no gt"}]},
            {"messages": [{"role": "wizard", "content": "x"}], "gt": ["1"]},
            {"messages": [{"role": "user", "content": "n"}], "gt": [{"bad": 1}]},
            {"prompt": f"Compute {i} * 2", "answer": i * 2},
        ]
        out.append(json.dumps(shapes[i % len(shapes)]))
        if i % 11 == 5:
            out.append("{not json")
    return out


def _sample_dict(sample) -> dict:
    return {k: v for k, v in dataclasses.asdict(sample).items() if k != "raw"}


def test_lazily_decoded_samples_equal_eagerly_built_ones(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(_lines(300)) + "\n")
    lazy = PromptPool(str(path))
    eager = PromptPool(str(path), keep_raw=True)  # builds every sample while loading
    assert len(lazy) == len(eager) > 0
    assert lazy.stats == eager.stats
    assert lazy.skipped == eager.skipped and lazy.summary() == eager.summary()
    for a, b in zip(lazy, eager, strict=True):
        assert _sample_dict(a) == _sample_dict(b)
    assert lazy[3].source == str(path) and lazy[3].line == eager[3].line


def test_splits_and_shards_share_the_storage(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(_lines(200)) + "\n")
    pool = PromptPool(str(path))
    train, held = split_prompt_pool(pool, 0.2, 10)
    assert len(train) + len(held) == len(pool) and len(held) == 10
    assert train._store is pool._store and held._store is pool._store
    assert {s.line for s in train}.isdisjoint({s.line for s in held})
    shard = shard_prompt_pool(train, 2, 1)
    assert [s.line for s in shard] == [s.line for s in train][1::2]
    assert train.stats["kept"] == len(train)


def test_a_large_file_costs_about_its_size_in_memory(tmp_path):
    path = tmp_path / "big.jsonl"
    line = '{"messages": [{"role": "user", "content": "What is %d + 7?"}], "gt": ["%d"]}\n'
    with open(path, "w") as fh:
        fh.writelines(line % (i, i + 7) for i in range(50_000))
    size = path.stat().st_size
    tracemalloc.start()
    pool = PromptPool(str(path))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(pool) == 50_000 and pool[49_999].gt == ["50006"]
    assert peak < 2 * size  # whole samples cost ~15x the file
