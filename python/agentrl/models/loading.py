"""Turn a model spec into a (model, tokenizer) pair, and make the frozen copies RL needs.

A spec is one of: ``tiny`` (the built-in preset), a Hugging Face model directory, a Hub id
``org/name`` (resolved through the Hugging Face cache, so ``HF_HUB_OFFLINE=1`` works once it
is cached), a ``.gguf`` file (dequantised by transformers, tokenizer and chat template from
the file; needs the ``gguf`` extra), or a MiniMind ``.pth`` checkpoint (its tokenizer
directory found beside it or passed explicitly).
Weights are loaded in the dtype asked for (float32 by default), on every device: a
bfloat16 model is never held in float32 on the way. `autocast_context` gives float32
weights bf16 compute on CUDA.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
from pathlib import Path
from typing import Any, Protocol

import torch

from agentrl.chat import use_chat_template
from agentrl.errors import first_line
from agentrl.models.errors import (
    CheckpointNotFoundError,
    ModelLoadError,
    ShapeMismatchError,
    UnsupportedArchitectureError,
)
from agentrl.models.precision import auto_dtype
from agentrl.tool_formats import use_tool_format

TINY_SPEC = "tiny"
_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
_PTH_SUFFIXES = (".pth", ".pt", ".bin")


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """`None` means the first CUDA device when there is one, else the CPU."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_dtype(
    dtype: str | torch.dtype | None, device: str | torch.device | None = None
) -> torch.dtype:
    """Weight dtype: the one named, float32 when none is; ``auto`` is what the hardware of
    `device` computes fastest in (:func:`agentrl.models.precision.auto_dtype`)."""
    if dtype is None:
        return torch.float32
    if dtype == "auto":
        return _DTYPES[auto_dtype(device).dtype]
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return _DTYPES[str(dtype).lower()]
    except KeyError:
        raise ModelLoadError(
            f"unknown dtype {dtype!r}; use one of float32, bfloat16, float16"
        ) from None


def autocast_context(
    device: str | torch.device, weight_dtype: torch.dtype = torch.float32
) -> contextlib.AbstractContextManager[Any]:
    """bf16 autocast for fp32 weights on CUDA; nothing on CPU or for half-precision weights."""
    dev = torch.device(device)
    if dev.type == "cuda" and weight_dtype == torch.float32:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    """An independent eval-mode copy without gradients: the reference or rollout policy."""
    twin = copy.deepcopy(model)
    twin.eval()
    twin.requires_grad_(False)
    return twin


def policy_origin(model: torch.nn.Module) -> str:
    """Where the weights came from: ``minimind``, ``tiny`` or ``hf`` (decides export format)."""
    return str(getattr(getattr(model, "config", None), "agentrl_origin", "hf"))


def ensure_special_ids(tokenizer: Any) -> None:
    """Make pad/eos ids usable: MiniMind-style tokenizers pad with eos when pad is unset."""
    if tokenizer.eos_token_id is None:
        im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        if isinstance(im_end, int) and im_end != tokenizer.unk_token_id:
            tokenizer.eos_token = "<|im_end|>"
    if tokenizer.pad_token_id is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token


def load_policy(
    spec: str | os.PathLike[str] = TINY_SPEC,
    dtype: str | torch.dtype | None = None,
    device: str | torch.device | None = None,
    *,
    tokenizer: str | os.PathLike[str] | None = None,
    overrides: dict[str, Any] | None = None,
    chat_template: str = "",
    tool_format: str = "auto",
) -> tuple[torch.nn.Module, Any]:
    """Load a policy and its tokenizer from `spec`, on `device`, weights in `dtype`.

    `chat_template` replaces the tokenizer's template (see `agentrl.chat.use_chat_template`);
    `tool_format` pins the tool-call family (see `agentrl.tool_formats.use_tool_format`).

    `tokenizer` names the tokenizer directory for a MiniMind checkpoint (default: the
    checkpoint's directory, then ``../model``). `overrides` patches the inferred MiniMind
    config (e.g. ``{"num_attention_heads": 16}`` for a MiniMind2 variant).
    """
    weight_dtype = resolve_dtype(dtype, device)
    dev = resolve_device(device)
    text = os.fspath(spec)
    if text == TINY_SPEC:
        from agentrl.models.tiny import build_tiny_preset

        model, tok = build_tiny_preset()
        model = model.to(weight_dtype)
    else:
        path = Path(text).expanduser()
        if path.suffix.lower() == ".gguf":
            model, tok = load_gguf(path, weight_dtype)
        elif path.is_dir():
            model, tok = load_hf_dir(path, weight_dtype, tokenizer)
        elif not path.exists() and is_hub_id(text):
            model, tok = load_hf_dir(resolve_hub_id(text), weight_dtype, tokenizer)
        elif path.is_file() or path.suffix in _PTH_SUFFIXES:
            model, tok = load_minimind(path, weight_dtype, tokenizer, overrides or {})
        else:
            raise CheckpointNotFoundError(
                f"model spec {text!r} is neither 'tiny', an existing HF model directory, "
                "a Hub id (org/name), a .gguf file nor a MiniMind .pth file"
            )
    ensure_special_ids(tok)
    use_chat_template(tok, chat_template)
    use_tool_format(tok, tool_format)
    model.to(dev)
    return model, tok


class TokenizerOptions(Protocol):
    """A run's options on how its policy reads and writes text (the ``model`` section's)."""

    @property
    def tokenizer(self) -> str | None: ...
    @property
    def chat_template(self) -> str: ...
    @property
    def tool_format(self) -> str: ...


def load_configured_policy(
    spec: str | os.PathLike[str],
    dtype: str | torch.dtype | None,
    device: str | torch.device | None,
    options: TokenizerOptions,
) -> tuple[torch.nn.Module, Any]:
    """`load_policy` with the tokenizer directory ('' or None: the checkpoint's own), chat
    template and tool format that a run's ``options`` name."""
    return load_policy(
        spec,
        dtype,
        device,
        tokenizer=options.tokenizer or None,
        chat_template=options.chat_template,
        tool_format=options.tool_format,
    )


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# What a causal LM needs from a Hub repository (not its other formats: GGUF, ONNX, ...).
_HUB_FILES = ("*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken")


def is_hub_id(text: str) -> bool:
    """``org/name`` with no path-like parts (a relative path that exists is a directory)."""
    return bool(_HUB_ID.match(text)) and not text.startswith((".", "~"))


def resolve_hub_id(repo_id: str) -> Path:
    """The local snapshot of a Hub repository: from the Hugging Face cache (``HF_HOME``,
    ``HF_HUB_CACHE``), downloaded first when the Hub is reachable and not ``HF_HUB_OFFLINE``."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, allow_patterns=list(_HUB_FILES)))
    except LocalEntryNotFoundError as exc:
        raise CheckpointNotFoundError(
            f"{repo_id}: not in the Hugging Face cache and the Hub cannot be reached "
            f"(offline or HF_HUB_OFFLINE set): {exc}"
        ) from exc
    except (HfHubHTTPError, OSError, ValueError) as exc:
        raise CheckpointNotFoundError(
            f"{repo_id}: could not be resolved on the Hub: {exc}"
        ) from exc


def load_gguf(path: Path, dtype: torch.dtype) -> tuple[torch.nn.Module, Any]:
    """A GGUF file through transformers: weights dequantised to `dtype`, tokenizer and chat
    template read from the file's metadata."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not path.is_file():
        raise CheckpointNotFoundError(f"{path}: no such GGUF file")
    try:
        import gguf  # noqa: F401 - transformers reads the file with it
    except ImportError:
        raise ModelLoadError(
            f"{path}: loading GGUF needs the gguf package (pip install 'agentrl[gguf]')"
        ) from None
    where, name = str(path.parent), path.name
    extra: dict[str, Any] = {}
    try:  # transformers that can keep GGUF blocks packed must be told to unpack (to train)
        from transformers import GgufConfig

        extra["quantization_config"] = GgufConfig(dequantize=True)
    except ImportError:  # older transformers always dequantise
        pass
    try:
        tok = AutoTokenizer.from_pretrained(where, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(where, gguf_file=name, dtype=dtype, **extra)
    except (OSError, RuntimeError, ValueError, KeyError) as exc:
        raise ModelLoadError(f"{path}: GGUF model could not be loaded ({exc})") from exc
    model = model.to(dtype)
    if not hasattr(model.config, "agentrl_origin"):
        model.config.agentrl_origin = "hf"
    return model.eval(), tok


def _load_tokenizer(path: Path) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path))
    except Exception as exc:
        raise ModelLoadError(f"{path}: tokenizer could not be loaded ({exc})") from exc


def _has_tokenizer(path: Path) -> bool:
    return path.is_dir() and any((path / name).is_file() for name in _TOKENIZER_FILES)


def load_hf_dir(
    path: Path, dtype: torch.dtype, tokenizer: str | os.PathLike[str] | None = None
) -> tuple[torch.nn.Module, Any]:
    """A local HF causal-LM directory with its own tokenizer and chat template."""
    from safetensors import SafetensorError
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    config_file = path / "config.json"
    if not config_file.is_file():
        raise CheckpointNotFoundError(f"{path}: no config.json, so not a Hugging Face model dir")
    try:
        model_type = json.loads(config_file.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError) as exc:
        raise ModelLoadError(f"{config_file}: unreadable config ({exc})") from exc
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise UnsupportedArchitectureError(
            f"{config_file}: model_type {model_type!r} is not a causal LM that transformers "
            "can build (no remote code is run)"
        )
    tok_dir = Path(tokenizer) if tokenizer is not None else path
    if not _has_tokenizer(tok_dir):
        raise CheckpointNotFoundError(
            f"{tok_dir}: no tokenizer files ({', '.join(_TOKENIZER_FILES)}); pass tokenizer=DIR"
        )
    try:
        config = AutoConfig.from_pretrained(str(path))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{config_file}: not a usable model config ({exc})") from exc
    _check_safetensors_shapes(path, config)
    try:
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype)
    except (OSError, RuntimeError, ValueError, SafetensorError) as exc:
        raise ModelLoadError(f"{path}: model could not be loaded ({exc})") from exc
    if not hasattr(model.config, "agentrl_origin"):
        model.config.agentrl_origin = "hf"
    return model.eval(), _load_tokenizer(tok_dir)


def _check_safetensors_shapes(path: Path, config: Any) -> None:
    """Compare every stored tensor shape with the model the config describes, before loading.

    transformers reports mismatches in bulk (or silently re-initialises with a flag); here
    the first offending tensor is named with both shapes.
    """
    from safetensors import SafetensorError, safe_open
    from transformers import AutoModelForCausalLM

    files = sorted(path.glob("*.safetensors"))
    if not files:
        return
    with torch.device("meta"):
        shell = AutoModelForCausalLM.from_config(config)
    expected = {k: tuple(v.shape) for k, v in shell.state_dict().items()}
    bad: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = []
    for file in files:
        try:
            with safe_open(str(file), framework="pt") as handle:
                for name in handle.keys():  # noqa: SIM118 - safe_open is not a Mapping
                    if name in expected:
                        shape = tuple(handle.get_slice(name).get_shape())
                        if shape != expected[name]:
                            bad.append((name, shape, expected[name]))
        except SafetensorError as exc:  # truncated or not safetensors at all
            raise ModelLoadError(
                f"model file {file} is not a valid safetensors file: {first_line(exc)}"
            ) from exc
    if bad:
        name, got, want = bad[0]
        raise ShapeMismatchError(name, got, want, str(path), len(bad) - 1)


def _find_minimind_tokenizer(pth: Path, tokenizer: str | os.PathLike[str] | None) -> Path:
    if tokenizer is not None:
        tok_dir = Path(tokenizer).expanduser()
        if not _has_tokenizer(tok_dir):
            raise CheckpointNotFoundError(f"tokenizer directory {tok_dir} has no tokenizer files")
        return tok_dir
    for candidate in (pth.parent, pth.parent.parent / "model", pth.parent / "tokenizer"):
        if _has_tokenizer(candidate):
            return candidate
    raise CheckpointNotFoundError(
        f"{pth}: no tokenizer found beside the checkpoint or in ../model; pass tokenizer=DIR "
        "(MiniMind keeps it in its model/ directory)"
    )


def load_minimind(
    path: Path,
    dtype: torch.dtype,
    tokenizer: str | os.PathLike[str] | None,
    overrides: dict[str, Any],
) -> tuple[torch.nn.Module, Any]:
    """A MiniMind `.pth` plus its tokenizer, as the equivalent transformers model."""
    from agentrl.models.minimind import build_from_state_dict, read_state_dict

    sd = read_state_dict(path)
    tok_dir = _find_minimind_tokenizer(path, tokenizer)
    model = build_from_state_dict(sd, str(path), dtype, **overrides)
    tok = _load_tokenizer(tok_dir)
    vocab = model.get_input_embeddings().weight.shape[0]
    if len(tok) > vocab:
        raise ModelLoadError(
            f"{tok_dir}: tokenizer has {len(tok)} tokens but {path} embeds only {vocab}"
        )
    return model, tok
