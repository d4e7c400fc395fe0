"""LoRA in the warm start: only the adapter trains, checkpoints hold the adapter and resume
exactly, and the run directory holds merged full weights that RL and eval load."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

peft = pytest.importorskip("peft", reason="LoRA needs peft (pip install 'agentrl[lora]')")

from agentrl.errors import UsageError  # noqa: E402
from agentrl.models import load_policy, lora  # noqa: E402
from agentrl.models.tiny import build_model  # noqa: E402
from agentrl.sft import checkpoint as ckpt  # noqa: E402
from agentrl.sft.data import build_examples  # noqa: E402
from agentrl.sft.tasks import generated_demos, tool_env  # noqa: E402
from agentrl.sft.train import SFTConfig, train_sft  # noqa: E402

from tests.fakes.models import SMALL_SPEC  # noqa: E402
from tests.fakes.runs import short_run_config  # noqa: E402

SETTINGS = lora.LoraSettings(rank=4, alpha=16)
TINY = (
    "vocab_size=3072,hidden_size=32,num_layers=2,num_heads=2,num_kv_heads=1,head_dim=16,"
    "intermediate_size=64,corpus_tasks=150"
)


@pytest.fixture(scope="module")
def tok(small_tokenizer):
    return small_tokenizer


@pytest.fixture(scope="module")
def env(tok):
    return tool_env(tok)


@pytest.fixture(scope="module")
def examples(tok, env):
    return build_examples(generated_demos(48, seed=5), tok, env.render, max_len=1024)


def _quiet(_: str) -> None:
    return None


def _base(tok, spec=SMALL_SPEC) -> torch.nn.Module:
    """The small preset with its (tied) output layer scaled up: a fresh model's logits are
    nearly uniform whatever its layers compute, so an adapter on those layers alone would
    barely move the loss; a trained base's are not."""
    model = build_model(spec, len(tok))
    with torch.no_grad():
        model.lm_head.weight.mul_(10.0)
    return model


def _policy(tok, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return lora.apply_lora(_base(tok), SETTINGS)


def _config(out: Path, **overrides) -> SFTConfig:
    base = dict(
        output_dir=str(out),
        steps=16,
        lr=3e-2,
        warmup_steps=2,
        eval_interval=0,
        save_interval=0,
        log_interval=4,
        progress=False,
    )
    return SFTConfig(**{**base, **overrides})


def _base_weights(model) -> dict[str, torch.Tensor]:
    return {
        k: v.clone() for k, v in model.get_base_model().state_dict().items() if "lora_" not in k
    }


@pytest.mark.slow
def test_lora_sft_trains_only_the_adapter_and_publishes_merged_weights(
    tmp_path, tok, env, examples
):
    model = _policy(tok)
    before = _base_weights(model)
    result = train_sft(model, tok, examples, [], env, _config(tmp_path), log=_quiet)
    records = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if "loss" in r]
    assert result.steps == 16 and losses[-1] < 0.85 * losses[0]
    after = _base_weights(model)
    assert all(torch.equal(before[k], after[k]) for k in before), "a base weight moved"
    assert any(float(v.abs().max()) > 0 for k, v in lora.adapter_state_dict(model).items())
    # Checkpoints hold the adapter alone.
    saved = ckpt.list_checkpoints(tmp_path / "checkpoints")[-1]
    weights = torch.load(saved / "model.pt", weights_only=True)
    assert weights and all("lora_" in k for k in weights)
    # The run directory is a plain model (no peft) computing what the adapted policy does.
    loaded, _ = load_policy(str(tmp_path), device="cpu")
    assert not lora.is_lora_model(loaded)
    ids = torch.tensor([examples[0].input_ids])
    with torch.no_grad():  # W + BA merged rounds apart from x W + x A B: float32's 1e-4
        merged, adapted = loaded(ids).logits, model.eval()(ids).logits
        torch.testing.assert_close(merged, adapted, rtol=1e-4, atol=1e-4)
    assert (tmp_path / "adapter" / "adapter_config.json").is_file()
    summary = json.loads((tmp_path / "sft_summary.json").read_text())
    assert summary["adapter"]["rank"] == 4


def _bf16_policy(tok, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return lora.apply_lora(_base(tok).to(torch.bfloat16), SETTINGS)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_resumed_lora_run_matches_an_uninterrupted_one(tmp_path, tok, env, examples, dtype):
    """A bfloat16 model's adapter is bfloat16 and steps on float32 masters, which the
    checkpoint holds: without them a resumed run would start from the rounded adapter."""
    policy = _policy if dtype == torch.float32 else _bf16_policy
    whole = policy(tok)
    assert {p.dtype for p in whole.parameters() if p.requires_grad} == {dtype}
    train_sft(whole, tok, examples, [], env, _config(tmp_path / "a", steps=6), log=_quiet)
    part = policy(tok)
    cfg = _config(tmp_path / "b", steps=6, stop_after=3)
    train_sft(part, tok, examples, [], env, cfg, log=_quiet)
    state = ckpt.load_trainer_state(ckpt.list_checkpoints(tmp_path / "b" / "checkpoints")[-1])
    masters = state.get("master_weights")
    assert (masters is None) == (dtype == torch.float32)
    if masters is not None:
        assert all(m.dtype == torch.float32 for m in masters)
    resumed = policy(tok, seed=9)  # another adapter init: all state must come from disk
    cfg = _config(tmp_path / "b", steps=6, resume=True)
    train_sft(resumed, tok, examples, [], env, cfg, log=_quiet)
    a, b = lora.adapter_state_dict(whole), lora.adapter_state_dict(resumed)
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=1e-6, msg=name)
    a, b = (load_policy(str(tmp_path / d), device="cpu")[0].state_dict() for d in "ab")
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=1e-6, msg=name)


def test_a_resume_refuses_a_checkpoint_of_another_kind_or_base(tmp_path, tok, env, examples):
    full = build_model(SMALL_SPEC, len(tok))
    cfg = _config(tmp_path / "full", steps=1, log_interval=1)
    train_sft(full, tok, examples[:4], [], env, cfg, log=_quiet)
    with pytest.raises(UsageError, match="all weights"):
        train_sft(_policy(tok), tok, examples[:4], [], env, dataclasses.replace(cfg, resume=True))
    cfg = _config(tmp_path / "lora", steps=1, log_interval=1)
    train_sft(_policy(tok), tok, examples[:4], [], env, cfg, log=_quiet)
    resume = dataclasses.replace(cfg, steps=2, resume=True)
    with pytest.raises(UsageError, match="LoRA adapter"):
        train_sft(build_model(SMALL_SPEC, len(tok)), tok, examples[:4], [], env, resume)
    other_base = lora.apply_lora(_base(tok, dataclasses.replace(SMALL_SPEC, seed=7)), SETTINGS)
    with pytest.raises(UsageError, match="base model differs"):
        train_sft(other_base, tok, examples[:4], [], env, resume)
    wider = lora.apply_lora(_base(tok), lora.LoraSettings(rank=8))
    with pytest.raises(UsageError, match="lora_rank 8"):
        train_sft(wider, tok, examples[:4], [], env, resume)


def test_sft_takes_trains_lora_options_under_the_same_names():
    from agentrl.cli import command_parser
    from agentrl.commands.sft import SFT_DEFAULTS, options_from_args
    from agentrl.models.options import ModelConfig

    parser, _ = command_parser("sft")
    assert options_from_args(parser.parse_args([])).lora is None
    defaults = ModelConfig()
    assert {k: v for k, v in SFT_DEFAULTS.items() if k.startswith("lora_")} == {
        f.name: getattr(defaults, f.name)
        for f in dataclasses.fields(ModelConfig)
        if f.name.startswith("lora_")
    }
    args = ["--lora_rank", "8", "--lora_alpha", "4", "--lora_target_modules", "q_proj,v_proj"]
    options = options_from_args(parser.parse_args([*args, "--lora_dropout", "0.1"]))
    assert options.lora == lora.LoraSettings(8, 4.0, ("q_proj", "v_proj"), 0.1)
    assert "merged full weights" in parser.format_help()
    with pytest.raises(UsageError, match="lora_alpha"):
        options_from_args(parser.parse_args(["--lora_rank", "8", "--lora_alpha", "0"]))


@pytest.mark.slow
def test_a_lora_warm_start_loads_in_train_and_eval(tmp_path, run_files, capsys):
    from agentrl.cli import main
    from agentrl.trainer import Trainer

    out = tmp_path / "sft"
    sft = ["sft", "--tiny", TINY, "--num-demos", "24", "--eval-tasks", "2", "--steps", "2"]
    sft += ["--output", str(out), "--no-progress", "--device", "cpu", "--lora_rank", "4"]
    assert main(sft) == 0
    assert "in the LoRA adapter train" in capsys.readouterr().out
    evaluate = ["eval", "--model", str(out), "--data", str(run_files / "prompts.jsonl")]
    evaluate += ["--eval_samples", "2", "--max_turns", "1", "--max_gen_len", "8"]
    assert main([*evaluate, "--device", "cpu"]) == 0
    assert "exact match" in capsys.readouterr().out
    config = short_run_config(
        run_files, tmp_path, "rl", model=str(out), total_steps=1, max_gen_len=8
    )
    result = Trainer(config).run()
    assert result.steps_done == 1
