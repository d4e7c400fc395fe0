"""Rollout engines other than the in-process torch one: SGLang and vLLM servers, an
in-process vLLM.

All speak the `RolloutEngine` interface of `agentrl.rollout` (``generate`` over token-id
prompts returning `Generation`s with behaviour log-probs; ``update_weights``; ``version``,
``lock``, ``reseed``), so the episode loop, the async producer and the trainer use them
unchanged. Their heavy dependencies are optional and imported only when selected.
"""

from __future__ import annotations

from typing import Any

from agentrl.rollout.options import RolloutConfig as R
from agentrl.rollout.remote.http import (
    REQUEST_TIMEOUT_S,
    JsonHttpClient,
    RemoteEngineError,
    RetryPolicy,
)

ENGINES = ("torch", "sglang", "vllm", "vllm-server")
# The rollout section at its declared defaults (an engine built outside a run).
_DEFAULTS = R()


def _seeded_and_up(engine: Any, seed: int, wait_s: float) -> Any:
    """A server engine reseeded with ``seed``; with ``wait_s`` > 0, once its server reports
    healthy (else RemoteEngineError after ``wait_s``)."""
    engine.reseed(seed)
    if wait_s > 0:
        engine.wait_until_healthy(wait_s)
    return engine


def create_rollout_engine(
    kind: str,
    rollout: R = _DEFAULTS,
    *,
    tokenizer: Any,
    rollout_model: Any = None,
    device: Any = None,
    autocast: Any = None,
    seed: int = 0,
    version: int = 0,
    vllm_model_path: str | None = None,
    vllm_served_model: str | None = None,
    vllm_dtype: str = "bfloat16",
    request_timeout_s: float = REQUEST_TIMEOUT_S,
) -> Any:
    """The rollout engine named ``kind`` (one of `ENGINES`), set by the run's rollout
    section ``rollout`` (`RolloutConfig`): the one place every engine of agentrl is built
    (training, evaluation, `agentrl eval`, SFT's held-out score).

    ``torch`` samples with ``rollout_model`` in this process (the section's
    ``rollout_kv_reuse``, ``rollout_compile``, ``rollout_batch_rows`` and ``rollout_batch_tokens``).

    ``sglang_wait_sec`` > 0 waits that long for a server (SGLang or vLLM) to report healthy
    first. ``weight_sync`` is how a server gets new weights: ``nccl`` or ``gloo`` (a
    process-group broadcast; the vLLM server takes ``nccl`` only) or ``disk`` (SGLang only,
    through ``sglang_shared_path``). ``vllm`` starts vLLM in this process from the policy's
    HF directory ``vllm_model_path``; ``request_timeout_s`` bounds each request to a server.
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
            kv_reuse=bool(rollout.rollout_kv_reuse),
            compile_decode=bool(rollout.rollout_compile),
            max_batch_rows=int(rollout.rollout_batch_rows),
            max_batch_tokens=int(rollout.rollout_batch_tokens),
        )
    weight_sync = rollout.weight_sync
    # What every server engine takes (`ServerEngine`).
    server = {
        "version": version,
        "timeout_s": request_timeout_s,
        "weight_sync_host": rollout.weight_sync_host,
        "weight_sync_timeout_s": rollout.weight_sync_timeout_sec,
    }
    if kind == "sglang":
        from agentrl.rollout.remote.sglang import SGLangEngine

        engine: Any = SGLangEngine(
            rollout.sglang_base_url,
            tokenizer,
            weight_sync=weight_sync,
            shared_dir=rollout.sglang_shared_path if weight_sync == "disk" else None,
            model_path=rollout.sglang_model_path or None,
            **server,
        )
        return _seeded_and_up(engine, seed, rollout.sglang_wait_sec)
    if kind == "vllm-server":
        from agentrl.rollout.remote.vllm_server import VLLMServerEngine

        if weight_sync != "nccl":
            raise ValueError(
                f"weight_sync={weight_sync!r}: the vLLM server receives weights over its NCCL "
                "weight-transfer engine only (weight_sync='nccl')"
            )
        engine = VLLMServerEngine(
            rollout.rollout_url, tokenizer, served_model=vllm_served_model, **server
        )
        return _seeded_and_up(engine, seed, rollout.sglang_wait_sec)
    if kind == "vllm":
        from agentrl.rollout.remote.vllm_engine import VLLMEngine

        if not vllm_model_path:
            raise ValueError("the vllm rollout engine needs the policy's HF directory")
        return VLLMEngine(
            vllm_model_path,
            tokenizer,
            dtype=vllm_dtype,
            gpu_memory_utilization=rollout.vllm_gpu_memory_utilization,
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
