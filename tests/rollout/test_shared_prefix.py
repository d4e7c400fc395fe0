"""The SFT loss runs the prefix every row shares once: same loss, same gradients."""

from __future__ import annotations

import pytest
import torch
from agentrl.models.tiny import build_model
from agentrl.sft.data import build_examples, collate
from agentrl.sft.tasks import generated_demos, tool_env
from agentrl.sft.train import masked_loss_sum
from agentrl.training.forward import common_prefix

from tests.fakes.models import SMALL_SPEC


def _rows(*rows: list[int]) -> dict[str, torch.Tensor]:
    """Right-padded batch of `rows`; the loss falls on every token after the 20th."""
    width = max(len(r) for r in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    attn = torch.zeros_like(ids)
    loss = torch.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        attn[i, : len(row)] = 1
        loss[i, 20 : len(row)] = 1
    return {"input_ids": ids, "attention_mask": attn, "loss_mask": loss}


def _length(batch: dict[str, torch.Tensor], minimum: int = 4) -> int:
    plan = common_prefix(
        batch["input_ids"], batch["attention_mask"], batch["loss_mask"][:, 1:], minimum
    )
    if plan is None:
        return 0
    assert plan.owner == (0,) and plan.rows == (0,) * batch["input_ids"].size(0)
    assert plan.continuation == int(batch["attention_mask"].sum(dim=1).max()) - plan.lengths[0]
    return plan.lengths[0]


def test_prefix_ends_where_rows_differ():
    common = list(range(1, 11))
    batch = _rows(common + [50] * 20, common + [60] * 25, common + [50, 70] * 10)
    assert _length(batch) == 10
    # The two rows that share one more token do not stretch the prefix of the batch.
    assert _length(_rows(common + [50] * 20, common + [50] * 20)) == 19


def test_prefix_stops_before_the_first_position_that_predicts_a_trained_token():
    same = list(range(1, 31))
    batch = _rows([*same, 1], [*same, 2])  # identical for 30 tokens, trained from 20
    assert _length(batch) == 19  # position 19 predicts token 20, the first trained one


def test_prefix_leaves_every_row_a_token_and_needs_the_minimum():
    short = list(range(1, 9))
    batch = _rows(short, [*short, 9, 10, 11])
    assert _length(batch) == 7  # the shorter row keeps its last token
    assert _length(batch, minimum=8) == 0
    assert _length(_rows(list(range(1, 40)))) == 0  # one row: nothing to share
    assert _length(_rows([5, *list(range(1, 30))], [6, *list(range(1, 30))])) == 0


@pytest.fixture(scope="module")
def demo_batch(small_tokenizer) -> dict[str, torch.Tensor]:
    env = tool_env(small_tokenizer)
    demos = generated_demos(6, shortcut_rate=0.75)
    examples = build_examples(demos, small_tokenizer, env.render, max_len=1024)
    return collate(examples, pad_id=0)


def _loss_and_grads(
    model: torch.nn.Module, batch: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad()
    loss = masked_loss_sum(model, batch)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


def test_shared_prefix_gives_the_plain_forward_loss_and_gradients(
    small_tokenizer, demo_batch, monkeypatch
):
    # The generated demonstrations all start with the same system prompt and tool specs.
    assert _length(demo_batch) >= 40
    torch.manual_seed(0)
    model = build_model(SMALL_SPEC, len(small_tokenizer)).train()
    shared_loss, shared_grads = _loss_and_grads(model, demo_batch)
    monkeypatch.setattr("agentrl.sft.train.common_prefix", lambda *_: None)
    plain_loss, plain_grads = _loss_and_grads(model, demo_batch)
    torch.testing.assert_close(shared_loss, plain_loss, rtol=1e-5, atol=1e-4)
    for shared, plain in zip(shared_grads, plain_grads, strict=True):
        torch.testing.assert_close(shared, plain, rtol=1e-4, atol=1e-5)
