"""MiniMind `.pth` checkpoints: infer the matching HF config, load strictly, export back.

MiniMind saves plain `torch.save` state dicts whose names are Hugging Face's (Qwen3 for
minimind-3, Llama for MiniMind2 dense). The only thing the file lacks is the config, so we
read it off the tensor shapes. Mixture-of-experts layers are stored per expert in MiniMind
but fused into 3-D tensors by transformers >= 5, so import stacks them and export splits them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from transformers import LlamaConfig, PretrainedConfig, Qwen3Config, Qwen3MoeConfig

from agentrl.models.errors import (
    CheckpointNotFoundError,
    ModelLoadError,
    ShapeMismatchError,
    UnsupportedArchitectureError,
)
from agentrl.utils.atomic import atomic_file

# MiniMind's token layout: <|endoftext|> pads, <|im_start|> begins, <|im_end|> ends a turn.
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
ROPE_THETA = 1e6
MAX_POSITIONS = 32768
# MiniMind2 (Llama-style) checkpoints do not reveal the head count in any shape.
MINIMIND2_HEADS = 8
MINIMIND3_MOE_TOP_K = 1

# Prefixes added by DDP and torch.compile wrappers around the saved module.
_WRAPPER_PREFIXES = ("module.", "_orig_mod.")
# Non-persistent buffers some MiniMind versions still wrote out; they are recomputed by HF.
_IGNORED_SUFFIXES = ("freqs_cos", "freqs_sin", "rotary_emb.inv_freq")
_LAYER_RE = re.compile(r"^model\.layers\.(\d+)\.")
_EXPERT_RE = re.compile(r"^(model\.layers\.\d+\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight$")
_FUSED_RE = re.compile(r"^(model\.layers\.\d+\.mlp\.experts)\.(gate_up_proj|down_proj)$")


def read_state_dict(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """Load a `.pth` file as a clean name -> tensor dict (wrapper prefixes stripped)."""
    p = Path(path)
    if not p.is_file():
        raise CheckpointNotFoundError(f"MiniMind checkpoint not found: {p}")
    try:
        raw = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several unrelated types for a bad file
        raise ModelLoadError(f"{p}: not a readable torch checkpoint ({exc})") from exc
    # Resume files written by MiniMind's trainer wrap the weights under "model".
    if isinstance(raw, Mapping) and isinstance(raw.get("model"), Mapping):
        raw = raw["model"]
    if not isinstance(raw, Mapping) or not raw:
        raise ModelLoadError(f"{p}: expected a state dict of tensors, found {type(raw).__name__}")
    clean: dict[str, torch.Tensor] = {}
    for key, value in raw.items():
        if not isinstance(value, torch.Tensor):
            raise ModelLoadError(f"{p}: entry '{key}' is a {type(value).__name__}, not a tensor")
        name = str(key)
        for prefix in _WRAPPER_PREFIXES:
            while name.startswith(prefix):
                name = name[len(prefix) :]
        if name.endswith(_IGNORED_SUFFIXES):
            continue
        clean[name] = value
    return clean


def _shape(sd: Mapping[str, torch.Tensor], name: str, source: str) -> tuple[int, ...]:
    tensor = sd.get(name)
    if tensor is None:
        raise UnsupportedArchitectureError(
            f"{source}: missing tensor '{name}', so this is not a MiniMind (Qwen3/Llama-style) "
            f"checkpoint; first keys: {sorted(sd)[:5]}"
        )
    return tuple(tensor.shape)


def infer_config(
    sd: Mapping[str, torch.Tensor], source: str = "checkpoint", **overrides: Any
) -> PretrainedConfig:
    """Build the HF config whose parameters have exactly the shapes found in `sd`."""
    vocab, hidden = _shape(sd, "model.embed_tokens.weight", source)
    layer_ids = {int(m.group(1)) for k in sd if (m := _LAYER_RE.match(k))}
    if not layer_ids:
        raise UnsupportedArchitectureError(f"{source}: no 'model.layers.N.' tensors found")
    layers = max(layer_ids) + 1
    prefix = "model.layers.0."
    q_out = _shape(sd, prefix + "self_attn.q_proj.weight", source)[0]
    k_out = _shape(sd, prefix + "self_attn.k_proj.weight", source)[0]
    qk_norm = prefix + "self_attn.q_norm.weight" in sd
    if any(".shared_experts." in k for k in sd):
        raise UnsupportedArchitectureError(
            f"{source}: MiniMind2 mixture-of-experts with shared experts has no transformers "
            "architecture; only minimind-3 (dense or MoE) and MiniMind2 dense are supported"
        )
    if any(k.endswith((".bias",)) for k in sd):
        biased = next(k for k in sd if k.endswith(".bias"))
        raise UnsupportedArchitectureError(
            f"{source}: tensor '{biased}' is a bias; MiniMind layouts have no biases"
        )
    if qk_norm:
        head_dim = _shape(sd, prefix + "self_attn.q_norm.weight", source)[0]
    else:
        heads = int(overrides.get("num_attention_heads", MINIMIND2_HEADS))
        head_dim = q_out // heads
    if head_dim <= 0 or q_out % head_dim or k_out % head_dim:
        raise UnsupportedArchitectureError(
            f"{source}: q_proj rows {q_out} and k_proj rows {k_out} do not split into heads of "
            f"size {head_dim}; pass num_attention_heads to override"
        )
    lm_head = sd.get("lm_head.weight")
    tied = lm_head is None or (
        lm_head.shape == sd["model.embed_tokens.weight"].shape
        and torch.equal(lm_head, sd["model.embed_tokens.weight"])
    )
    common: dict[str, Any] = {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": q_out // head_dim,
        "num_key_value_heads": k_out // head_dim,
        "head_dim": head_dim,
        "max_position_embeddings": MAX_POSITIONS,
        "rope_parameters": {"rope_type": "default", "rope_theta": ROPE_THETA},
        "tie_word_embeddings": tied,
        "pad_token_id": PAD_ID,
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "hidden_act": "silu",
    }
    moe_gate = prefix + "mlp.experts.0.gate_proj.weight"
    fused_gate = prefix + "mlp.experts.gate_up_proj"
    if moe_gate in sd or fused_gate in sd:
        if not qk_norm:
            raise UnsupportedArchitectureError(
                f"{source}: Llama-style mixture-of-experts is not supported"
            )
        if moe_gate in sd:
            experts = 1 + max(
                int(m.group(2)) for k in sd if (m := _EXPERT_RE.match(k)) and k.startswith(prefix)
            )
            moe_inter = sd[moe_gate].shape[0]
        else:
            experts, two_inter, _ = sd[fused_gate].shape
            moe_inter = two_inter // 2
        common.update(
            num_experts=experts,
            num_experts_per_tok=MINIMIND3_MOE_TOP_K,
            norm_topk_prob=True,
            moe_intermediate_size=moe_inter,
            intermediate_size=moe_inter,
            rms_norm_eps=1e-6,
        )
        common.update(overrides)
        return Qwen3MoeConfig(**common)
    common["intermediate_size"] = _shape(sd, prefix + "mlp.gate_proj.weight", source)[0]
    if qk_norm:
        common["rms_norm_eps"] = 1e-6
        common.update(overrides)
        return Qwen3Config(**common)
    common["rms_norm_eps"] = 1e-5
    common.update(overrides)
    return LlamaConfig(**common)


def fuse_experts(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Stack MiniMind's per-expert MLP weights into transformers' fused expert tensors."""
    out: dict[str, torch.Tensor] = {}
    groups: dict[str, dict[int, dict[str, torch.Tensor]]] = {}
    for name, tensor in sd.items():
        m = _EXPERT_RE.match(name)
        if m is None:
            out[name] = tensor
            continue
        groups.setdefault(m.group(1), {}).setdefault(int(m.group(2)), {})[m.group(3)] = tensor
    for base, experts in groups.items():
        count = max(experts) + 1
        missing = [e for e in range(count) if set(experts.get(e, {})) != {"gate", "up", "down"}]
        if missing:
            raise ModelLoadError(f"{base}: expert {missing[0]} lacks gate/up/down weights")
        out[base + ".gate_up_proj"] = torch.stack(
            [torch.cat([experts[e]["gate"], experts[e]["up"]], dim=0) for e in range(count)]
        )
        out[base + ".down_proj"] = torch.stack([experts[e]["down"] for e in range(count)])
    return out


def split_experts(sd: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Inverse of `fuse_experts`: one gate/up/down weight per expert, MiniMind's names."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in sd.items():
        m = _FUSED_RE.match(name)
        if m is None:
            out[name] = tensor
            continue
        base, kind = m.group(1), m.group(2)
        for e in range(tensor.shape[0]):
            if kind == "down_proj":
                out[f"{base}.{e}.down_proj.weight"] = tensor[e]
            else:
                gate, up = tensor[e].chunk(2, dim=0)
                out[f"{base}.{e}.gate_proj.weight"] = gate
                out[f"{base}.{e}.up_proj.weight"] = up
    return out


def check_and_load(model: torch.nn.Module, sd: Mapping[str, torch.Tensor], source: str) -> None:
    """Strict load that names the first missing, unexpected or mis-shaped tensor."""
    expected = model.state_dict()
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    provided = dict(sd)
    if tied:
        provided.pop("lm_head.weight", None)
    missing = [k for k in expected if k not in provided and not (tied and k == "lm_head.weight")]
    unexpected = [k for k in provided if k not in expected]
    if missing:
        raise ModelLoadError(
            f"{source}: tensor '{missing[0]}' is missing from the checkpoint"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
        )
    if unexpected:
        raise ModelLoadError(
            f"{source}: checkpoint tensor '{unexpected[0]}' has no place in the model"
            + (f" (and {len(unexpected) - 1} more)" if len(unexpected) > 1 else "")
        )
    bad = [k for k, v in provided.items() if tuple(v.shape) != tuple(expected[k].shape)]
    if bad:
        k = bad[0]
        raise ShapeMismatchError(
            k, tuple(provided[k].shape), tuple(expected[k].shape), source, len(bad) - 1
        )
    model.load_state_dict(provided, strict=not tied)


def build_from_state_dict(
    sd: Mapping[str, torch.Tensor], source: str, dtype: torch.dtype, **overrides: Any
) -> torch.nn.Module:
    """Instantiate the HF model for `sd` and load it strictly in `dtype`."""
    from transformers import AutoModelForCausalLM

    config = infer_config(sd, source, **overrides)
    weights = fuse_experts(sd)
    weights = {k: v.to(dtype) for k, v in weights.items()}
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    check_and_load(model, weights, source)
    if config.tie_word_embeddings:
        model.tie_weights()
    model.config.agentrl_origin = "minimind"
    return model.eval()


def export_pth(
    model: torch.nn.Module, path: str | os.PathLike[str], dtype: torch.dtype = torch.float16
) -> Path:
    """Write `model` as a MiniMind `.pth` (MiniMind names, fp16 by default), atomically."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    sd = {k: v.detach().to("cpu", dtype) for k, v in model.state_dict().items()}
    if "lm_head.weight" not in sd and "model.embed_tokens.weight" in sd:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    sd = split_experts(sd)
    with atomic_file(out) as tmp:
        torch.save(sd, tmp)
    return out
