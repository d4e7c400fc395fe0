"""Per-token log-probs (and entropy, MoE auxiliary loss), chunked over tokens.

Logits are sanitised (NaN -> 0, +-inf -> +-30, clamp to +-80) before normalising: one
bad activation must produce a large-but-finite loss that the optimiser's non-finite
check can reason about, not NaN everywhere.

The vocabulary is the widest axis of a language model (150k for Qwen3): logits of a few
thousand tokens in float32 are gigabytes. The two autograd functions here normalise a
slice of tokens at a time and keep only each token's log-normaliser for the backward
pass, which recomputes the slice's softmax: at most ``chunk x vocabulary`` float32 values
exist at once. :func:`linear_token_logps` also runs the output projection per slice, so
the logits of all tokens never exist at all (forward or backward).

One exception, on the CPU: when every slice's probabilities fit `KEEP_PROBS_BYTES` in the
weights' dtype (a few thousand tokens of a 49k vocabulary in bfloat16), the forward keeps
them and the backward reads them instead of running the output layer and the softmax
again. On a CPU those passes over ``tokens x vocabulary`` values cost more than the
matrix products (docs/tuning.md); GPU memory is kept for other things.

The model's forward pass around them (which positions, which output layer, shared
prompts) is `agentrl.training.forward.masked_logps`, the one home of model log-probs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from agentrl.utils.tensors import all_in_range

__all__ = [
    "CHUNK_ELEMENTS",
    "KEEP_PROBS_BYTES",
    "ForwardOutput",
    "chunk_tokens",
    "linear_token_logps",
    "moe_kwargs",
    "sanitize_logits",
    "scaled_aux_loss",
    "token_logps",
]

# Float32 values of one slice of logits (128 MiB): 220 tokens of a 152k vocabulary.
CHUNK_ELEMENTS = 1 << 25
# The most bytes of probabilities the output layer's forward keeps for its backward (CPU).
KEEP_PROBS_BYTES = 1 << 29
_CLAMP = 80.0


@dataclass
class ForwardOutput:
    logps: torch.Tensor  # [B, T-1] log pi(input_ids[:, t+1] | prefix), with grad
    entropy: torch.Tensor | None  # [B, T-1] detached, when asked for
    aux_loss: torch.Tensor | None  # scaled MoE load-balancing loss, when the model has one


def sanitize_logits(logits: torch.Tensor) -> torch.Tensor:
    """Float32 logits with NaN/inf replaced and the range clamped to +-80."""
    return _sanitized(logits)[0]


def _sanitized(logits: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """(`sanitize_logits`, whether every value was already finite and inside +-80: then
    the float32 logits themselves, not a copy, when they were float32)."""
    wide = logits.float()
    if all_in_range(wide, -_CLAMP, _CLAMP):  # the usual case: nothing to replace or clamp
        return wide, True
    clean = torch.nan_to_num(wide, nan=0.0, posinf=30.0, neginf=-30.0).clamp(-_CLAMP, _CLAMP)
    return clean, False


def chunk_tokens(vocab: int, elements: int | None = None) -> int:
    """Tokens per slice so that a slice holds about ``elements`` (`CHUNK_ELEMENTS`) logits."""
    return max(1, (elements or CHUNK_ELEMENTS) // max(vocab, 1))


@dataclass
class _SliceStats:
    """One slice's log-prob of each target, log-normaliser, entropy (when asked for) and
    probabilities in the logits' dtype (when kept for the backward)."""

    picked: torch.Tensor
    lse: torch.Tensor
    entropy: torch.Tensor | None
    probs: torch.Tensor | None


def _slice_stats(
    raw: torch.Tensor,
    targets: torch.Tensor,
    temperature: float,
    with_entropy: bool,
    keep_probs: bool = False,
) -> _SliceStats:
    """The `_SliceStats` of one slice of raw logits. Probabilities are kept only where
    nothing was sanitised (the backward then needs no raw logits to mask the clamp)."""
    if raw.dtype != torch.float32 and all_in_range(raw, -_CLAMP, _CLAMP):
        return _narrow_slice_stats(raw, targets, temperature, with_entropy, keep_probs)
    z, inside = _sanitized(raw)
    keep_probs = keep_probs and inside
    if temperature != 1.0:
        z = z / temperature
    lse = torch.logsumexp(z, dim=-1)
    picked = z.gather(1, targets.unsqueeze(1)).squeeze(1) - lse
    entropy = None
    if with_entropy:
        entropy = lse - (torch.softmax(z, dim=-1) * z).sum(dim=-1)
    probs = None
    if keep_probs:
        # The backward's own exp(z - lse) (float32 logits: the same bits as recomputing it).
        shifted = z.sub_(lse.unsqueeze(1)) if z is not raw else z - lse.unsqueeze(1)
        probs = shifted.exp_().to(raw.dtype)
    return _SliceStats(picked, lse, entropy, probs)


def _narrow_slice_stats(
    raw: torch.Tensor,
    targets: torch.Tensor,
    temperature: float,
    with_entropy: bool,
    keep_probs: bool,
) -> _SliceStats:
    """`_slice_stats` of logits in a dtype narrower than float32 with nothing to sanitise:
    float32 log-probs in one fused pass (a float32 copy of the slice and logsumexp's
    passes over it cost twice as much on a CPU); the same values to float32 rounding."""
    scaled = raw if temperature == 1.0 else raw.float() / temperature
    logp = torch.log_softmax(scaled, dim=-1, dtype=torch.float32)
    picked = logp.gather(1, targets.unsqueeze(1)).squeeze(1)
    lse = scaled.gather(1, targets.unsqueeze(1)).squeeze(1).float() - picked
    entropy = -(logp.exp() * logp).sum(dim=-1) if with_entropy else None
    probs = None
    if keep_probs:
        probs = torch.softmax(raw, dim=-1) if temperature == 1.0 else logp.exp_().to(raw.dtype)
    return _SliceStats(picked, lse, entropy, probs)


def _slice_grad(
    raw: torch.Tensor,
    targets: torch.Tensor,
    lse: torch.Tensor,
    grad: torch.Tensor,
    temperature: float,
) -> torch.Tensor:
    """d(sum grad * logp) / d raw logits of one slice, in float32.

    d logp_t / d z = onehot(t) - softmax(z); the sanitising clamp passes the gradient only
    where the raw logit was finite and inside +-80; z = sanitised / temperature.
    """
    wide = raw.float()
    z, inside = _sanitized(wide)
    if temperature != 1.0:
        z = z / temperature
    out = torch.exp(z - lse.unsqueeze(1)).mul_(-grad.unsqueeze(1))
    out.scatter_add_(1, targets.unsqueeze(1), grad.unsqueeze(1))
    if not inside:
        out = out.mul_(wide.abs() <= _CLAMP)  # False for NaN and inf too
    if temperature != 1.0:
        out = out.div_(temperature)
    return out


def _kept_slice_grad(
    probs: torch.Tensor,
    targets: torch.Tensor,
    picked: torch.Tensor,
    grad: torch.Tensor,
    temperature: float,
) -> torch.Tensor:
    """`_slice_grad` from the probabilities the forward kept, in their dtype.

    In float32 the same operations as `_slice_grad` (the same bits). In a narrower dtype
    the target's column is written from the float32 log-prob instead (1 - p with p rounded
    to 8 bits would lose all of a confident target's gradient).
    """
    if probs.dtype == torch.float32:
        out = probs * -grad.unsqueeze(1)
        out.scatter_add_(1, targets.unsqueeze(1), grad.unsqueeze(1))
    else:
        out = probs * (-grad).to(probs.dtype).unsqueeze(1)
        rows = torch.arange(out.size(0), device=out.device)
        out[rows, targets] = (grad * -torch.expm1(picked)).to(out.dtype)
    if temperature != 1.0:
        out = out.div_(temperature)
    return out


def _slices(n: int, chunk: int) -> Iterator[tuple[int, int]]:
    """(start, end) of consecutive slices of at most ``chunk`` of ``n`` rows."""
    for start in range(0, n, chunk):
        yield start, min(start + chunk, n)


@dataclass(frozen=True)
class _Slicing:
    """How the autograd functions normalise: the temperature dividing the logits, tokens
    per slice, and whether entropies are wanted too."""

    temperature: float
    chunk: int
    with_entropy: bool
    keep_probs: bool = False  # the output layer's probabilities kept for its backward


def _forward_stats(
    ctx: Any,
    slice_logits: Callable[[int, int], torch.Tensor],
    inputs: tuple[torch.Tensor, ...],
    targets: torch.Tensor,
    how: _Slicing,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward of both autograd functions: (log-probs, entropies or an empty tensor)
    of the targets of ``inputs[0]``'s rows, from the raw logits ``slice_logits(start,
    end)`` of one slice of rows at a time (no grad); ``ctx`` keeps ``inputs``, the targets
    and the log-normalisers for the backward."""
    n, device = inputs[0].size(0), inputs[0].device
    logps = torch.empty(n, dtype=torch.float32, device=device)
    lse = torch.empty_like(logps)
    entropy = torch.empty(n if how.with_entropy else 0, dtype=torch.float32, device=device)
    kept: list[torch.Tensor] = []  # each slice's probabilities, or an empty tensor
    with torch.no_grad():
        for start, end in _slices(n, how.chunk):
            stats = _slice_stats(
                slice_logits(start, end),
                targets[start:end],
                how.temperature,
                how.with_entropy,
                how.keep_probs,
            )
            logps[start:end], lse[start:end] = stats.picked, stats.lse
            if stats.entropy is not None:
                entropy[start:end] = stats.entropy
            if how.keep_probs:
                kept.append(stats.probs if stats.probs is not None else logps.new_empty(0))
    ctx.save_for_backward(*inputs, targets, lse, logps, *kept)
    ctx.temperature, ctx.chunk = how.temperature, how.chunk
    ctx.mark_non_differentiable(entropy)
    return logps, entropy


class _LogitsLogps(torch.autograd.Function):
    """Log-probs of ``targets`` under logits [N, V], normalised one slice at a time."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, logits: torch.Tensor, targets: torch.Tensor, how: _Slicing
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return _forward_stats(ctx, lambda start, end: logits[start:end], (logits,), targets, how)

    @staticmethod
    def backward(ctx: Any, grad_logps: torch.Tensor, _grad_entropy: Any) -> Any:  # type: ignore[override]
        logits, targets, lse, _ = ctx.saved_tensors
        grad_logits = torch.empty_like(logits)
        grad_logps = grad_logps.float()
        for start, end in _slices(logits.size(0), ctx.chunk):
            grad = _slice_grad(
                logits[start:end],
                targets[start:end],
                lse[start:end],
                grad_logps[start:end],
                ctx.temperature,
            )
            grad_logits[start:end] = grad.to(logits.dtype)
        return grad_logits, None, None


class _LinearLogps(torch.autograd.Function):
    """Log-probs of ``targets`` under ``hidden @ weight.T``, one slice of tokens at a time.

    The backward recomputes each slice's logits (one more matmul per slice, the cost of
    never holding them all). Under CUDA autocast the matmuls run in the autocast dtype,
    in the backward too (``custom_fwd``/``custom_bwd``).
    """

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(  # type: ignore[override]
        ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, how: _Slicing
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return _forward_stats(
            ctx,
            lambda start, end: F.linear(hidden[start:end], weight),
            (hidden, weight),
            targets,
            how,
        )

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx: Any, grad_logps: torch.Tensor, _grad_entropy: Any) -> Any:  # type: ignore[override]
        hidden, weight, targets, lse, logps, *kept = ctx.saved_tensors
        want_hidden, want_weight = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_hidden = torch.empty_like(hidden) if want_hidden else None
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        grad_logps = grad_logps.float()
        for index, (start, end) in enumerate(_slices(hidden.size(0), ctx.chunk)):
            piece = hidden[start:end]
            probs = kept[index] if kept else None
            if probs is not None and probs.numel():
                grad = _kept_slice_grad(
                    probs,
                    targets[start:end],
                    logps[start:end],
                    grad_logps[start:end],
                    ctx.temperature,
                ).to(hidden.dtype)
            else:
                raw = F.linear(piece, weight)
                grad = _slice_grad(
                    raw,
                    targets[start:end],
                    lse[start:end],
                    grad_logps[start:end],
                    ctx.temperature,
                ).to(raw.dtype)
            if grad_hidden is not None:
                grad_hidden[start:end] = torch.matmul(grad, weight.to(grad.dtype)).to(hidden.dtype)
            if want_weight:
                grad_weight += torch.matmul(grad.t(), piece.to(grad.dtype)).float()
        return grad_hidden, grad_weight.to(weight.dtype) if want_weight else None, None, None


def _apply(
    function: type[torch.autograd.Function],
    inputs: tuple[torch.Tensor, ...],
    vocab: int,
    targets: torch.Tensor,
    temperature: float,
    with_entropy: bool,
    chunk: int | None,
    keep_probs: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``function`` over ``inputs`` with the targets clamped into the vocabulary, the
    temperature kept above 0 and slices of ``chunk`` tokens (default: `chunk_tokens`)."""
    how = _Slicing(
        max(float(temperature), 1e-6), chunk or chunk_tokens(vocab), with_entropy, keep_probs
    )
    checked = targets.clamp(min=0, max=vocab - 1)
    logps, entropy = function.apply(*inputs, checked, how)
    return logps, entropy if with_entropy else None


def token_logps(
    logits: torch.Tensor,
    targets: torch.Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    chunk: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(log-probs [N], entropies [N] or None) of ``targets`` [N] under ``logits`` [N, V] /
    ``temperature``; float32, at most ``chunk`` tokens normalised at once."""
    vocab = logits.size(-1)
    return _apply(_LogitsLogps, (logits,), vocab, targets, temperature, with_entropy, chunk)


def linear_token_logps(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    chunk: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`token_logps` of ``hidden`` [N, H] @ ``weight`` [V, H].T, without ever holding
    more than ``chunk`` tokens' logits (an output layer without bias)."""
    vocab = weight.size(0)
    keep = (
        hidden.device.type == "cpu"
        and torch.is_grad_enabled()
        and (hidden.requires_grad or weight.requires_grad)
        and hidden.size(0) * vocab * hidden.element_size() <= KEEP_PROBS_BYTES
    )
    inputs = (hidden, weight)
    return _apply(_LinearLogps, inputs, vocab, targets, temperature, with_entropy, chunk, keep)


def moe_kwargs(model: torch.nn.Module) -> tuple[dict[str, bool], float | None]:
    """Ask HF mixture-of-experts models for router logits; their aux loss is unscaled."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "output_router_logits"):
        return {}, None
    experts = getattr(config, "num_experts", 0) or getattr(config, "num_local_experts", 0)
    if not experts:
        return {}, None
    return {"output_router_logits": True}, float(getattr(config, "router_aux_loss_coef", 0.0))


def scaled_aux_loss(out: Any, aux_scale: float | None) -> torch.Tensor | None:
    """The model output's load-balancing loss times its coefficient (None without one)."""
    aux = getattr(out, "aux_loss", None)
    if aux is not None and aux_scale is not None:
        aux = aux * aux_scale
    return aux if torch.is_tensor(aux) else None
