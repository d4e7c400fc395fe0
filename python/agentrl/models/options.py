"""Which policy a run trains and how (the ``model`` section of the run's config)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from agentrl.parsing import TOOL_FORMATS
from agentrl.utils.options import option

__all__ = ["ModelConfig"]


@dataclass(frozen=True)
class ModelConfig:
    """The policy, its tokenizer and chat template, and LoRA."""

    SECTION: ClassVar[str] = "model"

    model: str = option(
        "",
        "policy: tiny, an HF dir or Hub id, a .gguf file or a .pth ('': from_weight)",
        common=True,
    )
    tokenizer: str = option("", "tokenizer dir for a MiniMind .pth checkpoint")
    chat_template: str = option(
        "",
        "chat template: '' the tokenizer's own, builtin, or a Jinja / tokenizer_config.json file",
    )
    tool_format: str = option(
        "auto",
        "tool-call format: auto reads every family and writes the detected one (for a "
        "template that renders no tools); a family name pins it (docs/tool-formats.md)",
        tuple(TOOL_FORMATS),
    )
    from_weight: str = option(
        "full_sft", "loads save_dir/<from_weight>_<hidden_size>.pth when model is ''"
    )
    hidden_size: int = option(768, "MiniMind width (names the .pth; else inferred)")
    num_hidden_layers: int = option(8, "MiniMind depth")
    use_moe: bool = option(False, "MiniMind mixture-of-experts checkpoint naming")
    max_seq_len: int = option(1024, "MiniMind sequence budget")
    lora_rank: int = option(0, "LoRA adapter rank (0: train all weights)", check=">=0", common=True)
    lora_alpha: float = option(32.0, "LoRA scaling alpha", check=">=0")
    lora_target_modules: str = option(
        "all-linear", "LoRA targets: all-linear or comma-separated names"
    )
    lora_dropout: float = option(0.0, "LoRA dropout", check="[0,1]")
    ref_from_rl_checkpoint: bool = option(
        False, "on resume, load the reference policy from the RL checkpoint too"
    )
    save_pth: bool = option(
        False,
        "at each checkpoint also write the weights to save_dir/<run name>_<hidden size>"
        "[_moe].pth (fp16, MiniMind's file layout)",
    )
    reference_model_path: str = option(
        "", "the KL reference's own weights, a model spec as --model ('': the policy as loaded)"
    )
