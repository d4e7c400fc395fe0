"""The policy loss against the GRPO reference trainer's own loss code, run at test time.

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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))
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
pytestmark = pytest.mark.skipif(
    REFERENCE is None,
    reason=f"needs the GRPO reference trainer outside the repo: ../shared/seeds/{PATTERN} "
    "(or a folder named by AGENTRL_REFERENCE_DIR)",
)

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
