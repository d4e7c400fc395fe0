"""Memory options: gradient checkpointing, no reference copy with KL off, the reference on
the CPU, and the peak-memory metric.

How activation memory is measured: `torch.autograd.graph.saved_tensors_hooks` sees every
tensor autograd keeps for backward outside checkpointed regions; the test adds up the
bytes of their distinct storages during one forward. That is the activation memory the
backward pass holds at its peak, without depending on the CPU allocator's caching (RSS
moves in pages and is never given back, so it cannot compare two passes in one process).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from agentrl.training.memory import (
    OffloadedReference,
    enable_gradient_checkpointing,
    peak_memory_mb,
)


def _model_20m() -> torch.nn.Module:
    from agentrl.models.tiny import TinySpec, build_model

    size = TinySpec(
        hidden_size=512,
        intermediate_size=1408,
        num_layers=6,
        num_heads=8,
        num_kv_heads=4,
        head_dim=64,
        max_positions=1024,
    )
    return build_model(size, 3072)


def _saved_bytes_and_grads(model: torch.nn.Module, ids: torch.Tensor) -> tuple[int, list[Any]]:
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    model.zero_grad(set_to_none=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logits = model(input_ids=ids).logits
    parameter_bytes = {p.untyped_storage().data_ptr() for p in model.parameters()}
    activations = sum(n for ptr, n in storages.items() if ptr not in parameter_bytes)
    logits.float().log_softmax(-1).mean().backward()
    return activations, [p.grad.clone() for p in model.parameters()]


@pytest.mark.slow
def test_gradient_checkpointing_saves_less_for_the_same_gradient():
    torch.manual_seed(0)
    model = _model_20m()
    model.train()
    assert 15e6 < sum(p.numel() for p in model.parameters()) < 30e6
    ids = torch.randint(0, 3072, (2, 256), generator=torch.Generator().manual_seed(1))
    plain_bytes, plain_grads = _saved_bytes_and_grads(model, ids)
    enable_gradient_checkpointing(model)
    ckpt_bytes, ckpt_grads = _saved_bytes_and_grads(model, ids)
    # Six layers' intermediates down to their inputs: several times less.
    assert ckpt_bytes * 3 < plain_bytes, (plain_bytes, ckpt_bytes)
    for a, b in zip(plain_grads, ckpt_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_a_model_without_checkpointing_support_is_an_error():
    with pytest.raises(ValueError, match="does not support activation checkpointing"):
        enable_gradient_checkpointing(torch.nn.Linear(2, 2))


def test_offloaded_reference_matches_and_stays_on_the_cpu(small_tokenizer):
    from tests.fakes.models import tiny_model

    model = tiny_model().eval()
    wrapped = OffloadedReference(model, torch.device("cpu"))
    ids = torch.tensor([[1, 2, 3, 4]])
    torch.testing.assert_close(wrapped(input_ids=ids).logits, model(input_ids=ids).logits)
    assert list(wrapped.state_dict()) == list(model.state_dict())  # no wrapper prefix
    assert all(p.device.type == "cpu" for p in wrapped.parameters())


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (CUDA)")
def test_offloaded_reference_visits_the_gpu_and_returns():
    from tests.fakes.models import tiny_model

    model = tiny_model().eval()
    wrapped = OffloadedReference(model, torch.device("cuda"))
    ids = torch.tensor([[1, 2, 3, 4]], device="cuda")
    out = wrapped(input_ids=ids).logits
    assert out.device.type == "cuda"
    assert all(p.device.type == "cpu" for p in wrapped.parameters())


def test_peak_memory_is_reported_on_the_cpu():
    assert peak_memory_mb(torch.device("cpu")) > 10  # a Python process with torch loaded


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (CUDA)")
def test_cuda_peak_memory_follows_allocations():
    device = torch.device("cuda")
    peak_memory_mb(device)  # reset
    block = torch.empty(64 * 2**20, dtype=torch.uint8, device=device)
    assert peak_memory_mb(device) >= 64
    del block


@pytest.mark.slow
def test_load_models_memory_options(run_files, tmp_path):
    from agentrl.assembly.models import load_models

    from tests.fakes.runs import short_run_config

    def models(**overrides: Any) -> Any:
        cfg = short_run_config(run_files, tmp_path, "mem", **overrides)
        return load_models(cfg, lambda message: None)

    default = models(beta=0.03)
    assert default.reference is not default.policy
    assert not default.policy.is_activation_checkpointing
    no_kl = models(beta=0.0, beta_auto_tune=0, gradient_checkpointing=1)
    assert no_kl.reference is no_kl.policy  # no second copy of the weights
    assert no_kl.policy.is_activation_checkpointing
    auto = models(beta=0.0, beta_auto_tune=1)  # beta 0 that may grow still needs one
    assert auto.reference is not auto.policy


def test_fsdp_outside_torchrun_is_an_error(run_files, tmp_path):
    from agentrl.placement import placement_for
    from agentrl.trainer import Trainer

    from tests.fakes.runs import short_run_config

    cfg = short_run_config(run_files, tmp_path, "fsdp", fsdp=1, multi_gpu_mode="ddp")
    with pytest.raises(ValueError, match="torchrun"):
        placement_for(cfg)
    with pytest.raises(ValueError, match="torchrun"):
        Trainer(cfg)
    split = short_run_config(run_files, tmp_path, "fsdp", fsdp=1, multi_gpu_mode="trainer_rollout")
    with pytest.raises(ValueError, match="multi_gpu_mode ddp"):
        placement_for(split)
