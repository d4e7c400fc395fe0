"""Rollout engines other than the in-process torch one: SGLang and vLLM servers, an
in-process vLLM.

All speak the `RolloutEngine` interface of `agentrl.rollout` (``generate`` over token-id
prompts returning `Generation`s with behaviour log-probs; ``update_weights``; ``version``,
``lock``, ``reseed``), so the episode loop, the async producer and the trainer use them
unchanged. Their heavy dependencies are optional and imported only when selected.
"""

from __future__ import annotations

import os
from typing import Any

from agentrl.rollout.options import RolloutConfig as R
from agentrl.rollout.remote.http import (
    REQUEST_TIMEOUT_S,
    JsonHttpClient,
    RemoteEngineError,
    RetryPolicy,
)

ENGINES = ("torch", "sglang", "vllm", "vllm-server")


def _seeded_and_up(engine: Any, seed: int, wait_s: float) -> Any:
    """A server engine reseeded with ``seed``; with ``wait_s`` > 0, once its server reports
    healthy (else RemoteEngineError after ``wait_s``)."""
    engine.reseed(seed)
    if wait_s > 0:
        engine.wait_until_healthy(wait_s)
    return engine


def create_rollout_engine(
    kind: str,
    *,
    tokenizer: Any,
    rollout_model: Any = None,
    device: Any = None,
    autocast: Any = None,
    seed: int = 0,
    version: int = 0,
    kv_reuse: bool = R.rollout_kv_reuse,
    compile_decode: bool = R.rollout_compile,
    max_batch_rows: int = R.rollout_batch_rows,
    sglang_base_url: str = R.sglang_base_url,
    sglang_model_path: str | None = None,
    sglang_shared_path: str | os.PathLike[str] = R.sglang_shared_path,
    sglang_timeout_s: float = REQUEST_TIMEOUT_S,
    sglang_wait_s: float = R.sglang_wait_sec,
    weight_sync: str = R.weight_sync,
    weight_sync_host: str = R.weight_sync_host,
    weight_sync_timeout_s: float = R.weight_sync_timeout_sec,
    vllm_server_url: str = R.rollout_url,
    vllm_served_model: str | None = None,
    vllm_model_path: str | None = None,
    vllm_gpu_memory_utilization: float = R.vllm_gpu_memory_utilization,
    vllm_dtype: str = "bfloat16",
) -> Any:
    """The rollout engine named ``kind`` (one of `ENGINES`): the one place every engine of
    agentrl is built (training, evaluation, `agentrl eval`, SFT's held-out score).

    The defaults are the run's rollout options' (`RolloutConfig`, declared once there).

    ``torch`` samples with ``rollout_model`` in this process (``kv_reuse``,
    ``compile_decode`` and ``max_batch_rows`` as `TorchEngine` takes them).

    ``sglang_wait_s`` > 0 waits that long for a server (SGLang or vLLM) to report healthy
    first. ``weight_sync`` is how a server gets new weights: ``nccl`` or ``gloo`` (a
    process-group broadcast; the vLLM server takes ``nccl`` only) or ``disk`` (SGLang only,
    through ``sglang_shared_path``).
    """
    if kind == "torch":
        from agentrl.rollout.engine import TorchEngine

        if rollout_model is None:
            raise ValueError("the torch rollout engine needs a model")
        return TorchEngine(
            rollout_model,
            tokenizer,
            device=device,
            autocast=autocast,
            seed=seed,
            version=version,
            kv_reuse=kv_reuse,
            compile_decode=compile_decode,
            max_batch_rows=max_batch_rows,
        )
    # What every server engine takes (`ServerEngine`).
    server = {
        "version": version,
        "timeout_s": sglang_timeout_s,
        "weight_sync_host": weight_sync_host,
        "weight_sync_timeout_s": weight_sync_timeout_s,
    }
    if kind == "sglang":
        from agentrl.rollout.remote.sglang import SGLangEngine

        engine: Any = SGLangEngine(
            sglang_base_url,
            tokenizer,
            weight_sync=weight_sync,
            shared_dir=sglang_shared_path if weight_sync == "disk" else None,
            model_path=sglang_model_path,
            **server,
        )
        return _seeded_and_up(engine, seed, sglang_wait_s)
    if kind == "vllm-server":
        from agentrl.rollout.remote.vllm_server import VLLMServerEngine

        if weight_sync != "nccl":
            raise ValueError(
                f"weight_sync={weight_sync!r}: the vLLM server receives weights over its NCCL "
                "weight-transfer engine only (weight_sync='nccl')"
            )
        engine = VLLMServerEngine(
            vllm_server_url, tokenizer, served_model=vllm_served_model, **server
        )
        return _seeded_and_up(engine, seed, sglang_wait_s)
    if kind == "vllm":
        from agentrl.rollout.remote.vllm_engine import VLLMEngine

        if not vllm_model_path:
            raise ValueError("the vllm rollout engine needs the policy's HF directory")
        return VLLMEngine(
            vllm_model_path,
            tokenizer,
            dtype=vllm_dtype,
            gpu_memory_utilization=vllm_gpu_memory_utilization,
            seed=seed,
            version=version,
        )
    raise ValueError(f"unknown rollout engine {kind!r} (choose from {', '.join(ENGINES)})")


def __getattr__(name: str) -> Any:
    # The engines load lazily so that importing this package never imports their extras.
    if name == "SGLangEngine":
        from agentrl.rollout.remote.sglang import SGLangEngine

        return SGLangEngine
    if name == "VLLMServerEngine":
        from agentrl.rollout.remote.vllm_server import VLLMServerEngine

        return VLLMServerEngine
    if name == "VLLMEngine":
        from agentrl.rollout.remote.vllm_engine import VLLMEngine

        return VLLMEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ENGINES",
    "JsonHttpClient",
    "RemoteEngineError",
    "RetryPolicy",
    "SGLangEngine",
    "VLLMEngine",
    "VLLMServerEngine",
    "create_rollout_engine",
]
