"""Log-probs of the trained tokens only: the output layer runs where the loss looks.

A training row is a prompt plus a response, and the loss reads log-probs at response
positions only. The decoder must see every token, but the output projection (hidden ->
vocabulary logits), the softmax over the vocabulary and the entropy need not: for a small
model with a large vocabulary they are most of the work. Log-probs (and entropies) at
other positions are returned as 0; every consumer multiplies by the mask.

Three ways, the most economical the model allows (same values and gradients):

- **split**: logits are exactly ``head(decoder(x))`` with a bias-free linear head (HF
  causal LMs, the tiny preset, a peft model whose head is not adapted, the LoRA
  reference view): the decoder runs on the whole row, then
  `agentrl.rl.logprobs.linear_token_logps` projects and normalises the trained positions
  a slice at a time, so no ``[tokens, vocabulary]`` logits are ever held.
- **head hook**: the model has an output layer but its forward must run as a whole
  (FSDP's root gathers and reduces there; the offloaded reference visits the device
  there; mixture-of-experts returns its router loss; logit soft-capping or scaling
  follows the head; an adapted head): a pre-hook on the output layer hands it the
  trained positions' hidden states only, and their logits are normalised a slice at a
  time.
- **full logits**: any other model (no output layer to find, a torch.compile wrapper):
  every position's logits, the trained ones picked before normalising.

Rows of one rollout group start with the same prompt, and nothing before a row's first
trained position needs an output. With a `SharedPrefixes` plan (split path) each distinct
prompt runs through the decoder once, with gradient, and the rows continue from its KV
cache, expanded to them: the decoder sees ``prompts + responses`` tokens instead of
``rows x (prompt + response)``. The gradients of all rows flow back into the one prompt
pass, so values and gradients equal the row-by-row computation. Supervised batches hold
different prompts that still open alike (system prompt, tool specs): `common_prefix` plans
one group over the tokens every row shares.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch.distributed.fsdp import FSDPModule

from agentrl.models.lora import ReferenceView, adapter_disabled, base_model_of, is_lora_model
from agentrl.rl.logprobs import (
    ForwardOutput,
    linear_token_logps,
    moe_kwargs,
    scaled_aux_loss,
    token_logps,
)
from agentrl.rollout.cache_args import CACHE_NAMES, forward_kwarg_names, output_cache
from agentrl.rollout.kv_cache import is_plain
from agentrl.training.memory import OffloadedReference

# Config attributes that change logits after the output projection.
_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling")

Autocast = Callable[[], AbstractContextManager[Any]]


@dataclass
class OutputSplit:
    """A model cut before its output layer: ``head(body(x).last_hidden_state)`` = logits."""

    body: torch.nn.Module
    head: torch.nn.Linear
    mode: Callable[[], AbstractContextManager[Any]]  # how to run it (LoRA reference: adapter off)


def _is_compiled(model: torch.nn.Module) -> bool:
    return hasattr(model, "_orig_mod")


def output_head(model: torch.nn.Module) -> torch.nn.Module | None:
    """The module that maps hidden states to vocabulary logits, when the model names one
    (also inside the wrappers whose forward calls the model's: the LoRA reference view, the
    offloaded reference)."""
    if isinstance(model, ReferenceView):
        model = model.policy
    elif isinstance(model, OffloadedReference):
        model = model.model
    get_head = getattr(model, "get_output_embeddings", None)
    head = get_head() if callable(get_head) else None
    return head if isinstance(head, torch.nn.Module) else None


def _plain_transformer(model: torch.nn.Module) -> bool:
    config = getattr(model, "config", None)
    if config is None or any(getattr(config, k, None) for k in _LOGIT_TRANSFORMS):
        return False
    return not (getattr(config, "num_experts", 0) or getattr(config, "num_local_experts", 0))


@contextlib.contextmanager
def _reference_mode(policy: torch.nn.Module) -> Iterator[None]:
    """What `ReferenceView.forward` does around its call: eval, no grad, adapter off."""
    was_training = policy.training
    policy.eval()
    try:
        with torch.no_grad(), adapter_disabled(policy):
            yield
    finally:
        policy.train(was_training)


def split_output_layer(model: torch.nn.Module) -> OutputSplit | None:
    """The decoder and head of ``model`` when its logits are exactly ``head(decoder(x))``."""
    if isinstance(model, FSDPModule | OffloadedReference) or _is_compiled(model):
        return None  # their own forward must run (gathers, device visits, compiled code)
    mode: Callable[[], AbstractContextManager[Any]] = nullcontext
    if isinstance(model, ReferenceView):
        policy = model.policy
        mode = lambda: _reference_mode(policy)  # noqa: E731
        model = policy
    inner = base_model_of(model) if is_lora_model(model) else model
    body = getattr(inner, "model", None)
    head = output_head(inner)
    if not isinstance(body, torch.nn.Module) or type(head) is not torch.nn.Linear:
        return None  # a subclass or an adapted head may compute more than weight @ h
    if head.bias is not None or not _plain_transformer(inner):
        return None
    return OutputSplit(body, head, mode)


@contextlib.contextmanager
def _head_sees(head: torch.nn.Module, where: torch.Tensor) -> Iterator[list[int]]:
    """Within the block, ``head`` receives the hidden states of ``where`` only: [N, H]."""
    calls = [0]

    def pick(_module: torch.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        hidden, *rest = args
        rows, width = where.shape
        if hidden.dim() != 3 or hidden.shape[0] != rows or hidden.shape[1] != width + 1:
            raise RuntimeError(
                f"the output layer got hidden states of shape {tuple(hidden.shape)}, "
                f"expected [{rows}, {width + 1}, hidden] (one per input position)"
            )
        calls[0] += 1
        return (hidden[:, :-1][where], *rest)

    handle = head.register_forward_pre_hook(pick)
    try:
        yield calls
    finally:
        handle.remove()


@dataclass(frozen=True)
class SharedPrefixes:
    """Which rows of a micro-batch continue which shared prompt (host-side plan).

    ``owner[g]`` is a row whose first ``lengths[g]`` ids are prompt ``g``; ``rows[r]`` is
    the prompt row ``r`` continues (its first ``lengths[rows[r]]`` ids are that prompt's).
    The continuations run padded to ``continuation`` tokens, not to the longest row.
    """

    owner: tuple[int, ...]
    lengths: tuple[int, ...]
    rows: tuple[int, ...]
    continuation: int  # the longest row's tokens after its shared prefix


def shared_prefixes(
    prompts: Sequence[Sequence[int] | None],
    row_lengths: Sequence[int],
    min_rows_per_prefix: float = 1.5,
) -> SharedPrefixes | None:
    """A plan from each row's prompt ids (None: a row that must not share, e.g. truncated)
    and its length in tokens (prompt included).

    A row's prefix is its prompt less the last token: the last prompt position already
    predicts the first response token. None when the rows share too little to gain.
    """
    if any(p is None or len(p) < 2 for p in prompts) or not prompts:
        return None
    index: dict[tuple[int, ...], int] = {}
    owner: list[int] = []
    rows: list[int] = []
    for row, prompt in enumerate(prompts):
        key = tuple(prompt[:-1])  # type: ignore[index]
        if key not in index:
            index[key] = len(owner)
            owner.append(row)
        rows.append(index[key])
    if len(prompts) < min_rows_per_prefix * len(owner):
        return None
    lengths = tuple(len(prompts[r]) - 1 for r in owner)  # type: ignore[arg-type]
    continuation = max(n - lengths[g] for n, g in zip(row_lengths, rows, strict=True))
    return SharedPrefixes(tuple(owner), lengths, tuple(rows), max(continuation, 1))


# Shorter prefixes common to every row are not worth the second decoder call.
MIN_COMMON_PREFIX = 16


def common_prefix(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    trained: torch.Tensor,
    minimum: int = MIN_COMMON_PREFIX,
) -> SharedPrefixes | None:
    """A plan that runs the leading tokens every row shares once (supervised batches of
    different prompts still open with the same system prompt and tool specs).

    ``trained`` [B, T-1] marks the positions whose next token carries loss; the prefix ends
    before the first of them, where the rows differ, and before any row's last token. None
    when it would be shorter than ``minimum``.
    """
    rows, width = input_ids.shape
    if rows < 2 or width < 2:
        return None
    same = (input_ids == input_ids[:1]).all(dim=0) & attention_mask.bool().all(dim=0)
    differing = torch.nonzero(~same)
    length = int(differing[0, 0]) if differing.numel() else width
    first_trained = torch.nonzero(trained.bool().any(dim=0))
    if first_trained.numel():
        length = min(length, int(first_trained[0, 0]))
    row_lengths = attention_mask.sum(dim=1)
    length = min(length, int(row_lengths.min()) - 1)
    if length < minimum:
        return None
    return SharedPrefixes((0,), (length,), (0,) * rows, int(row_lengths.max()) - length)


def _cache_kwarg(body: torch.nn.Module) -> str | None:
    """The name under which ``body`` takes a KV cache, None when it takes none."""
    names = forward_kwarg_names(body)
    if "position_ids" not in names:
        return None
    return next((n for n in CACHE_NAMES if n in names), None)


def _shared_hidden(
    body: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    plan: SharedPrefixes,
    cache_kwarg: str,
) -> tuple[torch.Tensor, int] | None:
    """Hidden states [B, S, H] of every row from position ``start`` on, the prompts run
    once; None when the model returns no cache (then the rows run whole)."""
    device = input_ids.device
    start = min(plan.lengths)
    longest = max(plan.lengths)
    owners = torch.tensor(plan.owner, device=device)
    lengths = torch.tensor(plan.lengths, device=device)
    positions = torch.arange(longest, device=device)
    prefix_attn = (positions.unsqueeze(0) < lengths.unsqueeze(1)).to(attention_mask.dtype)
    prefix_ids = input_ids[owners, :longest] * prefix_attn
    out = body(input_ids=prefix_ids, attention_mask=prefix_attn, use_cache=True)
    cache = output_cache(out)
    if cache is None or not hasattr(cache, "batch_select_indices"):
        return None
    rows = torch.tensor(plan.rows, device=device)
    if len(plan.owner) == 1 and is_plain(cache):
        # One prefix for every row: broadcast views, whose backward is a plain sum (an
        # index copy's backward scatters, several times slower on the CPU).
        for layer in cache.layers:
            layer.keys = layer.keys.expand(len(plan.rows), -1, -1, -1)
            layer.values = layer.values.expand(len(plan.rows), -1, -1, -1)
    else:
        cache.batch_select_indices(rows)
    # Column j of row r's continuation is position row_len[r] + j.
    row_len = lengths[rows]
    total = input_ids.size(1)
    cols = torch.arange(plan.continuation, device=device).unsqueeze(0)
    absolute = cols + row_len.unsqueeze(1)
    inside = (absolute < total).to(attention_mask.dtype)
    take = absolute.clamp(max=total - 1)
    suffix_ids = input_ids.gather(1, take)
    suffix_attn = attention_mask.gather(1, take) * inside
    suffix_pos = absolute
    attn = torch.cat([prefix_attn[rows], suffix_attn], dim=1)
    out = body(
        input_ids=suffix_ids,
        attention_mask=attn,
        position_ids=suffix_pos,
        use_cache=True,
        **{cache_kwarg: cache},
    )
    hidden = out.last_hidden_state
    # Back to columns from ``start``: column c is row r's continuation column
    # c - (row_len[r] - start); before it lies the row's prompt, after it padding.
    back = torch.arange(total - start, device=device).unsqueeze(0) - (row_len - start).unsqueeze(1)
    valid = (back >= 0) & (back < plan.continuation)
    back = back.clamp(min=0, max=plan.continuation - 1)
    full = hidden.gather(1, back.unsqueeze(-1).expand(-1, -1, hidden.size(-1)))
    return full * valid.unsqueeze(-1).to(full.dtype), start


def masked_logps(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    mask: torch.Tensor,
    *,
    with_entropy: bool = False,
    autocast: Autocast | None = None,
    temperature: float = 1.0,
    prefixes: SharedPrefixes | None = None,
) -> ForwardOutput:
    """Per-token log-probs [B, T-1] of ``input_ids[:, 1:]``, computed where ``mask`` > 0,
    under ``logits / temperature`` (1.0: the raw policy). ``prefixes``: rows that share
    their prompt (no trained position inside it), run once (split path only)."""
    where = mask > 0
    targets = input_ids[:, 1:][where]
    amp = autocast or nullcontext
    aux = None
    split = split_output_layer(model)
    if split is not None:
        with split.mode(), amp():
            hidden = _decoder_hidden(split.body, input_ids, attention_mask, prefixes)
            hidden = hidden[:, :-1][where]
            logps, entropy = linear_token_logps(
                hidden,
                split.head.weight,
                targets,
                temperature=temperature,
                with_entropy=with_entropy,
            )
    else:
        kwargs, aux_scale = moe_kwargs(model)
        head = None if _is_compiled(model) else output_head(model)
        picking = _head_sees(head, where) if head is not None else nullcontext([1])
        with picking as calls, amp():
            out = model(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        if calls[0] != 1:
            raise RuntimeError(f"the output layer ran {calls[0]} times in one forward")
        logits = out.logits if head is not None else out.logits[:, :-1][where]
        logps, entropy = token_logps(
            logits, targets, temperature=temperature, with_entropy=with_entropy
        )
        aux = scaled_aux_loss(out, aux_scale)
    return ForwardOutput(_spread(logps, where), _spread(entropy, where), aux)


def _decoder_hidden(
    body: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    prefixes: SharedPrefixes | None,
) -> torch.Tensor:
    """[B, T, H] hidden states; positions inside a shared prompt are zeros (untrained)."""
    kwarg = _cache_kwarg(body) if prefixes is not None else None
    if prefixes is not None and kwarg is not None and not _checkpointed(body):
        shared = _shared_hidden(body, input_ids, attention_mask, prefixes, kwarg)
        if shared is not None:
            tail, start = shared
            head = tail.new_zeros(tail.size(0), start, tail.size(-1))
            return torch.cat([head, tail], dim=1)
    return body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def _checkpointed(body: torch.nn.Module) -> bool:
    """Activation checkpointing drops the KV cache in training forwards."""
    return any(getattr(m, "gradient_checkpointing", False) for m in body.modules())


def _spread(values: torch.Tensor | None, where: torch.Tensor) -> torch.Tensor | None:
    """[N] values at the True places of ``where`` [B, T-1], 0 elsewhere."""
    if values is None:
        return None
    full = torch.zeros(where.shape, dtype=values.dtype, device=values.device)
    return full.masked_scatter(where, values)


__all__ = [
    "OutputSplit",
    "SharedPrefixes",
    "common_prefix",
    "masked_logps",
    "output_head",
    "shared_prefixes",
    "split_output_layer",
]
