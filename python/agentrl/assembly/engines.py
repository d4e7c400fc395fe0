"""The rollout engine a training process samples with: in process (torch) or a server.

``--rollout_engine torch`` samples from the run's own rollout copy of the policy;
``sglang`` and ``vllm-server`` talk to a running SGLang or vLLM server (weights pushed per
``--weight_sync``) and ``vllm`` starts vLLM in this process (`agentrl.rollout.remote`).
A server starts from its own copy of the model, so it is given the policy's weights (as
version 0) before anything is sampled; later syncs go through the rollout source like any
other engine's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrl.assembly.models import run_dtype
from agentrl.config import TrainConfig
from agentrl.rollout.remote import create_rollout_engine
from agentrl.training.checkpoint import export_policy
from agentrl.training.models import Models, autocast_factory


def rollout_engine(config: TrainConfig, models: Models, *, seed: int) -> Any:
    """The engine ``config.rollout_engine`` names, sampling with ``seed``."""
    kind = config.rollout_engine
    engine = create_rollout_engine(kind, config, **_engine_arguments(config, models, kind, seed))
    if kind != "torch":  # a server starts from its own copy of the model
        engine.update_weights(models.policy, version=0)
    return engine


def torch_engine(config: TrainConfig, model: Any, tokenizer: Any, *, seed: int) -> Any:
    """The in-process torch engine over ``model`` (on its device, in the run's dtype), set by
    the run's rollout section: `agentrl eval`'s and a rollout rank's engine."""
    device = next(model.parameters()).device
    return create_rollout_engine(
        "torch",
        config,
        tokenizer=tokenizer,
        rollout_model=model,
        device=device,
        autocast=autocast_factory(device, config.dtype),
        seed=seed,
    )


def _engine_arguments(config: TrainConfig, models: Models, kind: str, seed: int) -> dict[str, Any]:
    """What the engine takes beside the rollout section: the run's models and seed."""
    arguments: dict[str, Any] = {"tokenizer": models.tokenizer, "seed": seed, "version": 0}
    if kind == "torch":
        arguments.update(
            rollout_model=models.rollout, device=models.device, autocast=models.autocast
        )
    elif kind == "vllm":
        arguments.update(
            vllm_model_path=str(vllm_start_dir(config, models)),
            vllm_dtype=run_dtype(config, "cuda"),
        )
    return arguments


def vllm_start_dir(config: TrainConfig, models: Models) -> Path:
    """An HF directory vLLM can start from: the policy's own, else an export of it."""
    spec = Path(models.spec)
    if (spec / "config.json").is_file():
        return spec
    return export_policy(
        models.rollout, models.tokenizer, config.run_dir / "rollout_start", fmt="hf"
    )


__all__ = ["rollout_engine", "torch_engine", "vllm_start_dir"]
