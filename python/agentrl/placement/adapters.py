"""Which weights of the policy train: all of them, or a LoRA adapter.

The trainer asks its adapter four things: how to wrap the loaded models
(:meth:`apply`), which module a checkpoint saves and loads (:meth:`checkpointed`), what
a rollout engine loads to sample from the policy (:meth:`rollout_weights`), and how the
trained policy is exported at the end (:meth:`export`).

- :class:`FullWeights`: every weight trains; checkpoints, engines and exports take the
  policy as it is, and the reference policy is a separate frozen copy.
- :class:`LoraAdapter` (``--lora_rank`` > 0): the policy gets a `peft` adapter and only
  the adapter trains; the reference policy is the same network with the adapter off
  (no second copy); checkpoints hold the adapter only; engines get the merged weights;
  the run exports the adapter alone and a merged HF model (see `agentrl.models.lora`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import torch

from agentrl.config import TrainConfig
from agentrl.errors import UsageError
from agentrl.models.loading import policy_origin
from agentrl.models.lora import (
    AdapterCheckpointView,
    LoraSettings,
    ReferenceView,
    apply_lora,
    export_merged,
    merged_state_dict,
    save_adapter,
)
from agentrl.training.checkpoint import export_policy
from agentrl.training.models import Models


class FullWeights:
    """Every weight of the policy trains (no adapter)."""

    separate_reference = True  # the reference policy has weights of its own

    def apply(self, models: Models, config: TrainConfig) -> Models:
        return models

    def checkpointed(self, policy: torch.nn.Module) -> torch.nn.Module:
        return policy

    def rollout_weights(
        self, policy: torch.nn.Module
    ) -> torch.nn.Module | Mapping[str, torch.Tensor]:
        return policy

    def export(self, policy: torch.nn.Module, tokenizer: object, run_dir: Path) -> Path:
        """``policy.pth`` for a policy loaded from a MiniMind file, else an HF ``policy/``."""
        name = "policy.pth" if policy_origin(policy) == "minimind" else "policy"
        return export_policy(policy, tokenizer, run_dir / name)


class LoraAdapter:
    """A LoRA adapter trains; the base weights stay as loaded (see module doc)."""

    separate_reference = False  # the reference is the policy with its adapter off

    def __init__(self, settings: LoraSettings) -> None:
        self.settings = settings

    def apply(self, models: Models, config: TrainConfig) -> Models:
        policy = apply_lora(models.policy, self.settings)
        policy.train()
        forward = torch.compile(policy) if config.use_compile else policy
        return dataclasses.replace(
            models, policy=policy, forward=forward, reference=ReferenceView(policy)
        )

    def checkpointed(self, policy: torch.nn.Module) -> torch.nn.Module:
        return AdapterCheckpointView(policy)

    def rollout_weights(
        self, policy: torch.nn.Module
    ) -> torch.nn.Module | Mapping[str, torch.Tensor]:
        return merged_state_dict(policy)

    def export(self, policy: torch.nn.Module, tokenizer: object, run_dir: Path) -> Path:
        """``adapter/`` (the adapter alone) and ``policy/`` (merged); the merged path."""
        save_adapter(policy, run_dir / "adapter")
        return export_merged(policy, tokenizer, run_dir / "policy")


Adapter = FullWeights | LoraAdapter


def adapter_for(config: TrainConfig) -> Adapter:
    """The adapter ``config`` asks for (``lora_rank`` 0: none)."""
    if config.lora_rank <= 0:
        return FullWeights()
    if config.save_pth:
        raise UsageError("save_pth writes whole weights: with LoRA use the run's adapter/ export")
    for name in ("ref_from_rl_checkpoint", "reference_model_path"):
        if getattr(config, name):
            raise UsageError(
                f"{name} needs a reference policy with weights of its own; with LoRA the "
                "reference is the base model (the adapter off): leave it unset"
            )
    return LoraAdapter(
        LoraSettings(
            rank=config.lora_rank,
            alpha=config.lora_alpha,
            target_modules=config.lora_target_modules,
            dropout=config.lora_dropout,
        )
    )


__all__ = ["Adapter", "FullWeights", "LoraAdapter", "adapter_for"]
