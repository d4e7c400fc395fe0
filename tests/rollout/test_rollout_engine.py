"""TorchEngine: batched generation equals one-at-a-time, log-probs equal a fresh forward."""

from __future__ import annotations

import pytest
import torch
from agentrl.rollout.engine import TorchEngine
from agentrl.rollout.sampling import SamplingParams

from tests.fakes.models import next_token_logps, tiny_model, tiny_tokenizer

TEXTS = [
    "先算log(27,3) % 48，再算(7-142) * (46.5*5)",
    "1+1",
    "Convert 12 km to miles, then add 3",
    "<tool_call>",
    "what time is it in Tokyo? answer in one word please, thanks a lot",
]


def _prompts() -> list[list[int]]:
    tok = tiny_tokenizer()
    return [tok(t, add_special_tokens=False)["input_ids"] for t in TEXTS]


@pytest.mark.slow
def test_greedy_batched_equals_one_at_a_time_with_mixed_lengths_and_budgets() -> None:
    model = tiny_model(seed=1)
    engine = TorchEngine(model, tiny_tokenizer(), compact_fraction=0.0)
    prompts = _prompts()
    assert len({len(p) for p in prompts}) == len(prompts)
    budgets = [24, 3, 17, 9, 30]
    params = SamplingParams(greedy=True, repetition_penalty=1.2)
    batched = engine.generate(prompts, params, max_new_tokens=budgets)
    for prompt, budget, out in zip(prompts, budgets, batched, strict=True):
        alone = engine.generate([prompt], params, max_new_tokens=budget)[0]
        assert out.token_ids == alone.token_ids
        assert out.finish_reason == alone.finish_reason
        assert out.logps == alone.logps or torch.allclose(
            torch.tensor(out.logps), torch.tensor(alone.logps), atol=1e-5
        )
        assert len(out.token_ids) <= budget
    assert engine.stats["compactions"] > 0  # rows with small budgets left the batch early


def test_behaviour_logps_equal_a_separate_forward_pass() -> None:
    model = tiny_model(seed=2)
    engine = TorchEngine(model, tiny_tokenizer(), seed=5)
    prompts = _prompts()
    params = SamplingParams(temperature=0.7, top_k=40, top_p=0.9, repetition_penalty=1.1)
    outs = engine.generate(prompts, params, num_samples=3, max_new_tokens=20)
    assert len(outs) == 15
    checked = 0
    for i, out in enumerate(outs):
        prompt = prompts[i // 3]
        if not out.token_ids:
            continue
        ids = torch.tensor([prompt + out.token_ids])
        ref = next_token_logps(model, ids)[0, len(prompt) - 1 :]
        assert torch.allclose(torch.tensor(out.logps), ref, atol=1e-4)
        assert all(lp <= 0.0 for lp in out.logps)
        checked += len(out.token_ids)
    assert checked > 50


def test_group_prompt_is_prefilled_once() -> None:
    engine = TorchEngine(tiny_model(), tiny_tokenizer())
    prompts = _prompts()[:2]
    engine.generate(prompts, SamplingParams(max_new_tokens=4), num_samples=8)
    total = sum(len(p) for p in prompts)
    assert engine.stats["prefill_tokens"] == total
    assert engine.stats["prefill_tokens_shared"] == 7 * total
    assert engine.stats["sequences"] == 16


def test_samples_of_a_group_differ_and_seeded_calls_repeat() -> None:
    engine = TorchEngine(tiny_model(seed=3), tiny_tokenizer())
    prompt = _prompts()[:1]
    params = SamplingParams(temperature=1.0, max_new_tokens=12)
    first = engine.generate(prompt, params, num_samples=4, seed=11)
    again = engine.generate(prompt, params, num_samples=4, seed=11)
    assert [o.token_ids for o in first] == [o.token_ids for o in again]
    assert len({tuple(o.token_ids) for o in first}) > 1


@pytest.mark.slow
def test_stop_string_ends_a_row_once_its_text_contains_it() -> None:
    tok = tiny_tokenizer()
    engine = TorchEngine(tiny_model(seed=4), tok)
    prompt = _prompts()[2]
    free = engine.generate([prompt], SamplingParams(greedy=True, max_new_tokens=40))[0]
    # A stop string taken from the free run's own text, at its fifth token or later.
    stop = next(
        text
        for k in range(4, len(free.token_ids))
        if (text := tok.decode(free.token_ids[k : k + 1])).isascii() and text.strip()
    )
    params = SamplingParams(greedy=True, max_new_tokens=40, stop=(stop,))
    out = engine.generate([prompt], params)[0]
    assert out.finish_reason == "stop"
    assert out.token_ids == free.token_ids[: len(out.token_ids)]
    assert stop in tok.decode(out.token_ids)
    assert stop not in tok.decode(out.token_ids[:-1])


def test_eos_ends_a_row_and_is_not_part_of_the_tokens() -> None:
    tok = tiny_tokenizer()
    model = tiny_model(seed=5)
    model.lm_head.bias = None
    eos = tok.eos_token_id
    # Make EOS the arg-max after three generated tokens by biasing the last position.
    calls = {"n": 0}

    def force_eos(_module: torch.nn.Module, _inp: object, out: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        if calls["n"] == 4:
            out = out.clone()
            out[:, -1, eos] = 1e4
        return out

    handle = model.lm_head.register_forward_hook(force_eos)
    try:
        engine = TorchEngine(model, tok)
        out = engine.generate(_prompts()[:1], SamplingParams(greedy=True, max_new_tokens=10))[0]
    finally:
        handle.remove()
    assert out.finish_reason == "eos"
    assert out.end_token_id == eos and eos not in out.token_ids
    assert len(out.token_ids) == 3
    assert out.end_logp is not None and -1e-3 < out.end_logp <= 0.0


def test_non_finite_logits_are_sanitised_and_counted() -> None:
    model = tiny_model(seed=6)

    def poison(_module: torch.nn.Module, _inp: object, out: torch.Tensor) -> torch.Tensor:
        out = out.clone()
        out[..., 7] = float("nan")
        out[..., 9] = float("-inf")
        return out

    handle = model.lm_head.register_forward_hook(poison)
    try:
        engine = TorchEngine(model, tiny_tokenizer())
        outs = engine.generate(_prompts()[:2], SamplingParams(max_new_tokens=6), num_samples=2)
    finally:
        handle.remove()
    assert engine.stats["nonfinite_rows"] >= 4
    assert engine.stats["nonfinite_steps"] >= 1
    for out in outs:
        assert all(lp <= 0.0 and lp == lp for lp in out.logps)


def test_zero_budget_rows_generate_nothing() -> None:
    engine = TorchEngine(tiny_model(), tiny_tokenizer())
    outs = engine.generate(_prompts()[:2], SamplingParams(max_new_tokens=5), max_new_tokens=[0, 2])
    assert outs[0].token_ids == [] and outs[0].finish_reason == "length"
    assert len(outs[1].token_ids) <= 2


def test_update_weights_loads_new_policy_and_refuses_non_finite() -> None:
    tok = tiny_tokenizer()
    target = tiny_model(seed=8)
    engine = TorchEngine(tiny_model(seed=7), tok)
    reference = TorchEngine(target, tok)
    params = SamplingParams(greedy=True, max_new_tokens=12)
    prompts = _prompts()[:3]
    assert engine.update_weights(target.state_dict())
    assert engine.version == 1
    expected = [o.token_ids for o in reference.generate(prompts, params)]
    assert [o.token_ids for o in engine.generate(prompts, params)] == expected
    broken = {k: v.clone() for k, v in target.state_dict().items()}
    first = next(k for k, v in broken.items() if v.is_floating_point())
    broken[first][0] = float("nan")
    assert not engine.update_weights(broken, version=9)
    assert engine.version == 1 and engine.stats["weight_updates_skipped"] == 1
    assert [o.token_ids for o in engine.generate(prompts, params)] == expected


def test_generate_leaves_training_mode_unchanged() -> None:
    model = tiny_model()
    model.train()
    TorchEngine(model, tiny_tokenizer()).generate(_prompts()[:1], SamplingParams(max_new_tokens=2))
    assert model.training


@pytest.mark.slow
def test_a_prefix_shared_by_all_prompts_is_prefilled_once_without_changing_outputs() -> None:
    tok = tiny_tokenizer()
    model = tiny_model(seed=10)
    prefix = tok("You are a careful calculator. Use the tool for every expression. " * 2)[
        "input_ids"
    ]
    prompts = [prefix + p for p in _prompts()]
    engine = TorchEngine(model, tok, seed=3)
    greedy = SamplingParams(greedy=True, max_new_tokens=16)
    batched = engine.generate(prompts, greedy)
    assert engine.stats["prefill_tokens"] == len(prefix) + sum(len(p) for p in _prompts())
    for prompt, out in zip(prompts, batched, strict=True):
        assert out.token_ids == engine.generate([prompt], greedy)[0].token_ids
    sampled = engine.generate(prompts, SamplingParams(max_new_tokens=16), num_samples=2)
    for i, out in enumerate(sampled):
        prompt = prompts[i // 2]
        ref = next_token_logps(model, torch.tensor([prompt + out.token_ids]))[0, len(prompt) - 1 :]
        assert torch.allclose(torch.tensor(out.logps), ref, atol=1e-4)


def test_row_cap_splits_the_batch_without_changing_outputs() -> None:
    tok = tiny_tokenizer()
    model = tiny_model(seed=11)
    greedy = SamplingParams(greedy=True, max_new_tokens=10)
    whole = TorchEngine(model, tok).generate(_prompts(), greedy, num_samples=2)
    capped = TorchEngine(model, tok, max_batch_rows=3)
    assert [o.token_ids for o in capped.generate(_prompts(), greedy, num_samples=2)] == [
        o.token_ids for o in whole
    ]
    assert capped.stats["forward_calls"] > 10


def test_token_cap_chunks_by_cache_size_without_changing_outputs() -> None:
    tok = tiny_tokenizer()
    model = tiny_model(seed=11)
    prompts = _prompts()
    greedy = SamplingParams(greedy=True, max_new_tokens=10)
    whole = TorchEngine(model, tok).generate(prompts, greedy, num_samples=2)
    widest = max(len(p) for p in prompts) + 10
    capped = TorchEngine(model, tok, max_batch_rows=64, max_batch_tokens=2 * widest)
    assert [o.token_ids for o in capped.generate(prompts, greedy, num_samples=2)] == [
        o.token_ids for o in whole
    ]
    rows = [p for p in prompts for _ in range(2)]
    chunks = capped._chunks(rows, [10] * len(rows))
    assert sorted(i for c in chunks for i in c) == list(range(len(rows)))
    for chunk in chunks:  # each chunk's cache within the cap
        width = max(len(rows[i]) for i in chunk) + 10
        assert len(chunk) * width <= 2 * widest
    # Short rows go many a pass (up to the row cap), a long one alone, one past the cap too.
    engine = TorchEngine(model, tok, max_batch_rows=4, max_batch_tokens=100)
    short, long = [[1] * 10] * 6, [[2] * 60, [3] * 200]
    assert [len(c) for c in engine._chunks(short + long, [10] * 8)] == [4, 2, 1, 1]
    # The cache is the longest prompt padded, decoded for the largest budget: a short
    # prompt's long budget and a long prompt's short one do not share a pass of 2 x 70.
    padded = TorchEngine(model, tok, max_batch_tokens=150)
    assert padded._chunks([[1] * 10, [2] * 60], [60, 10]) == [[0], [1]]
    # Rows without a budget take no room; a single pass keeps the rows' own order.
    assert engine._chunks([[2] * 40, [1] * 10, [3] * 5], [5, 5, 0]) == [[0, 1, 2]]
    assert engine._chunks([[2] * 60, [1] * 10, [3] * 5], [10, 10, 0]) == [[1], [0, 2]]
