"""LoRA through Hugging Face `peft`: adapters on the policy, the base model as reference.

Why LoRA here: the RL policy and its KL reference differ only by what training learnt.
With an adapter, the reference is the same network with the adapter switched off, so a
run holds one copy of the weights instead of two, and a checkpoint needs only the
adapter (megabytes instead of the whole model).

* :func:`apply_lora` wraps a causal LM (``--lora_rank``, ``--lora_alpha``,
  ``--lora_target_modules``); only adapter weights are trainable afterwards.
* :class:`ReferenceView` is a module whose forward runs the policy with the adapter
  disabled (:func:`adapter_disabled`): a drop-in reference policy.
* :func:`merged_state_dict` computes base + adapter weights under the base model's names
  without touching the model (merging in place and back would drift the base weights by
  rounding on every sync); rollout engines load these.
* :func:`save_adapter` / :func:`load_adapter` and :class:`AdapterCheckpointView`: adapter-only
  checkpoints; :func:`export_merged`: a plain HF directory any tool can load.
* :func:`adapter_signature`: what a resume from an adapter-only checkpoint must match (the
  adapter's shape and a digest of the frozen base weights).

`peft` is an optional dependency (``pip install 'agentrl[lora]'``), imported on first use.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from agentrl.errors import UsageError, UserError
from agentrl.utils.atomic import atomic_dir
from agentrl.utils.imports import require_module
from agentrl.utils.tensors import has_nonfinite

# Parameter-name segments peft adds for adapter weights (lora_A, lora_B, lora_embedding_A,
# lora_magnitude_vector, ...).
_ADAPTER_SEGMENT = re.compile(r"(^|\.)lora_[A-Za-z_]+(\.|$)")
ADAPTER_NAME = "default"


class LoraUnavailableError(UserError, ImportError):
    """`peft` is not installed."""


def require_peft() -> Any:
    """The `peft` module, or an ImportError that says how to install it."""
    return require_module(
        "peft",
        LoraUnavailableError,
        "LoRA needs the `peft` package: pip install 'agentrl[lora]' (or pip install peft)",
    )


@dataclass(frozen=True)
class LoraSettings:
    """Adapter shape. ``target_modules``: module names, or ``all-linear`` (every linear
    layer except the output head), the default."""

    rank: int = 16
    alpha: float = 32.0
    target_modules: tuple[str, ...] | str = "all-linear"
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise UsageError(f"lora_rank must be >= 1, got {self.rank}")
        if not self.alpha > 0:
            raise UsageError(f"lora_alpha must be > 0, got {self.alpha}")
        if not 0.0 <= self.dropout < 1.0:
            raise UsageError(f"lora_dropout must be in [0, 1), got {self.dropout}")
        targets = parse_target_modules(self.target_modules)
        object.__setattr__(self, "target_modules", targets)

    def peft_targets(self) -> list[str] | str:
        t = self.target_modules
        return t if isinstance(t, str) else list(t)


def parse_target_modules(value: str | Sequence[str]) -> tuple[str, ...] | str:
    """``"q_proj,v_proj"`` or a list -> names; ``""``/``"all-linear"`` -> ``"all-linear"``."""
    if isinstance(value, str):
        names = [n.strip() for n in value.split(",") if n.strip()]
    else:
        names = [str(n).strip() for n in value if str(n).strip()]
    if not names or names == ["all-linear"]:
        return "all-linear"
    if "all-linear" in names:
        raise UsageError("lora_target_modules: 'all-linear' cannot be combined with names")
    return tuple(names)


def is_lora_model(model: Any) -> bool:
    """True for a peft model (without importing peft when nothing could have used it).

    Reads the class from the module that defines it, and only once it is defined: another
    thread may be importing peft right now (a partly initialised module without the class
    yet), and then no peft model can exist.
    """
    defining = sys.modules.get("peft.peft_model")
    peft_model = getattr(defining, "PeftModel", None)
    return isinstance(peft_model, type) and isinstance(model, peft_model)


def base_model_of(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model inside a peft model (the model itself otherwise)."""
    return model.get_base_model() if is_lora_model(model) else model


def apply_lora(model: torch.nn.Module, settings: LoraSettings) -> torch.nn.Module:
    """Wrap ``model`` with a fresh LoRA adapter; only the adapter stays trainable.

    The adapter starts as a no-op (B = 0), so the wrapped policy computes exactly what the
    base model does until the first update.
    """
    peft = require_peft()
    config = peft.LoraConfig(
        r=int(settings.rank),
        lora_alpha=float(settings.alpha),
        target_modules=settings.peft_targets(),
        lora_dropout=float(settings.dropout),
        bias="none",
        task_type="CAUSAL_LM",
    )
    try:
        with warnings.catch_warnings():
            # peft asks transformers a question it deprecated; nothing a user can change.
            warnings.filterwarnings("ignore", ".*is_gradient_checkpointing", FutureWarning)
            # The adapter in the model's dtype: a bfloat16 model's adapter then runs on the
            # CPU's bfloat16 units with no casts around it (a LoRA step 1.27x faster), and
            # the optimizers keep float32 masters of it (`agentrl.rl.optim.master_weights`).
            wrapped = peft.get_peft_model(model, config, autocast_adapter_dtype=False)
    except ValueError as exc:
        names = sorted(
            {
                n.rsplit(".", 1)[-1]
                for n, m in model.named_modules()
                if isinstance(m, torch.nn.Linear)
            }
        )
        layers = ", ".join(names)
        raise UsageError(
            f"lora_target_modules: {exc} (linear layers of this model: {layers})"
        ) from exc
    return wrapped


@contextlib.contextmanager
def adapter_disabled(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Within the block ``model`` computes the base model (the LoRA reference policy)."""
    if not is_lora_model(model):
        raise TypeError(f"{type(model).__name__} has no LoRA adapter to disable")
    with model.disable_adapter():
        yield model


class ReferenceView(torch.nn.Module):
    """The reference policy of a LoRA run: the policy's forward with the adapter off.

    Holds no weights of its own (the policy is kept outside the module tree, so this view
    has no parameters to train, save or move) and never builds an autograd graph.
    """

    def __init__(self, policy: torch.nn.Module) -> None:
        super().__init__()
        if not is_lora_model(policy):
            raise TypeError("ReferenceView needs a LoRA (peft) policy")
        self._policy = [policy]  # a list: not registered as a submodule

    @property
    def policy(self) -> torch.nn.Module:
        return self._policy[0]

    @property
    def config(self) -> Any:
        return getattr(self.policy, "config", None)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        policy = self.policy
        was_training = policy.training
        policy.eval()  # no adapter dropout in the reference
        try:
            with torch.no_grad(), adapter_disabled(policy):
                return policy(*args, **kwargs)
        finally:
            policy.train(was_training)


def adapter_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The adapter weights only (peft's names, without the adapter name)."""
    peft = require_peft()
    return dict(peft.get_peft_model_state_dict(model))


def load_adapter_state_dict(model: torch.nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Load adapter weights saved by :func:`adapter_state_dict`; every adapter weight must come."""
    peft = require_peft()
    expected = set(adapter_state_dict(model))
    missing = sorted(expected - set(state))
    if missing:
        raise ValueError(f"adapter checkpoint lacks {len(missing)} weight(s), e.g. {missing[:3]}")
    result = peft.set_peft_model_state_dict(model, dict(state))
    unexpected = list(getattr(result, "unexpected_keys", []) or [])
    if unexpected:
        raise ValueError(f"adapter checkpoint has unknown weights, e.g. {unexpected[:3]}")


def trainable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


class AdapterCheckpointView(torch.nn.Module):
    """A module whose state dict is the adapter only: hand it to checkpoint writers/readers
    that save ``model.state_dict()`` to get adapter-only checkpoints."""

    def __init__(self, policy: torch.nn.Module) -> None:
        super().__init__()
        if not is_lora_model(policy):
            raise TypeError("AdapterCheckpointView needs a LoRA (peft) policy")
        self._policy = [policy]

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, torch.Tensor]:  # type: ignore[override]
        return adapter_state_dict(self._policy[0])

    def load_state_dict(  # type: ignore[override]
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        del strict, assign  # the adapter is always loaded whole
        load_adapter_state_dict(self._policy[0], state_dict)
        return torch.nn.modules.module._IncompatibleKeys([], [])

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]:
        del recurse
        return iter(trainable_parameters(self._policy[0]))

    def buffers(self, recurse: bool = True) -> Iterator[torch.Tensor]:
        del recurse
        return iter(())


@torch.no_grad()
def merged_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Base + adapter weights under the base model's parameter names (model untouched)."""
    peft = require_peft()
    base = model.get_base_model()
    deltas: dict[str, torch.Tensor] = {}
    for name, module in base.named_modules():
        if not isinstance(module, peft.tuners.lora.LoraLayer) or module.merged:
            continue
        if getattr(module, "disable_adapters", False) or not hasattr(module, "get_delta_weight"):
            continue
        delta = None
        for adapter in module.active_adapters:
            if adapter in module.lora_A or adapter in getattr(module, "lora_embedding_A", {}):
                d = module.get_delta_weight(adapter)
                delta = d if delta is None else delta + d
        if delta is not None:
            deltas[f"{name}.base_layer.weight" if name else "base_layer.weight"] = delta
    out: dict[str, torch.Tensor] = {}
    for key, value in base.state_dict().items():
        if _ADAPTER_SEGMENT.search(key):
            continue
        delta = deltas.get(key)
        merged = value if delta is None else value + delta.to(value.dtype)
        out[key.replace(".base_layer.", ".")] = merged
    return out


@torch.no_grad()
def base_digest(model: torch.nn.Module) -> str:
    """A digest of the base weights of a peft model (names, dtypes, shapes and bytes, read on
    the CPU so that the same weights give the same digest on any device)."""
    h = hashlib.blake2b(digest_size=16)
    for name, tensor in model.get_base_model().state_dict().items():
        if _ADAPTER_SEGMENT.search(name):
            continue
        flat = tensor.detach().to("cpu").contiguous().reshape(-1)
        h.update(f"{name}|{flat.dtype}|{tuple(tensor.shape)}".encode())
        h.update(flat.view(torch.uint8).numpy())
    return h.hexdigest()


def adapter_signature(model: torch.nn.Module) -> dict[str, Any] | None:
    """The adapter's shape and its base model's digest; None for a model without an adapter.

    An adapter-only checkpoint continues a run exactly only on the same base weights with an
    adapter of the same shape: a resume compares this with the checkpoint's.
    """
    if not is_lora_model(model):
        return None
    config = model.peft_config[ADAPTER_NAME]
    targets = config.target_modules
    return {
        "rank": int(config.r),
        "alpha": float(config.lora_alpha),
        "dropout": float(config.lora_dropout),
        "target_modules": targets if isinstance(targets, str) else sorted(targets),
        "base": base_digest(model),
    }


def save_adapter(model: torch.nn.Module, out: str | os.PathLike[str]) -> Path:
    """Write the adapter alone (``adapter_config.json`` + safetensors) atomically."""
    if not is_lora_model(model):
        raise TypeError("save_adapter needs a LoRA (peft) model")
    final = Path(out)
    final.parent.mkdir(parents=True, exist_ok=True)
    with atomic_dir(final) as tmp:
        model.save_pretrained(str(tmp))
    return final


def load_adapter(
    base: torch.nn.Module, adapter_dir: str | os.PathLike[str], *, trainable: bool = False
) -> torch.nn.Module:
    """Attach an adapter saved by :func:`save_adapter` to ``base`` (a fresh base model)."""
    peft = require_peft()
    if not (Path(adapter_dir) / "adapter_config.json").is_file():
        raise FileNotFoundError(f"no adapter_config.json in {adapter_dir}")
    return peft.PeftModel.from_pretrained(base, str(adapter_dir), is_trainable=trainable)


def export_merged(model: torch.nn.Module, tokenizer: Any, out: str | os.PathLike[str]) -> Path:
    """A plain HF directory with the adapter merged in, loadable without peft."""
    if not is_lora_model(model):
        raise TypeError("export_merged needs a LoRA (peft) model")
    state = merged_state_dict(model)
    if has_nonfinite(state):
        raise ValueError("refusing to export weights that contain NaN or inf")
    final = Path(out)
    final.parent.mkdir(parents=True, exist_ok=True)
    with atomic_dir(final) as tmp:
        model.get_base_model().save_pretrained(str(tmp), state_dict=state)
        if tokenizer is not None:
            tokenizer.save_pretrained(str(tmp))
    return final


__all__ = [
    "AdapterCheckpointView",
    "LoraSettings",
    "LoraUnavailableError",
    "ReferenceView",
    "adapter_disabled",
    "adapter_signature",
    "adapter_state_dict",
    "apply_lora",
    "base_digest",
    "base_model_of",
    "export_merged",
    "is_lora_model",
    "load_adapter",
    "load_adapter_state_dict",
    "merged_state_dict",
    "parse_target_modules",
    "require_peft",
    "save_adapter",
    "trainable_parameters",
]
