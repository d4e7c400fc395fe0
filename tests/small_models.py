"""The small tiny-preset spec the model and SFT tests share, its tokenizer, and a model
whose cross-entropy is known by hand.

Building the tokenizer trains a BPE on generated text; doing it once per session keeps
the suite fast, and every test module sees the same vocabulary.
"""

from __future__ import annotations

from functools import lru_cache
from types import SimpleNamespace
from typing import Any

import torch
from agentrl.models.tiny import TinySpec, build_tokenizer, demo_corpus

SMALL_SPEC = TinySpec(
    vocab_size=3072,
    hidden_size=32,
    num_layers=2,
    num_heads=2,
    num_kv_heads=1,
    head_dim=16,
    intermediate_size=64,
    corpus_tasks=150,
)


def fresh_small_tokenizer() -> Any:
    """A newly built tokenizer for SMALL_SPEC (for tests of determinism)."""
    return build_tokenizer(SMALL_SPEC, demo_corpus(SMALL_SPEC.corpus_tasks, SMALL_SPEC.corpus_seed))


@lru_cache(maxsize=1)
def small_tokenizer() -> Any:
    """The session's shared tokenizer for SMALL_SPEC (do not mutate it)."""
    return fresh_small_tokenizer()


class UniformLogits(torch.nn.Module):
    """Equal logits over 4 tokens: the cross-entropy of any label is ln 4."""

    def __init__(self) -> None:
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(4))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> SimpleNamespace:
        return SimpleNamespace(logits=self.bias.expand(*input_ids.shape, 4))
