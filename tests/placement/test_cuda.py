"""The CUDA path: a training run in bf16 and generation on an NVIDIA GPU.

Marked ``cuda``: skipped (with the reason) where no GPU is present; `benches/gpu_check.sh`
runs them on a GPU machine and fails if any is skipped there.
"""

from __future__ import annotations

import math

import pytest
import torch

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (CUDA)"),
]


def test_engine_greedy_on_cuda_matches_the_cpu():
    from agentrl.rollout import SamplingParams
    from agentrl.rollout.engine import TorchEngine

    from tests.fakes.models import tiny_model, tiny_tokenizer

    tok = tiny_tokenizer()
    prompt = tok("what is 2 + 3?", add_special_tokens=False)["input_ids"]
    greedy = SamplingParams(temperature=0.0, max_new_tokens=12)
    outs = []
    for device in ("cpu", "cuda"):
        model = tiny_model().to(device).eval()
        engine = TorchEngine(model, tok, device=torch.device(device), seed=0)
        outs.append(engine.generate([prompt], greedy)[0].token_ids)
    assert outs[0] == outs[1] and len(outs[0]) > 0


def test_short_rl_run_on_cuda_in_bf16(run_files, tmp_path):
    from agentrl.observability import read_metrics
    from agentrl.trainer import run_training

    from tests.fakes.runs import short_run_config

    cfg = short_run_config(
        run_files,
        tmp_path,
        "cuda",
        device="cuda",
        dtype="bfloat16",
        total_steps=2,
        gradient_checkpointing=1,
    )
    result = run_training(cfg)
    assert result.steps_done == 2
    records = [r for r in read_metrics(result.run_dir / "metrics.jsonl") if r["kind"] == "train"]
    assert all(math.isfinite(r["loss/total"]) for r in records)
    assert records[-1]["perf/peak_mem_mb"] > 0  # CUDA max allocated, read per step
