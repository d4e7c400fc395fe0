"""Next-token sampling for rollouts, and the log-probs PPO needs from it.

Two distributions matter at every step. The *sampling* distribution is the one tokens are
drawn from: repetition penalty, then temperature, then top-k, top-p and min-p filtering.
The *behaviour* distribution is the policy the trainer optimises: the logits divided by
``SamplingParams.logprob_temperature`` (1.0: the raw policy; the sampling temperature: the
tempered policy that drew the tokens), nothing filtered. PPO's importance ratio compares
the current policy with the policy that produced the data, and the trainer recomputes
log-probs at the same temperature, so the stored ones must match it. Both log-probs are
returned; trajectories store the behaviour one.

Logits are sanitised first (NaN -> 0, +-inf -> +-30, then clamped to [-80, 80]); rows that
needed it are reported so the caller can count them. A row whose sampling probabilities
collapse (no finite positive mass) draws the fallback token (EOS) instead, also reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F

from agentrl.utils.tensors import all_in_range

# Replacement values for non-finite logits, and the range every logit is clamped to.
NAN_LOGIT = 0.0
POSINF_LOGIT = 30.0
NEGINF_LOGIT = -30.0
LOGIT_LIMIT = 80.0
# Temperatures at or below this mean greedy decoding.
GREEDY_TEMPERATURE = 1e-6


@dataclass(frozen=True)
class SamplingParams:
    """How to pick tokens. ``greedy`` (or a temperature <= 1e-6) takes the arg-max.

    ``top_k`` 0 and ``top_p`` 1.0 and ``min_p`` 0.0 disable those filters; a
    ``repetition_penalty`` of 1.0 disables the penalty. ``stop`` strings end a sequence
    once its generated text contains one (the tokens that completed it are kept);
    ``stop_token_ids`` are extra end tokens besides the engine's EOS ids.
    ``max_new_tokens`` is the default per-sequence budget. ``logprob_temperature`` divides
    the logits of the behaviour log-probs (1.0: the raw policy).
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    greedy: bool = False
    max_new_tokens: int = 192
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = field(default_factory=tuple)
    logprob_temperature: float = 1.0

    def __post_init__(self) -> None:
        if self.temperature < 0 or self.temperature != self.temperature:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0.0 <= self.min_p <= 1.0:
            raise ValueError(f"min_p must be in [0, 1], got {self.min_p}")
        if not self.logprob_temperature > 0:
            raise ValueError(f"logprob_temperature must be > 0, got {self.logprob_temperature}")
        if self.repetition_penalty <= 0:
            raise ValueError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        if self.max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, got {self.max_new_tokens}")
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        object.__setattr__(self, "stop", tuple(s for s in self.stop if s))
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))

    @property
    def is_greedy(self) -> bool:
        return self.greedy or self.temperature <= GREEDY_TEMPERATURE

    def with_greedy(self) -> SamplingParams:
        """The same limits with greedy decoding (for evaluation)."""
        return replace(self, greedy=True)

    @classmethod
    def compat_defaults(cls) -> SamplingParams:
        """The rollout options' defaults (temperature 0.7, top-p 0.88, top-k 40, 1.03)."""
        from agentrl.rollout.options import RolloutConfig as R

        return cls(
            temperature=R.temperature,
            top_p=R.top_p,
            top_k=R.top_k,
            repetition_penalty=R.repetition_penalty,
        )


@dataclass
class SampleResult:
    """One sampling step for a batch of rows.

    ``logps`` are behaviour log-probs (see ``SamplingParams.logprob_temperature``);
    ``sample_logps`` are log-probs under the distribution actually sampled from (0.0 for
    greedy rows). ``nonfinite_rows`` marks rows
    whose logits had NaN/inf; ``fallback_rows`` rows that fell back to the fallback token.
    """

    tokens: torch.Tensor
    logps: torch.Tensor
    sample_logps: torch.Tensor
    nonfinite_rows: torch.Tensor
    fallback_rows: torch.Tensor


def sanitize_logits(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Finite fp32 logits, and a bool per row: did the row contain a non-finite value."""
    if all_in_range(logits, -LOGIT_LIMIT, LOGIT_LIMIT):  # usual: nothing to replace or clamp
        return logits.float(), torch.zeros(logits.shape[:-1], dtype=torch.bool)
    bad = ~torch.isfinite(logits).all(dim=-1)
    clean = torch.nan_to_num(
        logits.float(), nan=NAN_LOGIT, posinf=POSINF_LOGIT, neginf=NEGINF_LOGIT
    ).clamp(-LOGIT_LIMIT, LOGIT_LIMIT)
    return clean, bad


def apply_repetition_penalty(
    logits: torch.Tensor, seen: torch.Tensor | None, penalty: float
) -> torch.Tensor:
    """Divide positive / multiply negative logits of already-seen tokens by ``penalty``.

    ``seen`` is a bool mask of shape ``logits.shape``: the tokens present in each row's
    context (prompt and generated so far), as in the CTRL paper.
    """
    if seen is None or penalty == 1.0:
        return logits
    penalised = torch.where(logits > 0, logits / penalty, logits * penalty)
    return torch.where(seen, penalised, logits)


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep logits >= the k-th largest of their row (ties at the threshold are kept)."""
    vocab = logits.size(-1)
    if k <= 0 or k >= vocab:
        return logits
    threshold = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < threshold, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter: keep the most likely tokens until their mass first exceeds ``p``.

    A token is removed when the probability mass strictly before it (in descending order)
    already exceeds ``p``; the most likely token is always kept.
    """
    if p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
    cumulative = torch.cumsum(torch.softmax(sorted_logits, dim=-1), dim=-1)
    remove_sorted = torch.zeros_like(cumulative, dtype=torch.bool)
    remove_sorted[..., 1:] = cumulative[..., :-1] > p
    remove = torch.zeros_like(remove_sorted).scatter(-1, order, remove_sorted)
    return logits.masked_fill(remove, float("-inf"))


def min_p_filter(logits: torch.Tensor, min_p: float) -> torch.Tensor:
    """Remove tokens whose probability is below ``min_p`` times the row's top probability."""
    if min_p <= 0.0:
        return logits
    probs = torch.softmax(logits, dim=-1)
    threshold = probs.max(dim=-1, keepdim=True).values * min_p
    return logits.masked_fill(probs < threshold, float("-inf"))


def _candidates(
    clean: torch.Tensor, params: SamplingParams, seen: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Sampling logits over each row's candidates, and the candidates' vocabulary ids.

    With top-k the candidates are the k largest logits (the filters after it then touch k
    values instead of the whole vocabulary); ids None means the whole vocabulary. When a
    row has ties at its k-th value, all of them are kept, like `top_k_filter`, by falling
    back to the whole vocabulary. Filtered entries are -inf.
    """
    out = apply_repetition_penalty(clean, seen, params.repetition_penalty)
    divisor = max(params.temperature, GREEDY_TEMPERATURE)
    if divisor != 1.0:  # x / 1.0 is x: no copy of the whole vocabulary per step
        out = out / divisor
    ids = None
    k = params.top_k
    if 0 < k < out.size(-1):
        values, indices = torch.topk(out, k, dim=-1)
        if int((out >= values[..., -1:]).sum(dim=-1).max()) > k:
            out = top_k_filter(out, k)
        else:
            out, ids = values, indices
    out = top_p_filter(out, params.top_p)
    return min_p_filter(out, params.min_p), ids


def sampling_logits(
    logits: torch.Tensor, params: SamplingParams, seen: torch.Tensor | None = None
) -> torch.Tensor:
    """Sanitised logits transformed into the sampling distribution's (unnormalised) logits.

    Order: repetition penalty, temperature, top-k, top-p, min-p. Filtered tokens are -inf.
    For greedy params only the repetition penalty applies.
    """
    if params.is_greedy:
        return apply_repetition_penalty(logits, seen, params.repetition_penalty)
    shaped, ids = _candidates(logits, params, seen)
    if ids is None:
        # At temperature 1 with nothing to filter the logits come back as they are: a copy,
        # so that the caller may change either without touching the other.
        return shaped.clone() if shaped is logits else shaped
    return torch.full_like(logits, float("-inf")).scatter(-1, ids, shaped)


def sampling_probs(
    logits: torch.Tensor, params: SamplingParams, seen: torch.Tensor | None = None
) -> torch.Tensor:
    """The probabilities tokens are drawn with (one-hot on the arg-max when greedy)."""
    clean, _ = sanitize_logits(logits)
    shaped = sampling_logits(clean, params, seen)
    if params.is_greedy:
        return F.one_hot(shaped.argmax(dim=-1), shaped.size(-1)).to(clean.dtype)
    return torch.softmax(shaped, dim=-1)


def draw_tokens(
    probs: torch.Tensor,
    generator: torch.Generator | None,
    fallback_token_id: int,
    *,
    proper: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one column per row; rows without finite positive mass take the fallback column.

    ``proper``: ``probs`` is the softmax of finite logits, so every value is finite and
    non-negative and every row has mass (its largest entry is 1 before normalising); the
    checks for the other case are skipped.

    Exponential race (arg-max of p / E with E ~ Exp(1)): exactly categorical, and much
    faster than `torch.multinomial` on CPU for a batch of rows. E is drawn as -log U from
    uniform U in [0, 1): on the CPU `exponential_` takes about five times as long (it was a
    sixth of a rollout's decoding time for the tiny model). U is kept above 0 so that E is
    finite and positive: a column with mass always beats one without.
    """
    if proper:
        collapsed = torch.zeros(probs.shape[:-1], dtype=torch.bool, device=probs.device)
    else:
        if not all_in_range(probs, 0.0, torch.finfo(torch.float32).max):
            probs = torch.nan_to_num(probs, nan=0.0, posinf=0.0, neginf=0.0).clamp(min=0.0)
        mass = probs.sum(dim=-1)
        collapsed = ~torch.isfinite(mass) | (mass <= 0)
    if not proper and bool(collapsed.any()):
        fallback = min(max(int(fallback_token_id), 0), probs.size(-1) - 1)
        probs = probs.clone()
        probs[collapsed] = 0.0
        probs[collapsed, fallback] = 1.0
    # float32 whatever the probabilities' dtype: a half-precision U would round up to 1
    # (E = 0, a sure win) far too often.
    noise = torch.empty(probs.shape, dtype=torch.float32, device=probs.device)
    noise = noise.uniform_(generator=generator).clamp_(min=torch.finfo(torch.float32).tiny)
    return (probs.float() / noise.log_().neg_()).argmax(dim=-1), collapsed


def sample_tokens(
    logits: torch.Tensor,
    params: SamplingParams,
    *,
    seen: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    fallback_token_id: int = 0,
) -> SampleResult:
    """Pick one token per row of ``logits`` (shape ``[rows, vocab]``) under ``params``."""
    clean, nonfinite = sanitize_logits(logits)
    divisor = params.logprob_temperature
    raw_logp = F.log_softmax(clean if divisor == 1.0 else clean / divisor, dim=-1)
    if params.is_greedy:
        tokens = apply_repetition_penalty(clean, seen, params.repetition_penalty).argmax(dim=-1)
        fallback = torch.zeros_like(tokens, dtype=torch.bool)
        sample_logps = torch.zeros(tokens.shape, dtype=raw_logp.dtype, device=tokens.device)
    else:
        shaped, ids = _candidates(clean, params, seen)
        # No penalty, temperature 1 and no filter: the sampling distribution is the raw one.
        raw = shaped is clean
        if ids is None:
            probs = torch.softmax(shaped, dim=-1)
            choice, fallback = draw_tokens(probs, generator, fallback_token_id, proper=raw)
            tokens = choice
        else:
            # The fallback token need not be a candidate: draw over [candidates, fallback].
            fb = torch.full_like(ids[..., :1], int(fallback_token_id))
            shaped = torch.cat([shaped, torch.full_like(shaped[..., :1], float("-inf"))], -1)
            ids = torch.cat([ids, fb], dim=-1)
            choice, fallback = draw_tokens(
                torch.softmax(shaped, dim=-1), generator, fallback_token_id=ids.size(-1) - 1
            )
            tokens = ids.gather(-1, choice.unsqueeze(-1)).squeeze(-1)
        # The same log-softmax of the same logits as raw_logp when nothing reshaped them.
        shaped_logp = raw_logp if raw and divisor == 1.0 else F.log_softmax(shaped, dim=-1)
        sample_logps = shaped_logp.gather(-1, choice.unsqueeze(-1)).squeeze(-1)
        if not raw:  # a row whose distribution collapsed took the fallback token
            sample_logps = torch.where(fallback, torch.zeros_like(sample_logps), sample_logps)
    logps = raw_logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return SampleResult(tokens, logps, sample_logps, nonfinite, fallback)


def seen_mask(
    rows: Sequence[Sequence[int]], vocab_size: int, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """Bool ``[len(rows), vocab_size]``: which in-vocabulary ids occur in each row."""
    mask = torch.zeros((len(rows), vocab_size), dtype=torch.bool, device=device)
    for r, ids in enumerate(rows):
        valid = [t for t in ids if 0 <= t < vocab_size]
        if valid:
            mask[r, torch.tensor(valid, dtype=torch.long, device=device)] = True
    return mask


__all__ = [
    "LOGIT_LIMIT",
    "SampleResult",
    "SamplingParams",
    "apply_repetition_penalty",
    "min_p_filter",
    "sample_tokens",
    "sampling_logits",
    "sampling_probs",
    "sanitize_logits",
    "seen_mask",
    "top_k_filter",
    "top_p_filter",
]
