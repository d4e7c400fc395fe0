"""The policy loss against the reference trainers' own loss code, run at test time (the
GRPO trainer's objective first; the agent trainer's ``compute_async_loss`` below).

The reference (``../shared/seeds/003_*.txt`` beside the checkout, or the folder named by
``AGENTRL_REFERENCE_DIR``) computes its objective with MLX, which this machine does not
have. Its objective functions (``_grpo_objective``, ``compute_log_importance_weights`` and
the KL bound they use) are parsed out of that file and executed unchanged with ``mx``
bound to a small stand-in that runs each MLX call it makes on torch tensors, so torch's
autograd gives the gradients of the reference's own formula. Nothing from the file is
copied here.

Every mode both implement is compared on random tensors: the reductions ``grpo``,
``bnpo`` and ``dr_grpo`` at token and sequence (GSPO) importance level, with and without
the KL term (k3 to a reference policy). The reference is on-policy (the ratio's
denominator is the current log-probs, detached), so agentrl runs plain PPO with the
behaviour log-probs equal to the current ones.
"""

from __future__ import annotations

import ast
import sys
import types
from pathlib import Path

import pytest
import torch
from agentrl.rl.losses import LossConfig, policy_loss

from tests.fakes.repo import BENCHES, needs_reference

sys.path.insert(0, str(BENCHES))
from reference_baseline import reference_path

PATTERN = "003_*.txt"
WANTED = ("_MAX_KL_LOG_RATIO", "compute_log_importance_weights", "_grpo_objective")


class MxArray(torch.Tensor):
    """A torch tensor with the one MLX array method the objective calls."""

    def astype(self, dtype: torch.dtype) -> MxArray:
        return self.to(dtype)


def _tensor(value: object, like: torch.Tensor) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    return torch.as_tensor(value, dtype=like.dtype, device=like.device)


def _maximum(a: torch.Tensor, b: object) -> torch.Tensor:
    return torch.maximum(a, _tensor(b, a))


def _minimum(a: torch.Tensor, b: object) -> torch.Tensor:
    return torch.minimum(a, _tensor(b, a))


def _where(cond: torch.Tensor, a: object, b: object) -> torch.Tensor:
    like = a if isinstance(a, torch.Tensor) else b
    assert isinstance(like, torch.Tensor)
    return torch.where(cond.bool(), _tensor(a, like), _tensor(b, like))


MX = types.SimpleNamespace(
    compile=lambda fn: fn,
    float32=torch.float32,
    where=_where,
    stop_gradient=lambda x: x.detach(),
    exp=torch.exp,
    expm1=torch.expm1,
    clip=lambda x, lo, hi: torch.clamp(x, lo, hi),
    minimum=_minimum,
    maximum=_maximum,
    expand_dims=lambda x, axis: x.unsqueeze(axis),
)


def load_objective() -> dict[str, object] | None:
    path = reference_path(PATTERN)
    if path is None:
        return None
    namespace: dict[str, object] = {"mx": MX, "__name__": "reference_grpo"}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        names = [getattr(node, "name", None)]
        if isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        if any(n in WANTED for n in names):
            module = ast.Module(body=[node], type_ignores=[])
            exec(compile(module, str(path), "exec"), namespace)
    missing = [n for n in WANTED if n not in namespace]
    assert not missing, f"{path}: no {missing} in the reference file"
    return namespace


REFERENCE = load_objective()
pytestmark = needs_reference(REFERENCE, "the GRPO reference trainer", PATTERN)

MAX_TOKENS = 7
BETA = 0.04


def batch(seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    rows, length = 4, 6
    mask = torch.zeros(rows, length, dtype=torch.bool)
    for i, n in enumerate([6, 2, 4, 5]):
        mask[i, length - n if i % 2 else 0 :][:n] = True
    logps = -torch.rand(rows, length, generator=g, dtype=torch.float64) * 3
    ref = logps + 0.3 * torch.randn(rows, length, generator=g, dtype=torch.float64)
    advantages = torch.randn(rows, generator=g, dtype=torch.float64)
    return logps, ref, mask, advantages


def reference_loss(logps, ref, mask, advantages, level, mode, beta):
    leaf = logps.clone().requires_grad_()
    loss, total, _ = REFERENCE["_grpo_objective"](  # type: ignore[index,operator]
        leaf.as_subclass(MxArray),
        ref.as_subclass(MxArray),
        mask,
        advantages.as_subclass(MxArray),
        beta,
        0.2,
        0.28,
        MAX_TOKENS,
        level,
        mode,
    )
    loss.backward()
    return loss.detach(), total, leaf.grad


def agentrl_loss(logps, ref, mask, advantages, level, mode, beta):
    leaf = logps.clone().requires_grad_()
    config = LossConfig(
        epsilon=0.2,
        epsilon_high=0.28,
        use_decoupled_ppo=False,
        loss_reduction=mode,
        importance_sampling_level=level,
        kl_estimator="k3",
        max_completion_length=MAX_TOKENS,
    )
    out = policy_loss(
        leaf,
        leaf.detach(),
        advantages,
        mask.to(leaf.dtype),
        config,
        beta=beta,
        ref_logps=ref if beta else None,
    )
    out.loss.backward()
    return out.loss.detach(), out.denominator, leaf.grad


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("beta", [0.0, BETA])
@pytest.mark.parametrize("level", ["token", "sequence"])
@pytest.mark.parametrize("mode", ["grpo", "bnpo", "dr_grpo"])
def test_loss_denominator_and_gradients_match_the_reference(mode, level, beta, seed) -> None:
    logps, ref, mask, advantages = batch(seed)
    want_loss, tokens, want_grad = reference_loss(logps, ref, mask, advantages, level, mode, beta)
    loss, denominator, grad = agentrl_loss(logps, ref, mask, advantages, level, mode, beta)
    torch.testing.assert_close(loss, want_loss.to(loss.dtype), rtol=1e-6, atol=1e-9)
    torch.testing.assert_close(grad, want_grad, rtol=1e-6, atol=1e-9)
    # The reference divides by: the row count (grpo), its returned token total (bnpo),
    # rows x max_tokens (dr_grpo).
    rows = logps.shape[0]
    expected = {"grpo": rows, "bnpo": float(max(int(tokens), 1)), "dr_grpo": rows * MAX_TOKENS}
    assert float(tokens) == float(mask.sum())
    assert float(denominator) == float(expected[mode])


def test_the_stand_in_runs_the_reference_code_not_a_copy() -> None:
    objective = REFERENCE["_grpo_objective"]  # type: ignore[index]
    assert Path(objective.__code__.co_filename).name.startswith("003_")  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="Unknown loss type"):
        logps, ref, mask, advantages = batch(0)
        objective(
            logps.as_subclass(MxArray),
            ref.as_subclass(MxArray),
            mask,  # type: ignore[operator]
            advantages.as_subclass(MxArray),
            0.0,
            0.2,
            0.2,
            7,
            "token",
            "dapo",
        )


# ---------------------------------------------------------------- the reference agent trainer
#
# Its loss is the body of ``compute_async_loss`` (``../shared/seeds/000_*.txt``), a torch
# function over a model, a reference model and a packed batch. It is run as it is, with a
# stand-in model that returns fixed logits (a leaf tensor, so its gradient is the loss's
# gradient through the log-probs) and two of its calls replaced: ``calculate_rewards``
# returns given rewards (the rewards are checked against the reference elsewhere) and
# ``compute_bc_aux_loss`` returns no BC term. Its own ``build_advantages`` runs, and its
# advantages are handed to agentrl's loss. Modes compared: plain and decoupled PPO (the
# proximal log-probs ``loglinear`` and ``behavior``), with the behaviour-weight cap and the
# M2 mask, ``loss_reduction`` token and sequence, staleness discounts, the k3 KL term.

from contextlib import nullcontext  # noqa: E402

from reference_baseline import load_reference, reference_arguments  # noqa: E402

AGENT = load_reference()
agent_only = needs_reference(AGENT, "the reference agent trainer")
VOCAB, ROWS, LENGTH, G = 11, 4, 7, 2


class FixedLogits(torch.nn.Module):
    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = logits

    def forward(self, input_ids, attention_mask):
        return types.SimpleNamespace(logits=self.logits, aux_loss=torch.tensor(0.0))


def agent_batch(seed: int):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, VOCAB, (ROWS, LENGTH), generator=g)  # no pad (0), no EOS (1)
    response = torch.zeros(ROWS, LENGTH)
    for i, start in enumerate([2, 3, 2, 4]):
        response[i, start:] = 1.0
    response[1, 5] = 0.0  # a tool observation inside the response
    logits = torch.randn(ROWS, LENGTH, VOCAB, generator=g, dtype=torch.float64)
    ref_logits = logits + 0.3 * torch.randn(ROWS, LENGTH, VOCAB, generator=g, dtype=torch.float64)
    current = torch.log_softmax(logits[:, :-1], -1).gather(2, ids[:, 1:, None]).squeeze(-1)
    old = current + 0.2 * torch.randn(ROWS, LENGTH - 1, generator=g, dtype=torch.float64)
    old = old.clamp(max=0.0) * response[:, 1:]
    versions = torch.where(
        response[:, 1:] > 0, torch.randint(0, 3, (ROWS, LENGTH - 1), generator=g), -1
    )
    rewards = torch.tensor([1.0, -0.5, 2.0, 0.25], dtype=torch.float64)
    return ids, response, logits, ref_logits, old, versions, rewards


def reference_agent_loss(seed: int, mode: dict, current_version: int):
    ids, response, logits, ref_logits, old, versions, rewards = agent_batch(seed)
    namespace = AGENT
    assert namespace is not None
    captured: dict[str, torch.Tensor] = {}
    original = namespace["build_advantages"]

    def build_advantages(args, values, num_generations):
        out = original(args, values, num_generations)
        captured["advantages"] = out[0].detach()
        return out

    namespace.update(
        torch=torch,
        F=torch.nn.functional,
        nullcontext=nullcontext,
        DistributedDataParallel=torch.nn.parallel.DistributedDataParallel,
        calculate_rewards=lambda *a, **k: (rewards.clone(), [{} for _ in range(ROWS)]),
        compute_bc_aux_loss=lambda *a, **k: (torch.tensor(0.0), {}),
        build_advantages=build_advantages,
    )
    args = reference_arguments(namespace)
    args.device, args.current_version, args.num_generations = "cpu", current_version, G
    args.beta, args.epsilon, args.async_stale_discount = 0.04, 0.2, 0.65
    for key, value in mode.items():
        setattr(args, key, value)
    leaf = logits.clone().requires_grad_()
    batch = {
        "input_ids": ids,
        "full_response_masks": response,
        "old_per_token_logps": old,
        "per_token_versions": versions,
        "trajectory_versions": [0, 0, 1, 1],
        "versions": [0, 1],
        "prompts": [""] * ROWS,
        "completions": [""] * ROWS,
        "gt_batch": [[]] * ROWS,
        "tools_batch": [None] * ROWS,
        "tool_events_batch": [[]] * ROWS,
        "unfinished_batch": [False] * ROWS,
        "messages_batch": [[]] * ROWS,
    }
    tokenizer = types.SimpleNamespace(pad_token_id=0, eos_token_id=1)
    try:
        loss, _, _ = namespace["compute_async_loss"](
            args,
            batch,
            FixedLogits(leaf),
            FixedLogits(ref_logits),
            None,
            tokenizer,
            nullcontext,
            types.SimpleNamespace(use_moe=False),
            None,
        )
    finally:
        namespace["build_advantages"] = original
    loss.backward()
    return loss.detach(), leaf.grad, captured["advantages"]


def agentrl_agent_loss(seed: int, mode: dict, current_version: int, advantages):
    ids, response, logits, ref_logits, old, versions, _ = agent_batch(seed)
    leaf = logits.clone().requires_grad_()
    logps = torch.log_softmax(leaf[:, :-1], -1).gather(2, ids[:, 1:, None]).squeeze(-1)
    ref = torch.log_softmax(ref_logits[:, :-1], -1).gather(2, ids[:, 1:, None]).squeeze(-1)
    config = LossConfig(
        epsilon=0.2,
        use_decoupled_ppo=mode["use_decoupled_ppo"],
        prox_logp_method=mode["prox_logp_method"],
        behav_imp_weight_cap=mode["behav_imp_weight_cap"],
        m2_threshold=mode["m2_threshold"],
        loss_reduction=mode["loss_reduction"],
        kl_estimator="k3",
    )
    staleness = current_version - torch.tensor([0, 0, 1, 1], dtype=torch.float64)
    out = policy_loss(
        logps,
        old,
        advantages,
        response[:, 1:].to(logps.dtype),
        config,
        beta=0.04,
        ref_logps=ref,
        token_versions=versions,
        current_version=current_version,
        row_weights=0.65 ** staleness.clamp(min=0),
    )
    out.loss.backward()
    return out.loss.detach(), leaf.grad


AGENT_MODES = {
    "plain_token": dict(
        use_decoupled_ppo=False,
        prox_logp_method="loglinear",
        behav_imp_weight_cap=1.5,
        m2_threshold=0.0,
        loss_reduction="token",
    ),
    "plain_sequence": dict(
        use_decoupled_ppo=False,
        prox_logp_method="loglinear",
        behav_imp_weight_cap=1.5,
        m2_threshold=0.0,
        loss_reduction="sequence",
    ),
    "decoupled_loglinear": dict(
        use_decoupled_ppo=True,
        prox_logp_method="loglinear",
        behav_imp_weight_cap=1.5,
        m2_threshold=0.0,
        loss_reduction="sequence",
    ),
    "decoupled_behavior_token": dict(
        use_decoupled_ppo=True,
        prox_logp_method="behavior",
        behav_imp_weight_cap=1.5,
        m2_threshold=0.0,
        loss_reduction="token",
    ),
    "decoupled_no_cap_m2": dict(
        use_decoupled_ppo=True,
        prox_logp_method="loglinear",
        behav_imp_weight_cap=0.0,
        m2_threshold=0.01,
        loss_reduction="token",
    ),
}


@agent_only
@pytest.mark.parametrize("current_version", [1, 3])
@pytest.mark.parametrize("name", sorted(AGENT_MODES))
def test_agent_loss_and_gradients_match_the_reference_agent_trainer(name, current_version):
    mode = AGENT_MODES[name]
    want_loss, want_grad, advantages = reference_agent_loss(0, mode, current_version)
    loss, grad = agentrl_agent_loss(0, mode, current_version, advantages.to(torch.float64))
    torch.testing.assert_close(loss, want_loss.to(loss.dtype), rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(grad, want_grad.to(grad.dtype), rtol=1e-5, atol=1e-7)
    assert float(grad.abs().sum()) > 0
