"""Policies: the built-in tiny preset, Hugging Face directories and MiniMind checkpoints."""

from agentrl.models.errors import (
    CheckpointNotFoundError,
    ModelLoadError,
    ShapeMismatchError,
    UnsupportedArchitectureError,
)
from agentrl.models.loading import (
    TINY_SPEC,
    autocast_context,
    frozen_copy,
    load_configured_policy,
    load_policy,
    policy_origin,
    resolve_device,
    resolve_dtype,
)
from agentrl.models.minimind import export_pth

# Where `agentrl sft` (no arguments) leaves the warm-started tiny model for `agentrl train`.
TINY_SFT_DIR = "runs/tiny-sft"

__all__ = [
    "TINY_SFT_DIR",
    "TINY_SPEC",
    "CheckpointNotFoundError",
    "ModelLoadError",
    "ShapeMismatchError",
    "UnsupportedArchitectureError",
    "autocast_context",
    "export_pth",
    "frozen_copy",
    "load_configured_policy",
    "load_policy",
    "policy_origin",
    "resolve_device",
    "resolve_dtype",
]
