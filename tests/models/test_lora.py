"""LoRA through peft: only the adapter trains, the reference is the adapter switched off,
checkpoints hold the adapter alone, and the merged export is a plain model that loads
and generates."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

peft = pytest.importorskip("peft", reason="LoRA needs peft (pip install 'agentrl[lora]')")

from agentrl.models import lora  # noqa: E402

from tests.fakes.runs import short_run_config  # noqa: E402

# peft asks transformers a deprecated question; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing:FutureWarning")
IDS = torch.tensor([[1, 5, 9, 14, 3, 7]])


def _load(run_files: Path):
    from agentrl.models import load_policy

    return load_policy(str(run_files / "model"), "float32", "cpu")


def _wrapped(run_files: Path, **kwargs):
    model, tok = _load(run_files)
    return lora.apply_lora(model, lora.LoraSettings(rank=4, alpha=8, **kwargs)), tok


def _perturb_adapter(model, scale: float = 0.2) -> None:
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * scale)


def _logits(model, ids=IDS) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_only_adapter_weights_are_trainable_and_start_as_a_no_op(run_files):
    base, _ = _load(run_files)
    policy, _ = _wrapped(run_files)
    trainable = [n for n, p in policy.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert torch.allclose(_logits(policy), _logits(base), atol=1e-6)


def test_target_modules_and_settings_are_validated(run_files):
    policy, _ = _wrapped(run_files, target_modules="q_proj,v_proj")
    names = {
        n.split(".lora_")[0].rsplit(".", 1)[-1]
        for n, _ in policy.named_parameters()
        if "lora_A" in n
    }
    assert names == {"q_proj", "v_proj"}
    with pytest.raises(ValueError, match="lora_rank"):
        lora.LoraSettings(rank=0)
    with pytest.raises(ValueError, match="all-linear"):
        lora.LoraSettings(target_modules="all-linear,q_proj")
    model, _ = _load(run_files)
    with pytest.raises(ValueError, match=r"linear layers of this model: .*q_proj"):
        lora.apply_lora(model, lora.LoraSettings(target_modules="no_such_layer"))


def test_reference_view_is_the_base_model_without_weights_of_its_own(run_files):
    base, _ = _load(run_files)
    policy, _ = _wrapped(run_files)
    _perturb_adapter(policy)
    reference = lora.ReferenceView(policy)
    assert list(reference.parameters()) == []
    assert not torch.allclose(_logits(policy), _logits(base), atol=1e-4)
    assert torch.allclose(_logits(reference), _logits(base), atol=1e-6)
    with torch.enable_grad():
        assert not reference(input_ids=IDS).logits.requires_grad
    assert not torch.allclose(_logits(policy), _logits(base), atol=1e-4)  # adapter back on


def test_merged_weights_match_peft_merge_without_touching_the_model(run_files):
    policy, _ = _wrapped(run_files)
    _perturb_adapter(policy)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    merged = lora.merged_state_dict(policy)
    after = policy.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # nothing merged in place
    import copy

    reference = copy.deepcopy(policy).merge_and_unload().state_dict()
    assert set(merged) == set(reference)
    for key, value in reference.items():
        assert torch.allclose(merged[key], value, atol=1e-6), key
    plain, _ = _load(run_files)
    plain.load_state_dict(merged)
    assert torch.allclose(_logits(plain), _logits(policy), atol=1e-5)


def test_adapter_only_checkpoints_round_trip(run_files, tmp_path):
    from agentrl.training.checkpoint import ResumeState, load_checkpoint, save_checkpoint

    policy, _ = _wrapped(run_files)
    _perturb_adapter(policy)
    saved = lora.save_adapter(policy, tmp_path / "adapter")
    assert (saved / "adapter_config.json").is_file()
    base_size = sum(f.stat().st_size for f in (run_files / "model").glob("*.safetensors"))
    adapter_size = sum(f.stat().st_size for f in saved.glob("*.safetensors"))
    assert 0 < adapter_size < base_size / 3
    fresh, _ = _load(run_files)
    restored = lora.load_adapter(fresh, saved)
    assert torch.allclose(_logits(restored), _logits(policy), atol=1e-6)
    # The trainer's checkpoint format, through the adapter-only view.
    path = save_checkpoint(
        tmp_path / "ckpt", lora.AdapterCheckpointView(policy), ResumeState(step=1)
    )
    weights = torch.load(path / "model.pt", weights_only=True)
    assert weights and all("lora_" in k for k in weights)
    other, _ = _wrapped(run_files)
    load_checkpoint(path, lora.AdapterCheckpointView(other))
    assert torch.allclose(_logits(other), _logits(policy), atol=1e-6)


def test_merged_export_reloads_without_peft_and_generates(run_files, tmp_path):
    from agentrl.models import load_policy
    from agentrl.rollout import SamplingParams
    from agentrl.rollout.engine import TorchEngine

    policy, tok = _wrapped(run_files)
    _perturb_adapter(policy)
    out = lora.export_merged(policy, tok, tmp_path / "merged")
    assert not (out / "adapter_config.json").exists()
    model, tokenizer = load_policy(str(out), "float32", "cpu")
    assert not lora.is_lora_model(model)
    assert torch.allclose(_logits(model), _logits(policy), atol=1e-5)
    engine = TorchEngine(model, tokenizer, seed=0)
    (gen,) = engine.generate(
        [tokenizer("2+3=")["input_ids"]], SamplingParams(greedy=True, max_new_tokens=6)
    )
    assert len(gen.token_ids) + (gen.end_token_id is not None) > 0


def test_rollout_engine_takes_the_merged_weights(run_files):
    from agentrl.models import frozen_copy
    from agentrl.rollout.engine import TorchEngine

    base, tok = _load(run_files)
    engine = TorchEngine(frozen_copy(base), tok)
    policy = lora.apply_lora(base, lora.LoraSettings(rank=4, alpha=8))
    _perturb_adapter(policy)
    assert engine.update_weights(lora.merged_state_dict(policy), version=1, strict=True)
    assert torch.allclose(_logits(engine.model), _logits(policy), atol=1e-5)


@pytest.mark.slow
def test_a_short_lora_run_changes_only_adapter_weights(run_files, tmp_path):
    from agentrl.models import load_policy
    from agentrl.placement import LoraAdapter
    from agentrl.trainer import Trainer

    config = short_run_config(
        run_files,
        tmp_path,
        "lora",
        total_steps=3,
        max_gen_len=8,
        learning_rate=5e-2,
        bc_max_examples=2,
        bc_max_len=256,
        lora_rank=4,
        lora_alpha=8,
        lora_target_modules="q_proj,v_proj",
        seed=3,
    )
    trainer = Trainer(config)
    assert isinstance(trainer.adapter, LoraAdapter)  # the config's lora_* options, read as they are
    result = trainer.run()
    assert result.steps_done == 3
    policy = trainer.models.policy
    assert lora.is_lora_model(policy)
    assert isinstance(trainer.models.reference, lora.ReferenceView)
    base, _ = _load(run_files)
    trained = policy.get_base_model().state_dict()
    for key, value in base.state_dict().items():
        name = key.replace("q_proj.", "q_proj.base_layer.").replace("v_proj.", "v_proj.base_layer.")
        assert torch.equal(trained[name], value), f"base weight {key} moved"
    adapter = lora.adapter_state_dict(policy)
    assert any(float(v.abs().max()) > 0 for k, v in adapter.items() if "lora_B" in k)
    # The rollout engine followed the merged policy after each sync.
    assert trainer.source.version.get() == 3
    engine_state = trainer.source.engine.model.state_dict()
    merged = lora.merged_state_dict(policy)
    assert all(torch.allclose(engine_state[k], merged[k], atol=1e-6) for k in merged)
    # Adapter-only checkpoint, adapter export and merged export.
    weights = torch.load(result.checkpoint / "model.pt", weights_only=True)
    assert all("lora_" in k for k in weights)
    assert (result.run_dir / "adapter" / "adapter_config.json").is_file()
    exported, _ = load_policy(str(result.policy_export), "float32", "cpu")
    assert torch.allclose(_logits(exported), _logits(policy), atol=1e-5)
    # Resume from the adapter-only checkpoint: the adapter comes back, the base stays.
    resumed = Trainer(dataclasses.replace(config, total_steps=4, from_resume=1))
    assert resumed.run().steps_done == 4
    assert resumed.counters.step == 4


def test_is_lora_model_while_another_thread_is_still_importing_peft(monkeypatch):
    # Mid-import, peft's modules are in sys.modules without their classes yet: the check
    # must answer (no peft model can exist yet), not raise AttributeError.
    import sys
    import types

    monkeypatch.setitem(sys.modules, "peft", types.ModuleType("peft"))
    monkeypatch.setitem(sys.modules, "peft.peft_model", types.ModuleType("peft.peft_model"))
    assert not lora.is_lora_model(torch.nn.Linear(2, 2))
