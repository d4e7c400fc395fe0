"""Small models and tokenizers built in memory (nothing downloaded), and what a training
step on them needs.

Building a tokenizer trains a BPE on generated text; the cached builders below do it once
per session, so the suite stays fast and every module sees the same vocabulary (the
`small_tokenizer` fixture of `conftest.py` hands out the SMALL_SPEC one).
"""

from __future__ import annotations

import copy
import functools
from types import SimpleNamespace
from typing import Any

import torch
from agentrl.models.tiny import TinySpec, build_tokenizer, demo_corpus

# The small tiny-preset size the model, SFT and training-run tests share.
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


@functools.lru_cache(maxsize=1)
def small_tokenizer() -> Any:
    """The session's shared tokenizer for SMALL_SPEC (do not mutate it)."""
    return fresh_small_tokenizer()


@functools.lru_cache(maxsize=1)
def tiny_tokenizer() -> Any:
    """A 512-token byte-level BPE with the chat layout's special and markup tokens."""
    spec = TinySpec(vocab_size=512, corpus_tasks=60)
    return build_tokenizer(spec, demo_corpus(60, 1))


def tiny_model(seed: int = 0, layers: int = 2, hidden: int = 64, init: float = 0.2) -> Any:
    """A random Qwen3 over `tiny_tokenizer`, with weights large enough to vary."""
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


def tiny_llama(seed: int = 0, layers: int = 2) -> Any:
    """A random Llama (grouped-query attention) over `tiny_tokenizer`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        initializer_range=0.2,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForCausalLM(config).eval()


class UniformLogits(torch.nn.Module):
    """Equal logits over 4 tokens: the cross-entropy of any label is ln 4."""

    def __init__(self) -> None:
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(4))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> SimpleNamespace:
        return SimpleNamespace(logits=self.bias.expand(*input_ids.shape, 4))


def next_token_logps(
    model: torch.nn.Module, ids: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """Log-prob [B, T-1] of every token of ``ids`` [B, T] after the first under ``model``'s
    ``logits / temperature``: the trainer's own computation (`masked_logps`) over every
    position, one forward pass without a cache."""
    from agentrl.training.forward import masked_logps

    mask = torch.ones(ids.size(0), ids.size(1) - 1)
    with torch.no_grad():
        out = masked_logps(model, ids, torch.ones_like(ids), mask, temperature=temperature)
    return out.logps


def cpu_models(model: torch.nn.Module, tokenizer: Any) -> Any:
    """`Models` for a float32 training step on the CPU: a trainable copy of ``model`` as the
    policy and a frozen copy as the reference (``model`` itself is left as it is)."""
    from agentrl.training.models import Models, autocast_factory

    policy = copy.deepcopy(model).train()
    reference = copy.deepcopy(model).eval().requires_grad_(False)
    cpu = torch.device("cpu")
    return Models(
        policy,
        policy,
        reference,
        reference,
        tokenizer,
        cpu,
        autocast_factory(cpu, "float32"),
        "test",
    )


def rolled_out_batch(
    model: torch.nn.Module,
    tokenizer: Any,
    *,
    prompts: int,
    num_generations: int,
    max_new_tokens: int,
) -> list[Any]:
    """One batch (2 prompts x ``num_generations``, one turn, temperature 1, seed 0) that a
    copy of ``model`` samples from ``prompts`` generated held-out tasks with the built-in
    tools, at policy version 0."""
    from agentrl.assembly.prompts import generated_heldout_samples
    from agentrl.rollout import EpisodeConfig, PolicyVersion, SamplingParams
    from agentrl.rollout.engine import TorchEngine
    from agentrl.tools import builtin_registry
    from agentrl.training.sources import InlineSource

    sampling = SamplingParams(temperature=1.0, max_new_tokens=max_new_tokens)
    episode = EpisodeConfig(max_turns=1, max_new_tokens=max_new_tokens, sampling=sampling)
    source = InlineSource(
        TorchEngine(copy.deepcopy(model), tokenizer, seed=0),
        generated_heldout_samples(prompts),
        builtin_registry(),
        episode,
        num_generations=num_generations,
        batch_size=2,
        seed=0,
        version=PolicyVersion(),
    )
    return source.next_batch(1)
