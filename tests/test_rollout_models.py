"""Tiny local models for the rollout tests (built in memory, nothing downloaded).

Other rollout test files import `tiny_tokenizer` and `tiny_model` from here; the tests in
this file pin the properties they rely on.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from agentrl.chat import apply_chat_template

# These models are tiny: one intra-op thread is fastest, and on a shared machine a second
# spinning OpenMP thread makes every small matmul many times slower.
torch.set_num_threads(1)


@functools.lru_cache(maxsize=1)
def tiny_tokenizer() -> Any:
    """A 512-token byte-level BPE with the chat layout's special and markup tokens."""
    from agentrl.models.tiny import TinySpec, build_tokenizer, demo_corpus

    spec = TinySpec(vocab_size=512, corpus_tasks=60)
    return build_tokenizer(spec, demo_corpus(60, 1))


def tiny_model(seed: int = 0, layers: int = 2, hidden: int = 64, init: float = 0.2) -> Any:
    """A random 2-layer Qwen3 over `tiny_tokenizer`, with weights large enough to vary."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tok = tiny_tokenizer()
    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden // 4,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        initializer_range=init,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    return model.eval()


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
