"""Training log-probs at trained positions only: every path equals full-vocabulary
log-softmax over all positions (values, entropies, gradients), chunked or not."""

from __future__ import annotations

import copy

import pytest
import torch
from agentrl.models.tiny import build_model
from agentrl.rl import logprobs
from agentrl.rl.logprobs import linear_token_logps, sanitize_logits, token_logps
from agentrl.training.forward import masked_logps, split_output_layer

from tests.fakes.models import SMALL_SPEC


@pytest.fixture(scope="module")
def tiny(small_tokenizer):
    torch.manual_seed(0)
    return build_model(SMALL_SPEC, len(small_tokenizer))


def _rows(vocab: int):
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, vocab, (3, 14), generator=gen)
    attn = torch.ones_like(ids)
    attn[2, 10:] = 0
    mask = torch.zeros(3, 13)
    mask[0, 5:] = 1
    mask[1, 2:9] = 1
    mask[2, 6:9] = 1
    return ids, attn, mask


def full_vocabulary(model, ids, attn, temperature=1.0):
    """Log-probs and entropies the plain way: full logits, float32 log-softmax everywhere."""
    logits = sanitize_logits(model(input_ids=ids, attention_mask=attn).logits[:, :-1])
    logp = torch.log_softmax(logits / temperature, dim=-1)
    picked = logp.gather(2, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(-1).detach()
    return picked, entropy


def _grads(model, loss):
    model.zero_grad()
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _check_same(model, forward, ids, attn, mask, temperature=1.0):
    """``forward`` gives the plain values, entropies and gradients within 1e-5."""
    weights = torch.linspace(-1.0, 2.0, mask.numel()).view_as(mask) * mask
    want, want_entropy = full_vocabulary(model, ids, attn, temperature)
    want_grads = _grads(model, (want * weights).sum())
    out = forward(model, ids, attn, mask, with_entropy=True, temperature=temperature)
    torch.testing.assert_close(out.logps * mask, want * mask, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.entropy * mask, want_entropy * mask, rtol=1e-5, atol=1e-5)
    assert bool((out.logps[mask == 0] == 0).all())
    got_grads = _grads(model, (out.logps * weights).sum())
    assert got_grads.keys() == want_grads.keys()
    for name, grad in want_grads.items():
        torch.testing.assert_close(got_grads[name], grad, rtol=1e-5, atol=1e-5, msg=name)


@pytest.mark.parametrize("slice_tokens", [0, 4])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_split_path_equals_the_full_vocabulary(tiny, monkeypatch, slice_tokens, temperature):
    if slice_tokens:  # 4 tokens per slice: the 17 trained positions take 5 slices
        monkeypatch.setattr(logprobs, "CHUNK_ELEMENTS", tiny.config.vocab_size * slice_tokens)
    model = copy.deepcopy(tiny).train()
    assert split_output_layer(model) is not None
    _check_same(model, masked_logps, *_rows(tiny.config.vocab_size), temperature=temperature)


class _WrappedHead(torch.nn.Linear):
    """A head subclass: the split is not trusted, so the head-hook path runs."""


def test_head_hook_path_equals_the_full_vocabulary(tiny, monkeypatch):
    monkeypatch.setattr(logprobs, "CHUNK_ELEMENTS", tiny.config.vocab_size * 5)
    model = copy.deepcopy(tiny).train()
    old = model.lm_head
    head = _WrappedHead(old.in_features, old.out_features, bias=False)
    head.weight = old.weight  # still tied to the embeddings
    model.lm_head = head
    assert split_output_layer(model) is None
    seen = []
    head.register_forward_hook(lambda _m, args, out: seen.append((args[0].shape, out.shape)))
    ids, attn, mask = _rows(tiny.config.vocab_size)
    masked_logps(model, ids, attn, mask)
    trained = int(mask.sum())
    assert seen == [((trained, tiny.config.hidden_size), (trained, tiny.config.vocab_size))]
    _check_same(model, masked_logps, ids, attn, mask, temperature=0.7)


class _NoHead(torch.nn.Module):
    """A model that exposes only its forward: the full-logits path."""

    def __init__(self, model):
        super().__init__()
        self.inner = model

    def forward(self, **kwargs):
        return self.inner(**kwargs)


def test_full_logits_path_equals_the_full_vocabulary(tiny):
    model = _NoHead(copy.deepcopy(tiny).train())
    assert split_output_layer(model) is None
    _check_same(model, masked_logps, *_rows(tiny.config.vocab_size))


def test_sanitised_logits_get_the_plain_gradient():
    """NaN, inf and out-of-range logits: same values and gradients as autograd through
    ``sanitize_logits``, for the slice-wise logits and the fused linear versions."""
    gen = torch.Generator().manual_seed(2)
    logits = torch.randn(7, 11, generator=gen) * 30
    logits[0, 3], logits[1, 4], logits[2, 5], logits[3, 0] = float("nan"), float("inf"), -1e4, 95
    targets = torch.tensor([3, 4, 5, 0, 1, 2, 10])
    upstream = torch.randn(7, generator=gen)

    def plain(x):
        logp = torch.log_softmax(sanitize_logits(x) / 0.5, dim=-1)
        return logp.gather(1, targets.unsqueeze(1)).squeeze(1)

    leaf = logits.clone().requires_grad_(True)
    want = plain(leaf)
    (want * upstream).sum().backward()
    mine = logits.clone().requires_grad_(True)
    got, _ = token_logps(mine, targets, temperature=0.5, chunk=3)
    (got * upstream).sum().backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(mine.grad, leaf.grad)

    hidden = torch.randn(7, 5, generator=gen, requires_grad=True)
    weight = (torch.randn(11, 5, generator=gen) * 20).requires_grad_(True)
    want = plain(hidden @ weight.t())
    want_grads = torch.autograd.grad((want * upstream).sum(), (hidden, weight))
    got, _ = linear_token_logps(hidden, weight, targets, temperature=0.5, chunk=2)
    got_grads = torch.autograd.grad((got * upstream).sum(), (hidden, weight))
    torch.testing.assert_close(got, want)
    for g, w in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("keep_bytes", [0, 1 << 29])
def test_no_vocabulary_wide_tensor_is_kept_for_the_backward_beyond_the_budget(
    tiny, monkeypatch, keep_bytes
):
    """The split path saves hidden states and one number per token, and vocabulary-wide
    probabilities only within `KEEP_PROBS_BYTES` (a CPU's budget; 0: never)."""
    monkeypatch.setattr(logprobs, "CHUNK_ELEMENTS", tiny.config.vocab_size * 4)
    monkeypatch.setattr(logprobs, "KEEP_PROBS_BYTES", keep_bytes)
    model = copy.deepcopy(tiny).train()
    ids, attn, mask = _rows(tiny.config.vocab_size)
    saved = []

    def pack(tensor):
        saved.append(tuple(tensor.shape))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = masked_logps(model, ids, attn, mask, with_entropy=True)
    wide = [
        s
        for s in saved
        if s
        and s[-1] == tiny.config.vocab_size
        and len(s) > 1
        and s != tuple(model.lm_head.weight.shape)
    ]
    if keep_bytes:  # each slice of 4 trained tokens' probabilities, and nothing else
        assert wide and all(s == (4, tiny.config.vocab_size) for s in wide[:-1]), wide
        assert sum(s[0] for s in wide) == int(mask.sum())
    else:
        assert not wide, wide
    out.logps.sum().backward()  # and the gradient still flows
    assert model.lm_head.weight.grad is not None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_kept_probabilities_give_the_recomputed_gradients(monkeypatch, dtype, temperature):
    """The backward from the forward's kept probabilities equals the one that runs the
    output layer again: the same bits in float32; in bfloat16 as close to the exact
    (float64) gradient as that one, row by row, a confident target's row included (its
    1 - p comes from the float32 log-prob, not from p rounded to 8 bits)."""
    gen = torch.Generator().manual_seed(5)
    hidden = torch.randn(37, 16, generator=gen).to(dtype)
    weight = (torch.randn(300, 16, generator=gen) * 0.5).to(dtype)
    weight[7] *= 12  # a column that wins almost every row: p close to 1 at its targets
    targets = torch.randint(0, 300, (37,), generator=gen)
    targets[::3] = 7
    upstream = torch.randn(37, generator=gen)

    def run(keep_bytes):
        monkeypatch.setattr(logprobs, "KEEP_PROBS_BYTES", keep_bytes)
        h, w = hidden.clone().requires_grad_(True), weight.clone().requires_grad_(True)
        logps, _ = linear_token_logps(h, w, targets, temperature=temperature, chunk=8)
        (logps * upstream).sum().backward()
        return logps.detach(), h.grad, w.grad

    kept, again = run(1 << 29), run(0)
    torch.testing.assert_close(kept[0], again[0], rtol=0, atol=0)
    h, w = hidden.double().requires_grad_(True), weight.double().requires_grad_(True)
    exact = torch.log_softmax(h @ w.t() / temperature, dim=-1)
    (exact.gather(1, targets.unsqueeze(1)).squeeze(1) * upstream.double()).sum().backward()
    for got, want, truth in zip(kept[1:], again[1:], (h.grad, w.grad), strict=True):
        if dtype == torch.float32:
            torch.testing.assert_close(got, want, rtol=0, atol=0)
        else:
            size = truth.norm(dim=1)
            error, error_again = ((g.double() - truth).norm(dim=1) for g in (got, want))
            assert bool((error <= 2 * (error_again + 0.01 * size)).all()), error / size
    assert bool(((targets == 7) & (kept[0].exp() > 0.99)).any())  # such rows exist


def test_bfloat16_weights_give_bfloat16_gradients(tiny):
    model = copy.deepcopy(tiny).to(torch.bfloat16).train()
    ids, attn, mask = _rows(tiny.config.vocab_size)
    out = masked_logps(model, ids, attn, mask)
    assert out.logps.dtype == torch.float32 and bool(torch.isfinite(out.logps).all())
    out.logps.sum().backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and g.dtype == torch.bfloat16 for g in grads)


@pytest.mark.filterwarnings("ignore:Model has `tie_word_embeddings=True`")  # adapting lm_head
@pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing:FutureWarning")  # peft asks
@pytest.mark.parametrize("targets", ["q_proj,v_proj", "q_proj,lm_head"])
def test_lora_policy_and_reference_equal_the_full_vocabulary(tiny, targets):
    """peft models take the split (base decoder, adapters inside) or, with an adapted
    head, the head-hook path; the reference view is the base model with the adapter off."""
    pytest.importorskip("peft", reason="LoRA needs peft")
    from agentrl.models import lora

    base = copy.deepcopy(tiny)
    policy = lora.apply_lora(base, lora.LoraSettings(rank=4, alpha=8, target_modules=targets))
    with torch.no_grad():  # a trained-looking adapter, so adapter on/off differ
        for name, param in policy.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.05, generator=torch.Generator().manual_seed(3))
    policy.train()
    assert (split_output_layer(policy) is None) == ("lm_head" in targets)
    ids, attn, mask = _rows(tiny.config.vocab_size)
    _check_same(policy, masked_logps, ids, attn, mask)
    reference = lora.ReferenceView(policy)
    assert (split_output_layer(reference) is None) == ("lm_head" in targets)
    with torch.no_grad():
        want, _ = full_vocabulary(copy.deepcopy(tiny), ids, attn)
        got = masked_logps(reference, ids, attn, mask).logps
        on = masked_logps(policy, ids, attn, mask).logps
    torch.testing.assert_close(got * mask, want * mask, rtol=1e-5, atol=1e-5)
    assert float(((on - got) * mask).abs().max()) > 1e-4  # the adapter did change the policy
    assert policy.training  # the view puts the policy back in training mode


def _grouped_rows(vocab: int):
    """Five rows over two prompts (7 and 10 tokens), responses of 2-6 tokens, right-padded."""
    gen = torch.Generator().manual_seed(4)
    prompts = [torch.randint(3, vocab, (n,), generator=gen).tolist() for n in (7, 10)]
    plan = [(0, 4), (1, 3), (0, 6), (1, 5), (0, 2)]
    rows = [prompts[p] + torch.randint(3, vocab, (r,), generator=gen).tolist() for p, r in plan]
    width = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    attn = torch.zeros_like(ids)
    mask = torch.zeros(len(rows), width - 1)
    for i, ((p, _), row) in enumerate(zip(plan, rows, strict=True)):
        ids[i, : len(row)] = torch.tensor(row)
        attn[i, : len(row)] = 1
        mask[i, len(prompts[p]) - 1 : len(row) - 1] = 1
    return ids, attn, mask, [prompts[p] for p, _ in plan], [len(r) for r in rows]


def test_shared_prompts_run_once_with_the_same_values_and_gradients(tiny):
    from agentrl.training.forward import shared_prefixes

    model = copy.deepcopy(tiny).train()
    ids, attn, mask, prompts, lengths = _grouped_rows(tiny.config.vocab_size)
    plan = shared_prefixes(prompts, lengths)
    assert plan is not None and plan.owner == (0, 1) and plan.rows == (0, 1, 0, 1, 0)
    assert plan.lengths == (6, 9) and plan.continuation == 7  # 6 tokens + the prompt's last
    seen = []
    hook = model.model.register_forward_pre_hook(
        lambda _m, _a, kw: seen.append(tuple(kw["input_ids"].shape)), with_kwargs=True
    )

    def shared(*args, **kwargs):
        return masked_logps(*args, prefixes=plan, **kwargs)

    _check_same(model, shared, ids, attn, mask, temperature=0.7)
    hook.remove()
    # the full-vocabulary reference runs the rows whole; the shared forward runs the two
    # prompts (less their last token), then every row's continuation (at most 7 tokens)
    assert (2, 9) in seen and (5, 7) in seen


def test_rows_that_share_nothing_get_no_plan():
    from agentrl.training.forward import shared_prefixes

    assert shared_prefixes([[1, 2, 3], [4, 5, 6]], [5, 5]) is None  # one row per prompt
    assert shared_prefixes([[1, 2, 3], [1, 2, 3], None], [5, 5, 5]) is None  # a truncated row
    plan = shared_prefixes([[1, 2, 3]] * 3 + [[1, 2, 9]], [4, 8, 5, 6])
    assert plan.rows == (0, 0, 0, 0) and plan.continuation == 6


def test_offloaded_reference_takes_the_head_hook(tiny):
    from agentrl.training.memory import OffloadedReference

    model = copy.deepcopy(tiny).eval()
    wrapped = OffloadedReference(copy.deepcopy(model), torch.device("cpu"))
    assert split_output_layer(wrapped) is None
    ids, attn, mask = _rows(tiny.config.vocab_size)
    calls = []
    wrapped.model.lm_head.register_forward_hook(lambda _m, a, _o: calls.append(a[0].shape))
    with torch.no_grad():
        got = masked_logps(wrapped, ids, attn, mask).logps
        want = masked_logps(model, ids, attn, mask).logps
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert calls == [(int(mask.sum()), tiny.config.hidden_size)]  # trained positions only
