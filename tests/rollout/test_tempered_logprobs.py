"""Log-probs of the policy that sampled: at ``logprob_temperature`` 0.7 the behaviour
log-probs stored by the rollout engine and the trainer's log-probs are both those of the
logits divided by 0.7."""

from __future__ import annotations

import pytest
import torch
from agentrl.config import resolve
from agentrl.rollout.engine import TorchEngine
from agentrl.rollout.sampling import SamplingParams
from agentrl.training.forward import masked_logps

from tests.fakes.models import next_token_logps, tiny_model, tiny_tokenizer

PROMPTS = ["1+1", "Convert 12 km to miles, then add 3", "what time is it in Tokyo?"]


def test_tempered_behaviour_logps_equal_a_fresh_tempered_forward() -> None:
    model = tiny_model(seed=3)
    tok = tiny_tokenizer()
    engine = TorchEngine(model, tok, seed=7)
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in PROMPTS]
    params = SamplingParams(
        temperature=0.7, top_k=40, top_p=0.88, repetition_penalty=1.03, logprob_temperature=0.7
    )
    outs = engine.generate(prompts, params, num_samples=2, max_new_tokens=16)
    checked, apart = 0, 0.0
    for i, out in enumerate(outs):
        prompt = prompts[i // 2]
        if not out.token_ids:
            continue
        ids = torch.tensor([prompt + out.token_ids])
        start = len(prompt) - 1
        tempered = next_token_logps(model, ids, temperature=0.7)[0, start:]
        stored = torch.tensor(out.logps)
        assert torch.allclose(stored, tempered, atol=1e-4)
        # The trainer's path (output layer on masked positions only) agrees too.
        mask = torch.zeros(1, ids.size(1) - 1)
        mask[0, start:] = 1.0
        with torch.no_grad():
            trained = masked_logps(model, ids, torch.ones_like(ids), mask, temperature=0.7)
        assert torch.allclose(trained.logps[0, start:], stored, atol=1e-4)
        raw = next_token_logps(model, ids)[0, start:]
        apart = max(apart, float((raw - stored).abs().max()))
        checked += len(out.token_ids)
    assert checked > 30
    assert apart > 1e-2  # the raw policy is a different distribution: the test can fail


def test_logprob_temperature_option() -> None:
    assert resolve().logprob_temperature == "raw" and resolve().logprob_divisor == 1.0
    tempered = resolve(overrides={"logprob_temperature": "sampling", "temperature": 0.7})
    assert tempered.logprob_divisor == 0.7
    with pytest.raises(ValueError, match="needs rollout_engine='torch'"):
        resolve(overrides={"logprob_temperature": "sampling", "rollout_engine": "vllm"})
    with pytest.raises(ValueError, match="logprob_temperature must be > 0"):
        SamplingParams(logprob_temperature=0.0)


@pytest.mark.slow
def test_first_step_of_a_tempered_run_is_on_policy(run_files, tmp_path) -> None:
    """Rollout and trainer take log-probs at the same temperature: before any update the
    importance ratio is 1 (approximate KL to the behaviour policy 0)."""
    from agentrl.observability import read_metrics
    from agentrl.trainer import Trainer

    from tests.fakes.runs import short_run_config

    config = short_run_config(
        run_files,
        tmp_path,
        "tempered",
        total_steps=1,
        max_turns=1,
        max_gen_len=12,
        temperature=0.7,
        top_p=0.88,
        top_k=40,
        logprob_temperature="sampling",
        accumulation_steps=1,
        eval_before_train=0,
        eval_interval=0,
        bc_coef=0.0,
    )
    Trainer(config).run()
    records = [
        r for r in read_metrics(tmp_path / "tempered" / "metrics.jsonl") if r["kind"] == "train"
    ]
    assert abs(records[0]["policy/approx_kl_old_abs"]) < 1e-4
