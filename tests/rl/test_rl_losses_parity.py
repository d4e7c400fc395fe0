"""The composed policy loss reproduces, bit for bit, the values it had as one function.

The values in data/policy_loss_recorded.json were recorded from the single-function
implementation before it was split into registered objectives, corrections and
reductions, on seeded random batches with stale tokens, unequal lengths and staleness
weights. Loss, denominator and gradient must
match exactly (same operations in the same order); metrics, now computed without host
reads, within float32 rounding.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from agentrl.rl.losses import LossConfig, policy_loss

CASES = {
    "default": {},
    "token_reduction_m2": {"loss_reduction": "token", "m2_threshold": 0.05},
    "gspo_dapo_k2": {
        "importance_sampling_level": "sequence",
        "loss_reduction": "dapo",
        "kl_estimator": "k2",
        "epsilon_high": 0.28,
    },
    "plain_ppo_grpo": {"use_decoupled_ppo": False, "loss_reduction": "grpo", "kl_estimator": "k1"},
}


def batch(seed):
    g = torch.Generator().manual_seed(seed)
    B, L = 3, 5
    mask = torch.zeros(B, L)
    for i, n in enumerate([5, 2, 4]):
        mask[i, :n] = 1.0
    logps = -torch.rand(B, L, generator=g) * 3
    behavior = logps + 0.4 * torch.randn(B, L, generator=g)
    ref = logps + 0.3 * torch.randn(B, L, generator=g)
    adv = torch.randn(B, generator=g)
    versions = torch.randint(0, 4, (B, L), generator=g)
    versions[1, 0] = -1
    weights = torch.tensor([1.0, 0.65, 0.4225])
    entropy = torch.rand(B, L, generator=g) * 5
    return logps, behavior, ref, adv, mask, versions, weights, entropy


# case/seed -> loss, denominator, d loss / d logps (flattened), selected metrics
RECORDED = json.loads(
    (Path(__file__).parents[1] / "data" / "policy_loss_recorded.json").read_text()
)


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_policy_loss_matches_the_recorded_values(key: str) -> None:
    name, seed = key.split("/")
    logps, behavior, ref, adv, mask, versions, weights, entropy = batch(int(seed))
    logps = logps.clone().requires_grad_()
    config = LossConfig(max_completion_length=6, **CASES[name])
    res = policy_loss(
        logps,
        behavior,
        adv,
        mask,
        config,
        beta=0.03,
        ref_logps=ref,
        token_versions=versions,
        current_version=3,
        row_weights=weights,
        global_tokens=14.0,
        entropy=entropy,
    )
    res.loss.backward()
    want = RECORDED[key]
    assert res.loss.item() == want["loss"]
    assert res.denominator.item() == want["denominator"]
    assert logps.grad.flatten().tolist() == want["grad"]
    for metric, value in want["metrics"].items():
        assert res.metrics[metric].item() == pytest.approx(value, rel=1e-6, abs=1e-6), metric
