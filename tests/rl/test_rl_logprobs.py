"""Per-token log-probs from one forward (`masked_logps` over every position): alignment,
sanitising, entropy, MoE aux loss."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from agentrl.rl.logprobs import sanitize_logits, token_logps
from agentrl.training.forward import masked_logps


def sequence_logps(model, input_ids, attention_mask, **kwargs):
    """The trainer's log-probs of every next token (each position trained)."""
    mask = torch.ones(input_ids.size(0), input_ids.size(1) - 1)
    return masked_logps(model, input_ids, attention_mask, mask, **kwargs)


class Fixed(torch.nn.Module):
    """Returns the given logits whatever the input; optionally an aux loss and MoE config."""

    def __init__(self, logits: torch.Tensor, aux: float | None = None, moe: bool = False):
        super().__init__()
        self.logits = torch.nn.Parameter(logits)
        self.aux = aux
        self.seen: dict = {}
        if moe:
            self.config = SimpleNamespace(
                output_router_logits=False, num_experts=4, router_aux_loss_coef=0.01
            )

    def forward(self, input_ids, attention_mask, **kwargs):
        self.seen = kwargs
        aux = None if self.aux is None else torch.tensor(self.aux)
        return SimpleNamespace(logits=self.logits, aux_loss=aux)


def test_logps_score_the_next_token_at_each_position() -> None:
    # position 0: logits [0, ln 3] -> p = [1/4, 3/4]; next token is 1 -> ln(3/4)
    # position 1: logits [ln 2, 0] -> p = [2/3, 1/3]; next token is 0 -> ln(2/3)
    # position 2 has no next token and is dropped
    logits = torch.tensor([[[0.0, math.log(3)], [math.log(2), 0.0], [5.0, 5.0]]])
    out = sequence_logps(
        Fixed(logits), torch.tensor([[0, 1, 0]]), torch.ones(1, 3), with_entropy=True
    )
    assert out.logps.tolist()[0] == pytest.approx([math.log(3 / 4), math.log(2 / 3)])
    assert out.logps.requires_grad
    # entropy of [1/4, 3/4] and [2/3, 1/3]
    h1 = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    h2 = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    assert out.entropy.tolist()[0] == pytest.approx([h1, h2])
    assert out.aux_loss is None


def test_temperature_divides_the_logits() -> None:
    # logits [0, ln 9] / 2 = [0, ln 3] -> p(1) = 3/4
    logits = torch.tensor([[[0.0, math.log(9)], [0.0, 0.0]]])
    out = sequence_logps(Fixed(logits), torch.tensor([[0, 1]]), torch.ones(1, 2), temperature=2.0)
    assert out.logps.item() == pytest.approx(math.log(0.75))


def test_bad_logits_are_made_finite() -> None:
    raw = torch.tensor([float("nan"), float("inf"), -float("inf"), 500.0])
    assert sanitize_logits(raw).tolist() == [0.0, 30.0, -30.0, 80.0]
    logits = torch.tensor([[[float("nan"), float("inf")], [0.0, 0.0]]])
    out = sequence_logps(Fixed(logits), torch.tensor([[0, 0]]), torch.ones(1, 2))
    assert torch.isfinite(out.logps).all()


def test_moe_models_are_asked_for_router_logits_and_their_aux_loss_is_scaled() -> None:
    logits = torch.zeros(1, 2, 2)
    moe = Fixed(logits, aux=2.0, moe=True)
    out = sequence_logps(moe, torch.tensor([[0, 1]]), torch.ones(1, 2))
    assert moe.seen == {"output_router_logits": True}
    assert out.aux_loss.item() == pytest.approx(0.02)  # 2.0 x router_aux_loss_coef 0.01
    # a model that returns its own (already weighted) aux loss keeps it as is
    plain = Fixed(logits, aux=0.5)
    assert sequence_logps(plain, torch.tensor([[0, 1]]), torch.ones(1, 2)).aux_loss.item() == 0.5
    assert plain.seen == {}


def test_out_of_vocabulary_targets_are_clamped_into_it() -> None:
    logps, _ = token_logps(torch.zeros(1, 2), torch.tensor([7]))
    assert logps.item() == pytest.approx(math.log(0.5))
