"""KV reuse across turns: a row continuing its kept cache computes what a fresh prefill would.

Multi-turn batches of rows with different lengths run on a Qwen3 and a Llama model and the
tiny preset's model (`agentrl.models.tiny`), each turn appending observation ids of
different lengths: with reuse, greedy outputs equal those without it, and the behaviour
log-probs equal those of one uncached forward pass over the whole sequence (within 1e-4).
Kept caches are dropped on weight updates, on a prompt that no longer starts with their
ids, by `drop_cache`, and as soon as an episode finishes.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from agentrl.rollout.engine import TorchEngine
from agentrl.rollout.episodes import EpisodeConfig, run_episodes
from agentrl.rollout.sampling import SamplingParams
from agentrl.tools import builtin_registry

from tests.fakes.models import (
    SMALL_SPEC,
    UniformLogits,
    next_token_logps,
    tiny_llama,
    tiny_model,
    tiny_tokenizer,
)

GREEDY = SamplingParams(greedy=True)


def _tiny_preset() -> Any:
    from agentrl.models.tiny import build_model

    return build_model(SMALL_SPEC, len(tiny_tokenizer()))


MODELS = {"qwen3": lambda: tiny_model(seed=5), "llama": tiny_llama, "tiny-preset": _tiny_preset}


def _ids(seed: int, n: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(10, 400, (n,), generator=g).tolist()


def _turns(
    engine: TorchEngine,
    turns: int,
    params: SamplingParams,
    keys: list[Any] | None,
) -> tuple[list[list[int]], list[list[int]], list[list[float]]]:
    """Play ``turns`` turns of 3 rows of different lengths (each turn appends generated and
    observation ids); the final sequences, where each row's generated tokens sit, and
    their behaviour log-probs."""
    contexts = [_ids(1, 7), _ids(2, 19), _ids(3, 12)]
    where: list[list[int]] = [[] for _ in contexts]
    logps: list[list[float]] = [[] for _ in contexts]
    for turn in range(turns):
        outs = engine.generate(contexts, params, max_new_tokens=[6, 4, 9], cache_keys=keys)
        for r, out in enumerate(outs):
            start = len(contexts[r])
            where[r] += list(range(start, start + len(out.token_ids)))
            logps[r] += out.logps
            observation = _ids(10 * turn + r, 3 + 4 * r)
            contexts[r] = contexts[r] + out.token_ids + observation
    return contexts, where, logps


@pytest.mark.parametrize("family", list(MODELS))
@pytest.mark.parametrize("turns", [2, 3])
def test_reuse_gives_the_fresh_forward_log_probs_and_the_same_greedy_tokens(
    family: str, turns: int
) -> None:
    model = MODELS[family]()
    tok = tiny_tokenizer()
    fresh = TorchEngine(model, tok, kv_reuse=False)
    reference, _, _ = _turns(fresh, turns, GREEDY, None)
    # Row 1 stops on its third token of the first turn (the end-token path), the others on
    # their budget (the last sampled token is not in the cache).
    stop = reference[1][19 + 2]
    params = SamplingParams(greedy=True, stop_token_ids=[stop])
    fresh = TorchEngine(model, tok, kv_reuse=False)
    expected, _, _ = _turns(fresh, turns, params, None)
    engine = TorchEngine(model, tok)
    got, where, logps = _turns(engine, turns, params, ["a", "b", "c"])
    assert got == expected
    assert len(where[1]) < len(where[0])  # the stop token ended a turn early
    reused = engine.stats["prefill_tokens_reused"]
    assert reused > 0
    assert engine.stats["prefill_tokens"] + reused == fresh.stats["prefill_tokens"]
    assert engine.stats["kv_reuse_misses"] == 0
    for row, ids in enumerate(got):
        ref = next_token_logps(model, torch.tensor([ids]))[0]
        positions = torch.tensor(where[row]) - 1
        assert torch.allclose(torch.tensor(logps[row]), ref[positions], atol=1e-4, rtol=0)


def test_kept_caches_are_dropped_when_they_cannot_be_used() -> None:
    model = tiny_model(seed=2)
    engine = TorchEngine(model, tiny_tokenizer())
    prompts = [_ids(4, 9), _ids(5, 14)]
    outs = engine.generate(prompts, GREEDY, max_new_tokens=3, cache_keys=["x", "y"])
    assert engine.kept_caches == 2
    grown = [p + o.token_ids + [42] for p, o in zip(prompts, outs, strict=True)]
    # A truncated context no longer starts with the kept ids: prefilled in full, counted.
    truncated = [grown[0], grown[1][5:]]
    engine.generate(truncated, GREEDY, max_new_tokens=3, cache_keys=["x", "y"])
    assert engine.stats["kv_reuse_misses"] == 1
    # Row x: its prompt and the 2 generated tokens fed (the 3rd was sampled, never fed).
    assert engine.stats["prefill_tokens_reused"] == len(prompts[0]) + 2
    # New weights: every kept cache goes.
    assert engine.kept_caches == 2
    assert engine.update_weights(model.state_dict())
    assert engine.kept_caches == 0
    engine.generate(grown, GREEDY, max_new_tokens=2, cache_keys=["x", "y"])
    engine.drop_cache(["x"])
    assert engine.kept_caches == 1
    # A kept cache computed by other weights is not used even if still there.
    engine.kv_store.get("y").version = -7
    before = engine.stats["prefill_tokens_reused"]
    engine.generate([grown[1] + [7, 8]], GREEDY, max_new_tokens=1, cache_keys=["y"])
    assert engine.stats["prefill_tokens_reused"] == before
    assert engine.stats["kv_reuse_misses"] == 2


def test_cache_keys_are_one_per_row_and_only_for_engines_that_keep_caches() -> None:
    engine = TorchEngine(tiny_model(seed=2), tiny_tokenizer())
    with pytest.raises(ValueError, match="2 cache keys for 4 output rows"):
        engine.generate([[5, 6], [7, 8]], GREEDY, num_samples=2, cache_keys=["a", "b"])
    off = TorchEngine(tiny_model(seed=2), tiny_tokenizer(), kv_reuse=False)
    off.generate([[5, 6, 7]], GREEDY, max_new_tokens=2, cache_keys=["a"])
    assert off.kept_caches == 0
    # Kept caches continue at explicit positions: a model without position ids cannot.
    with pytest.raises(ValueError, match="--rollout_kv_reuse 0"):
        TorchEngine(UniformLogits(), tiny_tokenizer())
    assert not TorchEngine(UniformLogits(), tiny_tokenizer(), kv_reuse=False).kv_reuse


@pytest.mark.slow
def test_episodes_with_reuse_match_episodes_without_it() -> None:
    model = tiny_model(seed=9)
    tok = tiny_tokenizer()
    always_call = lambda _text, _tools: [  # noqa: E731
        {"name": "calculate_math", "arguments": {"expression": "1+1"}, "canonical": True}
    ]
    sample = {"messages": [{"role": "user", "content": "1+1"}], "tools": None, "gt": ["2"]}
    other = {"messages": [{"role": "user", "content": "先算2+3，再算4*5"}], "tools": None}
    config = EpisodeConfig(max_turns=3, max_new_tokens=10, sampling=GREEDY)
    results = {}
    for reuse in (False, True):
        engine = TorchEngine(model, tok, kv_reuse=reuse)
        samples = [sample, {**other, "gt": ["5"]}]
        groups = run_episodes(
            engine,
            samples,
            builtin_registry(),
            num_generations=2,
            config=config,
            call_parser=always_call,
        )
        results[reuse] = [t for g in groups for t in g.trajectories]
        if reuse:
            assert engine.stats["prefill_tokens_reused"] > 0
            assert engine.kept_caches == 0  # finished episodes drop theirs
    for plain, reused in zip(results[False], results[True], strict=True):
        assert reused.response_ids == plain.response_ids
        assert torch.allclose(
            torch.tensor(reused.response_logps), torch.tensor(plain.response_logps), atol=1e-4
        )


@pytest.mark.parametrize("family", list(MODELS))
def test_a_new_short_row_joins_rows_that_continue_their_caches(family: str) -> None:
    # The new row's padding sees no kept positions at all: it must not disturb anything.
    model = MODELS[family]()
    tok = tiny_tokenizer()
    engine = TorchEngine(model, tok)
    prompts = [_ids(6, 11), _ids(7, 5)]
    outs = engine.generate(prompts, GREEDY, max_new_tokens=4, cache_keys=["a", "b"])
    grown = [
        p + o.token_ids + _ids(8 + n, 9) for n, (p, o) in enumerate(zip(prompts, outs, strict=True))
    ]
    batch = [*grown, _ids(9, 3)]
    got = engine.generate(batch, GREEDY, max_new_tokens=5, cache_keys=["a", "b", "c"])
    assert engine.stats["prefill_tokens_reused"] > 0
    plain = TorchEngine(model, tok, kv_reuse=False)
    want = plain.generate(batch, GREEDY, max_new_tokens=5)
    assert [g.token_ids for g in got] == [w.token_ids for w in want]
    for ids, out in zip(batch, got, strict=True):
        full = torch.tensor([ids + out.token_ids])
        ref = next_token_logps(model, full)[0, len(ids) - 1 :]
        assert torch.allclose(torch.tensor(out.logps), ref, atol=1e-4, rtol=0)


class _CountingEngine(TorchEngine):
    """Records how many caches are kept when each generate call starts."""

    kept_at_calls: list[int]

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        self.kept_at_calls = [*getattr(self, "kept_at_calls", []), self.kept_caches]
        return super().generate(*args, **kwargs)


def test_a_finished_episode_drops_its_cache_at_once() -> None:
    engine = _CountingEngine(tiny_model(seed=3), tiny_tokenizer())
    parsed = []

    def first_stops(_text: str, _tools: Any) -> list[dict[str, Any]]:
        parsed.append(1)  # the first episode's first turn has no call: it ends there
        if len(parsed) == 1:
            return []
        return [{"name": "calculate_math", "arguments": {"expression": "1+1"}, "canonical": True}]

    sample = {"messages": [{"role": "user", "content": "1+1"}], "tools": None, "gt": ["2"]}
    config = EpisodeConfig(max_turns=3, max_new_tokens=4, sampling=GREEDY)
    run_episodes(
        engine,
        [sample],
        builtin_registry(),
        num_generations=4,
        config=config,
        call_parser=first_stops,
    )
    assert engine.kept_at_calls == [0, 3, 3]
    assert engine.kept_caches == 0
