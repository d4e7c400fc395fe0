"""The tiny rollout models in `helpers` (built in memory, nothing downloaded): the tests
here pin the properties the rollout tests rely on."""

from __future__ import annotations

import torch
from agentrl.chat import apply_chat_template

from tests.fakes.models import tiny_model, tiny_tokenizer


def test_tokenizer_has_chat_layout_tokens() -> None:
    tok = tiny_tokenizer()
    assert tok.convert_tokens_to_ids("<|im_end|>") == tok.eos_token_id
    pieces = tok.tokenize("<tool_call>{}</tool_call>")
    assert pieces[0] == "<tool_call>" and pieces[-1] == "</tool_call>"


def test_chat_template_renders_generation_prompt() -> None:
    text = apply_chat_template(tiny_tokenizer(), [{"role": "user", "content": "1+1"}])
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_tiny_model_is_deterministic_per_seed() -> None:
    a, b = tiny_model(seed=3), tiny_model(seed=3)
    ids = torch.tensor([[5, 6, 7]])
    assert torch.equal(a(input_ids=ids).logits, b(input_ids=ids).logits)
