"""`make real-model`'s parts without the model: the ``real`` preset is options only (any
--model), and the recipe finds its GGUF from the installed package or says how to get it."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys

import pytest
from agentrl.config import resolve
from agentrl.config.presets import PRESETS

from tests.fakes.repo import load_bench


def _recipe():
    return load_bench("real_model")


def test_the_real_preset_names_no_model_and_detects_the_dtype():
    assert not PRESETS["real"]["model"]
    cfg = resolve(preset="real", overrides={"model": "some/dir"})
    assert (cfg.model, cfg.run_name, cfg.dtype) == ("some/dir", "dir-rl", "auto")
    assert cfg.max_context_len >= 1024 and cfg.num_mini_batches == 1
    # 32 episodes an update: at 16 the held-out score wandered from step to step.
    assert cfg.batch_size * cfg.num_generations == 32
    # A 200-task evaluation in chunks: all at once it held 21-23 GB of KV cache.
    assert 0 < cfg.rollout_batch_rows < 200
    # Three Hermes calls of a real tokenizer fit in a turn; the adapter trains, no KL pass.
    assert cfg.max_gen_len >= 192 and cfg.eval_max_gen_len >= 192 and cfg.stop_at_answer_end
    assert cfg.lora_rank > 0 and cfg.beta == 0.0 and not cfg.beta_auto_tune
    # Sampling near the greedy path at a constant rate (the tiny preset keeps its cosine).
    assert 0.7 < cfg.temperature < 1.0 and cfg.min_lr_ratio == 1.0 and cfg.top_k == 0
    assert resolve(preset="tiny").dtype == "float32"
    assert resolve(preset="tiny").min_lr_ratio == 0.1


def test_a_missing_model_package_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch):
    recipe = _recipe()

    def missing(name: str):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(SystemExit, match="make real-model"):
        recipe.packaged_gguf()


def test_the_recipe_warm_starts_on_batches_of_the_data_mix():
    # Grouped by length, the tool-less demonstrations fill batches of their own and the
    # seed decides the warm start's habit (docs/real-models.md).
    args = _recipe().parse_args([])
    assert args.sft_group_by_length == "false" and args.shortcut_scope == "one_expression"


def test_the_recipe_gives_unit_conversions_more_demonstrations():
    # Among single-result demonstrations that answer outright, 8% unit conversions took the
    # habit too and RL sent them to calculate_math (docs/real-models.md).
    from agentrl.data.synthetic import DEFAULT_MIX, parse_mix

    mix = dict(parse_mix(_recipe().parse_args([]).sft_mix))
    assert mix["unit"] > 2 * dict(DEFAULT_MIX)["unit"] and set(mix) == set(dict(DEFAULT_MIX))


def test_the_rl_prompts_hold_the_warm_starts_share_of_unit_conversions(tmp_path):
    # At the default 8% a step of 8 prompts held 0.6 conversions; the policy learned "call
    # a tool" from the math prompts and sent held-out conversions to calculate_math.
    import json

    from agentrl.assembly.prompts import write_generated_prompts
    from agentrl.data.synthetic import parse_mix

    cfg = resolve(preset="real", overrides={"model": "some/dir"})
    assert cfg.generated_mix == _recipe().parse_args([]).sft_mix
    assert dict(parse_mix(cfg.generated_mix))["unit"] == 0.2
    path = write_generated_prompts(tmp_path / "p.jsonl", 400, set(), cfg.generated_mix)
    kinds = [json.loads(line)["kind"] for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(kinds) == 400 and 0.14 < kinds.count("unit") / 400 < 0.26
    only = write_generated_prompts(tmp_path / "u.jsonl", 20, set(), "unit=1")
    assert {json.loads(line)["kind"] for line in only.read_text(encoding="utf-8").splitlines()} == {
        "unit"
    }
    with pytest.raises(ValueError, match="generated_mix"):
        resolve(overrides={"generated_mix": "math=0.5,proofs=0.5"})


def test_the_summary_says_no_calls_where_an_evaluation_made_none():
    # A policy that stopped calling (Gemma 3 after two RL steps) printed "nan%" before.
    share = _recipe()._calls_that_worked
    assert share({"eval/tools/error_rate": 0.085}) == "91.5%"
    assert share({}) == share({"eval/tools/error_rate": float("nan")}) == "no calls"


def test_each_command_records_its_cpu_seconds_and_the_machines_rate(tmp_path, monkeypatch):
    # On a shared machine equal wall time is only fair if the machine was as fast for both
    # stages: the summaries carry each command's CPU seconds and the probe's samples.
    recipe = _recipe()
    monkeypatch.setattr(recipe, "PROBE_INTERVAL_S", 0.05)
    monkeypatch.setattr(recipe, "CPU_SECONDS", {})
    monkeypatch.setattr(recipe, "MACHINE_GFLOPS", {})
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass"
    wall = recipe.run([sys.executable, "-c", busy], tmp_path / "rl.log", probe=True)
    recipe.run([sys.executable, "-c", "pass"], tmp_path / "control.log")
    assert wall >= 0.4
    record = recipe.machine_record()
    assert record["cpu_seconds"]["rl"] >= 0.4 > record["cpu_seconds"]["control"]
    rates = record["machine_bf16_gflops"]
    assert list(rates) == ["rl"] and rates["rl"]["median"] > 0
    assert "RL: " in recipe.machine_line("rl", "control")
