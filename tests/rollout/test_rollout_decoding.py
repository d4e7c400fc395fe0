"""The decode loop's state on its own: a row ends on an end token, a stop string or its
budget, with the ids its cache covers; compaction drops finished rows and keeps the rest
aligned; the engine's pieces stay small enough to read."""

from __future__ import annotations

from pathlib import Path

import torch
from agentrl.rollout.batch_engine import FINISH_EOS, FINISH_LENGTH, FINISH_STOP
from agentrl.rollout.decoding import DecodeState, RowOutput
from agentrl.rollout.sampling import SampleResult

ROLLOUT = Path(__file__).resolve().parents[2] / "python" / "agentrl" / "rollout"
# TorchEngine and the modules it is split into.
ENGINE_MODULES = (
    "engine",
    "batch_engine",
    "prefill",
    "decoding",
    "compiled_decoding",
    "kv_store",
    "kv_cache",
    "shared_prefix",
    "sampling",
)


class _Stops:
    """A stop matcher that ends a row whose last token is 99."""

    def hit(self, generated: list[int]) -> bool:
        return generated[-1] == 99


def _step(tokens: list[int]) -> SampleResult:
    n = len(tokens)
    logps = torch.full((n,), -0.5)
    flags = torch.zeros(n, dtype=torch.bool)
    return SampleResult(torch.tensor(tokens), logps, logps - 0.25, flags, flags)


def _state(budgets: list[int], keys: list[str | None]) -> DecodeState:
    rows = [[1, 2], [3], [4, 5, 6], [7]]
    outputs = [RowOutput(prompt_tokens=len(r)) for r in rows]
    attn = torch.tensor([[0, 1, 1], [0, 0, 1], [1, 1, 1], [0, 0, 1]])
    logits = torch.zeros(4, 8)
    cache = (
        (torch.arange(4.0).view(4, 1, 1, 1).expand(4, 1, 3, 2).clone(), torch.zeros(4, 1, 3, 2)),
    )
    return DecodeState(rows, budgets, outputs, [0, 1, 2, 3], keys, logits, cache, attn, None)


def test_a_row_ends_on_an_end_token_a_stop_string_or_its_budget() -> None:
    state = _state([5, 5, 1, 5], ["a", None, "c", "d"])
    stats = {"generated_tokens": 0}
    ended = state.record(_step([0, 99, 11, 12]), {0}, _Stops(), stats)
    # Row 0 sampled its end token: not part of the output, every generated token was fed.
    # Row 1 completed a stop string; row 2 used its one-token budget: the last token was
    # sampled, not fed, so the cache ends before it.
    assert [(f.row, f.key, f.covered) for f in ended] == [
        (0, "a", [1, 2]),
        (1, None, [3]),
        (2, "c", [4, 5, 6]),
    ]
    out = state.outputs
    assert (out[0].token_ids, out[0].finish_reason, out[0].end_token_id) == ([], FINISH_EOS, 0)
    assert out[0].end_logp == -0.5
    assert (out[1].token_ids, out[1].finish_reason) == ([99], FINISH_STOP)
    assert (out[2].token_ids, out[2].finish_reason) == ([11], FINISH_LENGTH)
    assert out[2].sample_logps == [-0.75]
    assert stats["generated_tokens"] == 3 and not state.finished


def test_compaction_drops_finished_rows_and_keeps_the_rest_aligned() -> None:
    state = _state([5, 1, 5, 5], [None, None, None, "d"])
    state.record(_step([10, 11, 12, 13]), {0}, None, {"generated_tokens": 0})
    token_col, compacted = state.feed(torch.tensor([10, 11, 12, 13]), 0.5)
    assert not compacted and token_col.shape == (4, 1) and state.attn.shape == (4, 4)
    state.record(_step([0, 0, 14, 15]), {0}, None, {"generated_tokens": 0})
    token_col, compacted = state.feed(torch.tensor([0, 0, 14, 15]), 0.5)
    assert compacted
    assert state.slots == [2, 3] and state.keys == [None, "d"] and state.size == 2
    assert token_col.flatten().tolist() == [14, 15]
    assert state.next_pos.tolist() == [3, 1]
    assert state.attn.tolist() == [[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]]
    assert state.cache[0][0][:, 0, 0, 0].tolist() == [2.0, 3.0]
    ended = state.record(_step([0, 0]), {0}, None, {"generated_tokens": 0})
    assert [f.row for f in ended] == [0, 1] and state.finished
    assert state.outputs[3].token_ids == [13, 15]


def test_no_module_of_the_engine_is_over_500_lines() -> None:
    sizes = {
        name: len((ROLLOUT / f"{name}.py").read_text(encoding="utf-8").splitlines())
        for name in ENGINE_MODULES
    }
    assert {name: n for name, n in sizes.items() if n > 500} == {}
