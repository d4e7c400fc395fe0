"""The tiny preset, HF directories and MiniMind checkpoints: building, loading, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from agentrl.models import (
    CheckpointNotFoundError,
    ModelLoadError,
    ShapeMismatchError,
    UnsupportedArchitectureError,
    autocast_context,
    export_pth,
    frozen_copy,
    load_policy,
    policy_origin,
    resolve_dtype,
)
from agentrl.models.tiny import build_model, save_preset
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

from tests.fakes.models import SMALL_SPEC, fresh_small_tokenizer

SMALL = SMALL_SPEC


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory, small_tokenizer) -> Path:
    path = tmp_path_factory.mktemp("tok")
    small_tokenizer.save_pretrained(str(path))
    return path


def _ids(seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, 300, (2, 11), generator=gen)


# ---- tiny preset ----


def test_tiny_tokenizer_has_minimind_token_layout(small_tokenizer):
    tok = small_tokenizer
    assert tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) == [0, 1, 2]
    markup = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
    markup += ["<think>", "</think>", "<answer>", "</answer>"]
    assert tok.convert_tokens_to_ids(markup) == list(range(21, 29))
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 1, 2)
    # Tool tags survive skip_special_tokens, as in MiniMind; the turn markers do not.
    ids = tok("<|im_start|><tool_call>x</tool_call><|im_end|>", add_special_tokens=False)
    assert tok.decode(ids["input_ids"], skip_special_tokens=True) == "<tool_call>x</tool_call>"


def test_tiny_tokenizer_chunks_digit_runs_by_three(small_tokenizer):
    pieces = small_tokenizer.tokenize("1234567")
    assert [small_tokenizer.convert_tokens_to_string([p]) for p in pieces] == ["123", "456", "7"]
    # Every three-digit chunk is a single token, so numbers always split the same way.
    vocab = small_tokenizer.get_vocab()
    assert all(f"{i:03d}" in vocab for i in range(1000))


def test_tiny_tokenizer_renders_the_chat_template(small_tokenizer):
    msgs = [{"role": "user", "content": "hi"}]
    text = small_tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def test_tiny_preset_build_is_deterministic(small_tokenizer):
    again = fresh_small_tokenizer()
    assert again.backend_tokenizer.to_str() == small_tokenizer.backend_tokenizer.to_str()
    a = build_model(SMALL, len(small_tokenizer)).state_dict()
    b = build_model(SMALL, len(small_tokenizer)).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_tiny_tokenizer_is_identical_in_a_fresh_process(small_tokenizer):
    code = (
        "from agentrl.models.tiny import TinySpec, build_tokenizer, demo_corpus\n"
        f"spec = TinySpec(**{json.dumps(SMALL.__dict__)})\n"
        "tok = build_tokenizer(spec, demo_corpus(spec.corpus_tasks, spec.corpus_seed))\n"
        "import sys; sys.stdout.write(tok.backend_tokenizer.to_str())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == small_tokenizer.backend_tokenizer.to_str()


def test_tiny_preset_round_trips_through_an_hf_directory(tmp_path, small_tokenizer):
    model = build_model(SMALL, len(small_tokenizer))
    save_preset(model, small_tokenizer, tmp_path / "tiny")
    loaded, tok = load_policy(str(tmp_path / "tiny"), device="cpu")
    assert type(loaded).__name__ == "Qwen3ForCausalLM"
    assert policy_origin(loaded) == "tiny"
    assert tok.chat_template == small_tokenizer.chat_template
    text = "<|im_start|>user\n计算 12345*678<|im_end|>"
    assert tok(text)["input_ids"] == small_tokenizer(text)["input_ids"]
    with torch.no_grad():
        assert torch.equal(model(_ids()).logits, loaded(_ids()).logits)


# ---- MiniMind checkpoints ----


def _random_model(model_class: Any, config_class: Any, vocab: int, **sizes: Any) -> Any:
    """A random 2-layer model with tied embeddings, as MiniMind builds them."""
    rope = {"rope_type": "default", "rope_theta": 1e6}
    config = config_class(
        vocab_size=vocab,
        num_hidden_layers=2,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        rope_parameters=rope,
        **sizes,
    )
    return model_class(config).eval()


def _minimind3(vocab: int) -> Qwen3ForCausalLM:
    return _random_model(
        Qwen3ForCausalLM,
        Qwen3Config,
        vocab,
        hidden_size=48,
        intermediate_size=160,
        num_attention_heads=4,
        head_dim=12,
        rms_norm_eps=1e-6,
    )


def _minimind2(vocab: int) -> LlamaForCausalLM:
    return _random_model(
        LlamaForCausalLM,
        LlamaConfig,
        vocab,
        hidden_size=64,
        intermediate_size=192,
        num_attention_heads=8,
        rms_norm_eps=1e-5,
    )


def _minimind3_moe(vocab: int) -> Qwen3MoeForCausalLM:
    return _random_model(
        Qwen3MoeForCausalLM,
        Qwen3MoeConfig,
        vocab,
        hidden_size=48,
        intermediate_size=96,
        moe_intermediate_size=96,
        num_attention_heads=4,
        head_dim=12,
        num_experts=4,
        num_experts_per_tok=1,
        norm_topk_prob=True,
    )


def _save_minimind_layout(model: torch.nn.Module, path: Path) -> None:
    """Write a state dict the way MiniMind does: its names, fp16, per-expert MoE weights."""
    sd = {}
    for name, tensor in model.state_dict().items():
        if name.endswith("mlp.experts.gate_up_proj"):
            base = name.rsplit(".", 1)[0]
            for e in range(tensor.shape[0]):
                gate, up = tensor[e].chunk(2, dim=0)
                sd[f"{base}.{e}.gate_proj.weight"] = gate.half()
                sd[f"{base}.{e}.up_proj.weight"] = up.half()
        elif name.endswith("mlp.experts.down_proj"):
            base = name.rsplit(".", 1)[0]
            for e in range(tensor.shape[0]):
                sd[f"{base}.{e}.down_proj.weight"] = tensor[e].half()
        else:
            sd[name] = tensor.half()
    torch.save(sd, path)


def _fp16_twin(model: torch.nn.Module) -> torch.nn.Module:
    twin = frozen_copy(model)
    twin.load_state_dict({k: v.half().float() for k, v in model.state_dict().items()})
    return twin


@pytest.mark.parametrize(
    ("factory", "arch"),
    [
        (_minimind3, "Qwen3ForCausalLM"),
        (_minimind2, "LlamaForCausalLM"),
        (_minimind3_moe, "Qwen3MoeForCausalLM"),
    ],
)
def test_minimind_pth_gives_the_logits_of_its_hf_model(
    tmp_path, tokenizer_dir, small_tokenizer, factory, arch
):
    torch.manual_seed(1)
    source = factory(len(small_tokenizer))
    pth = tmp_path / "agent_48.pth"
    _save_minimind_layout(source, pth)
    model, _ = load_policy(str(pth), device="cpu", tokenizer=str(tokenizer_dir))
    assert type(model).__name__ == arch
    assert policy_origin(model) == "minimind"
    assert next(model.parameters()).dtype == torch.float32
    with torch.no_grad():
        expected = _fp16_twin(source)(_ids()).logits
        got = model(_ids()).logits
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    # Export writes MiniMind's names back, fp16, and re-imports to the same model.
    out = export_pth(model, tmp_path / "again.pth")
    assert sorted(torch.load(out)) == sorted(torch.load(pth))
    assert all(t.dtype == torch.float16 for t in torch.load(out).values())
    reloaded, _ = load_policy(str(out), device="cpu", tokenizer=str(tokenizer_dir))
    with torch.no_grad():
        torch.testing.assert_close(reloaded(_ids()).logits, got, rtol=0, atol=1e-5)


def test_minimind_tokenizer_is_found_beside_the_checkpoint(
    tmp_path, tokenizer_dir, small_tokenizer
):
    small_tokenizer.save_pretrained(str(tmp_path))
    _save_minimind_layout(_minimind3(len(small_tokenizer)), tmp_path / "full_sft_48.pth")
    model, tok = load_policy(str(tmp_path / "full_sft_48.pth"), device="cpu", dtype="bfloat16")
    assert next(model.parameters()).dtype == torch.bfloat16
    assert tok.eos_token_id == 2


def test_missing_checkpoint_names_the_path(tmp_path):
    with pytest.raises(CheckpointNotFoundError, match=r"nope\.pth"):
        load_policy(str(tmp_path / "nope.pth"))
    with pytest.raises(CheckpointNotFoundError, match="neither 'tiny'"):
        load_policy(str(tmp_path / "no_such_dir"))


def test_missing_tokenizer_is_a_precise_error(tmp_path, small_tokenizer):
    _save_minimind_layout(_minimind3(len(small_tokenizer)), tmp_path / "x.pth")
    with pytest.raises(CheckpointNotFoundError, match="no tokenizer found"):
        load_policy(str(tmp_path / "x.pth"))


def test_shape_mismatch_names_the_tensor_and_both_shapes(tmp_path, tokenizer_dir, small_tokenizer):
    source = _minimind3(len(small_tokenizer))
    _save_minimind_layout(source, tmp_path / "x.pth")
    sd = torch.load(tmp_path / "x.pth")
    sd["model.layers.1.mlp.up_proj.weight"] = torch.zeros(128, 48, dtype=torch.float16)
    torch.save(sd, tmp_path / "x.pth")
    with pytest.raises(ShapeMismatchError) as info:
        load_policy(str(tmp_path / "x.pth"), tokenizer=str(tokenizer_dir))
    message = str(info.value)
    assert "model.layers.1.mlp.up_proj.weight" in message
    assert "(128, 48)" in message and "(160, 48)" in message


def test_missing_and_unexpected_tensors_are_named(tmp_path, tokenizer_dir, small_tokenizer):
    _save_minimind_layout(_minimind3(len(small_tokenizer)), tmp_path / "x.pth")
    sd = torch.load(tmp_path / "x.pth")
    del sd["model.layers.1.self_attn.k_norm.weight"]
    torch.save(sd, tmp_path / "x.pth")
    with pytest.raises(ModelLoadError, match=r"'model\.layers\.1\.self_attn\.k_norm\.weight'"):
        load_policy(str(tmp_path / "x.pth"), tokenizer=str(tokenizer_dir))


def test_unsupported_minimind_architectures_are_refused(tmp_path, tokenizer_dir, small_tokenizer):
    sd = {k: v.half() for k, v in _minimind2(len(small_tokenizer)).state_dict().items()}
    sd["model.layers.0.mlp.shared_experts.0.gate_proj.weight"] = torch.zeros(4, 64)
    torch.save(sd, tmp_path / "moe.pth")
    with pytest.raises(UnsupportedArchitectureError, match="shared experts"):
        load_policy(str(tmp_path / "moe.pth"), tokenizer=str(tokenizer_dir))
    torch.save({"encoder.weight": torch.zeros(2, 2)}, tmp_path / "other.pth")
    with pytest.raises(UnsupportedArchitectureError, match=r"model\.embed_tokens\.weight"):
        load_policy(str(tmp_path / "other.pth"), tokenizer=str(tokenizer_dir))


def test_hf_dir_errors_name_the_problem(tmp_path, small_tokenizer):
    model = build_model(SMALL, len(small_tokenizer))
    save_preset(model, small_tokenizer, tmp_path / "ok")
    # A non-causal architecture.
    for kind in ("vit", "made_up_arch"):
        bad = tmp_path / kind
        bad.mkdir()
        (bad / "config.json").write_text(json.dumps({"model_type": kind}))
        with pytest.raises(UnsupportedArchitectureError, match=f"'{kind}'"):
            load_policy(str(bad))
    # A config that disagrees with the stored weights.
    cfg = json.loads((tmp_path / "ok" / "config.json").read_text())
    cfg["intermediate_size"] = 80
    (tmp_path / "ok" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ShapeMismatchError, match=r"mlp\.\w+_proj\.weight.*\(64, 32\)|\(32, 64\)"):
        load_policy(str(tmp_path / "ok"))
    # A directory without a config.
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CheckpointNotFoundError, match=r"no config\.json"):
        load_policy(str(empty))


# ---- copies and dtypes ----


def test_frozen_copy_is_independent_and_gradient_free(small_tokenizer):
    model = build_model(SMALL, len(small_tokenizer)).train()
    ref = frozen_copy(model)
    assert not ref.training and not any(p.requires_grad for p in ref.parameters())
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    assert not torch.equal(next(model.parameters()), next(ref.parameters()))


def test_dtype_rules():
    assert resolve_dtype(None, "cpu") == torch.float32
    assert resolve_dtype(None, "cuda") == torch.float32  # CUDA computes in bf16 via autocast
    assert resolve_dtype("bf16") == torch.bfloat16
    assert resolve_dtype(torch.float16) == torch.float16
    with pytest.raises(ModelLoadError, match="unknown dtype"):
        resolve_dtype("float8")
    with autocast_context("cpu"):
        assert not torch.is_autocast_enabled()
