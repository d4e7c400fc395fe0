"""Compiled decoding over a fixed-size KV cache (``TorchEngine(compile_decode=True)``,
``agentrl train --rollout_compile 1``): the same tokens and log-probs as eager decoding,
through compaction, cache growth, kept caches and a prompt prefix held once for all rows,
and a clear word when it cannot run.

Each model family (one decoder layer) compiles once; one engine per family goes through
every case, and the other tests reuse the compiled code of the same model.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from agentrl.cli import main as cli_main
from agentrl.config import resolve
from agentrl.errors import UsageError
from agentrl.observability import read_metrics
from agentrl.rollout import kv_cache
from agentrl.rollout.engine import TorchEngine
from agentrl.rollout.sampling import SamplingParams

from tests.fakes.models import tiny_llama, tiny_model, tiny_tokenizer

GREEDY = SamplingParams(greedy=True)


# One decoder layer: a second one added about 20 s of compiling per family (CPU, cold
# inductor cache), and what is compared (eager against compiled decoding of the same model)
# does not depend on the depth. The tests of a family share one model, so its compiled code
# is reused.
def _qwen3() -> torch.nn.Module:
    return tiny_model(seed=5, layers=1)


MODELS = {"qwen3": _qwen3, "llama": lambda: tiny_llama(seed=3, layers=1)}


def _ids(seed: int, n: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(10, 400, (n,), generator=g).tolist()


def _episodes(
    engine: TorchEngine, params: SamplingParams, opening: list[int]
) -> tuple[list[list[int]], list[float]]:
    """Three rows with different budgets (so finished rows are dropped) over three turns,
    each continuing its kept cache, all starting with ``opening``: the final contexts and
    every behaviour log-prob."""
    contexts = [opening + _ids(1, 7), opening + _ids(2, 19), opening + _ids(3, 12)]
    logps: list[float] = []
    for turn in range(3):
        outs = engine.generate(
            contexts, params, max_new_tokens=[6, 4, 9], cache_keys=["a", "b", "c"]
        )
        for r, out in enumerate(outs):
            logps += out.logps
            contexts[r] = contexts[r] + out.token_ids + _ids(10 * turn + r, 3 + 4 * r)
    return contexts, logps


@pytest.mark.parametrize("family", list(MODELS))
def test_compiled_decoding_gives_the_eager_tokens_and_log_probs(family: str) -> None:
    model = MODELS[family]()
    tok = tiny_tokenizer()
    # No end ids: rows end on their budgets (and the stop id below), so lengths are known.
    eager = TorchEngine(model, tok, eos_token_ids=())
    compiled = TorchEngine(model, tok, eos_token_ids=(), compile_decode=True)

    reference, _ = _episodes(eager, GREEDY, [])
    stop = reference[1][19 + 2]  # row 1 ends on its third token in the first turn
    params = SamplingParams(greedy=True, stop_token_ids=[stop])
    # Without and with an opening all rows share (held once: the kept caches of the first
    # turn are rebuilt from it).
    for opening in ([], _ids(99, 24)):
        for engine in (eager, compiled):  # an earlier run's caches would be reused
            engine.drop_cache(["a", "b", "c"])
        eager.reset_stats()
        compiled.reset_stats()
        expected, expected_logps = _episodes(eager, params, opening)
        got, logps = _episodes(compiled, params, opening)
        assert got == expected
        assert torch.allclose(torch.tensor(logps), torch.tensor(expected_logps), atol=1e-4, rtol=0)
        stats = compiled.stats
        assert stats["compiled_decode_steps"] > 0 and stats["compiled_decode_unsupported"] == 0
        assert stats["compactions"] > 0  # finished rows were dropped from the fixed-size cache
        assert stats["prefill_tokens_reused"] == eager.stats["prefill_tokens_reused"] > 0
        assert stats["kv_reuse_misses"] == 0
        assert stats["shared_prefix_decodes"] == (1 if opening else 0)  # the first turn

    # Past the first room the cache is copied into a larger one, more than once: rows of two
    # prompts, and copies of one prompt (held once).
    budget = 2 * kv_cache.FIXED_ROOM + 5
    for prompts in ([_ids(7, 30), _ids(8, 11)], [_ids(9, 40)]):
        want = eager.generate(prompts, GREEDY, max_new_tokens=budget, num_samples=2)
        outs = compiled.generate(prompts, GREEDY, max_new_tokens=budget, num_samples=2)
        for a, b in zip(want, outs, strict=True):
            assert len(b.token_ids) == budget
            assert b.token_ids == a.token_ids
            assert max(abs(x - y) for x, y in zip(a.logps, b.logps, strict=True)) < 1e-4
    assert compiled.stats["shared_prefix_decodes"] == 2

    # Sampling draws the same random stream: same seed, same tokens.
    sampled = SamplingParams(temperature=1.0, max_new_tokens=20)
    eager.reseed(11)
    compiled.reseed(11)
    want = eager.generate(prompts, sampled, num_samples=3)
    outs = compiled.generate(prompts, sampled, num_samples=3)
    assert [o.token_ids for o in outs] == [o.token_ids for o in want]


def test_a_model_off_the_shared_prefix_path_decodes_over_full_rows(monkeypatch, caplog):
    from agentrl.rollout import shared_prefix

    model = _qwen3()
    tok = tiny_tokenizer()
    eager = TorchEngine(model, tok, eos_token_ids=())
    engine = TorchEngine(model, tok, eos_token_ids=(), compile_decode=True)

    def ignores_the_prefix(module, query, key, value, mask, **kwargs):
        kwargs.pop("shared_prefix_kv", None)
        return shared_prefix.shared_prefix_attention(module, query, key, value, mask, **kwargs)

    from transformers import AttentionInterface

    monkeypatch.setitem(AttentionInterface._global_mapping, shared_prefix.NAME, ignores_the_prefix)
    prompts = [_ids(4, 40)]
    with caplog.at_level(logging.WARNING, logger="agentrl.rollout.engine"):
        outs = engine.generate(prompts, GREEDY, max_new_tokens=5, num_samples=3)
    want = eager.generate(prompts, GREEDY, max_new_tokens=5, num_samples=3)
    assert [o.token_ids for o in outs] == [o.token_ids for o in want]
    assert engine.stats["shared_prefix_decodes"] == 0
    assert engine.stats["compiled_decode_steps"] > 0
    assert any("shared-prefix attention path" in r.getMessage() for r in caplog.records)


def test_a_check_that_cannot_tell_is_made_again_at_the_next_call(caplog) -> None:
    model = _qwen3()
    tok = tiny_tokenizer()
    eager = TorchEngine(model, tok, eos_token_ids=())
    engine = TorchEngine(model, tok, eos_token_ids=(), compile_decode=True)
    forward = engine.decoding.forward
    poisoned = [1]

    def nan_once_through_the_prefix(*args, **kwargs):
        logits, cache = forward(*args, **kwargs)
        if kwargs.get("extra") and poisoned:
            poisoned.pop()
            logits = torch.full_like(logits, float("nan"))
        return logits, cache

    engine.decoding.forward = nan_once_through_the_prefix
    prompts = [_ids(4, 40)]
    with caplog.at_level(logging.WARNING, logger="agentrl.rollout.engine"):
        first = engine.generate(prompts, GREEDY, max_new_tokens=5, num_samples=3)
        assert engine.stats["shared_prefix_decodes"] == 0
        second = engine.generate(prompts, GREEDY, max_new_tokens=5, num_samples=3)
    want = eager.generate(prompts, GREEDY, max_new_tokens=5, num_samples=3)
    assert [o.token_ids for o in first] == [o.token_ids for o in want]
    assert [o.token_ids for o in second] == [o.token_ids for o in want]
    assert engine.stats["shared_prefix_decodes"] == 1
    messages = [r.getMessage() for r in caplog.records]
    assert any("checking again at the next call" in m for m in messages)
    assert not any("does not take the shared-prefix attention path" in m for m in messages)


def test_a_cache_without_a_fixed_size_form_decodes_eagerly_and_says_so(monkeypatch, caplog):
    model = _qwen3()
    tok = tiny_tokenizer()
    eager = TorchEngine(model, tok, eos_token_ids=())
    engine = TorchEngine(model, tok, eos_token_ids=(), compile_decode=True)
    monkeypatch.setattr(kv_cache, "as_fixed", lambda *args, **kwargs: None)
    prompts = [_ids(1, 9), _ids(2, 14)]
    with caplog.at_level(logging.WARNING, logger="agentrl.rollout.engine"):
        outs = engine.generate(prompts, GREEDY, max_new_tokens=6)
        engine.generate(prompts, GREEDY, max_new_tokens=6)
    want = eager.generate(prompts, GREEDY, max_new_tokens=6)
    assert [o.token_ids for o in outs] == [o.token_ids for o in want]
    assert engine.stats["compiled_decode_unsupported"] == 2
    assert engine.stats["compiled_decode_steps"] == 0
    warned = [r for r in caplog.records if "compile_decode" in r.getMessage()]
    assert len(warned) == 1 and "decode eagerly" in warned[0].getMessage()


def test_compiled_decoding_needs_a_compiler_and_the_torch_engine(monkeypatch) -> None:
    from agentrl.models import compile as compile_module

    monkeypatch.setattr(compile_module, "missing_compiler", lambda device: "no C++ compiler")
    with pytest.raises(UsageError, match=r"no C\+\+ compiler.*--rollout_compile 0"):
        TorchEngine(_qwen3(), tiny_tokenizer(), compile_decode=True)
    with pytest.raises(UsageError, match="rollout_compile=true needs rollout_engine='torch'"):
        resolve("tiny", overrides={"rollout_compile": 1, "rollout_engine": "sglang"})


def test_a_compiler_failure_stops_with_the_option_that_decodes_eagerly(monkeypatch) -> None:
    from agentrl.errors import RecurringError
    from agentrl.rollout.engine import CompileFailed
    from torch._inductor.exc import InductorError

    def broken_compile(model, **kwargs):
        def run(*args, **kw):
            raise InductorError(RuntimeError("C++ compile error\n(long build log)"), None)

        return run

    engine = TorchEngine(_qwen3(), tiny_tokenizer(), eos_token_ids=(), compile_decode=True)
    monkeypatch.setattr(torch, "compile", broken_compile)
    with pytest.raises(
        CompileFailed,
        match=r"C\+\+ compile error\); decode eagerly with "
        r"agentrl train --rollout_compile 0",
    ) as caught:
        engine.generate([_ids(1, 9)], GREEDY, max_new_tokens=4)
    assert isinstance(caught.value, RecurringError) and "long build log" not in str(caught.value)
    assert isinstance(caught.value.__cause__, InductorError)
    assert engine.stats["compiled_decode_steps"] == 0

    # An error of the model itself is not called a compiler failure.
    monkeypatch.setattr(torch, "compile", lambda model, **kw: lambda *a, **k: 1 / 0)
    engine = TorchEngine(_qwen3(), tiny_tokenizer(), eos_token_ids=(), compile_decode=True)
    with pytest.raises(ZeroDivisionError):
        engine.generate([_ids(1, 9)], GREEDY, max_new_tokens=4)


def test_train_with_rollout_compile_decodes_compiled(run_files: Path, tmp_path: Path, capsys):
    code = cli_main(
        [
            "train",
            "--model",
            str(run_files / "model"),
            "--data",
            str(run_files / "prompts.jsonl"),
            "--filter_mode",
            "all",
            "--save_dir",
            str(tmp_path),
            "--save_weight",
            "compiled",
            "--total_steps",
            "2",
            "--batch_size",
            "1",
            "--num_generations",
            "2",
            "--max_turns",
            "2",
            "--max_gen_len",
            "8",
            "--eval_ratio",
            "0",
            "--progress",
            "0",
            "--accumulation_steps",
            "1",
            "--rollout_compile",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    train = [
        r for r in read_metrics(tmp_path / "compiled" / "metrics.jsonl") if r["kind"] == "train"
    ]
    assert len(train) == 2
    assert train[-1]["rollout/compiled_decode_steps"] > 0
    assert train[-1]["rollout/compiled_decode_unsupported"] == 0
