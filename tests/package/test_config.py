"""The trainer config: every compatible flag under its name and default, files, flags, errors."""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import fields
from pathlib import Path

import pytest
from agentrl.config import (
    ALIASES,
    COMPAT_ONLY,
    OPTION_NAMES,
    TrainConfig,
    add_config_arguments,
    config_from_args,
    read_toml,
    resolve,
)
from agentrl.rewards import RewardConfig

COMPAT_FLAGS = json.loads(
    (Path(__file__).parents[1] / "data" / "compat_train_flags.json").read_text()
)


def _parse(argv: list[str]) -> TrainConfig:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    return config_from_args(parser.parse_args(argv))


def test_every_compatible_flag_is_an_option_with_its_default():
    # An option agentrl names more plainly (save_weight: the run's name) is read under the
    # reference's name through ALIASES.
    flat = resolve(preset="compat").flat()
    assert len(COMPAT_FLAGS) == 141
    for name, default in COMPAT_FLAGS.items():
        own = ALIASES.get(name, name)
        assert own in flat, name
        if name != "device":  # "auto": CUDA when present, which is what the flag meant
            assert flat[own] == default, name


def test_every_compatible_flag_is_accepted_on_the_command_line():
    argv = []
    for name, default in COMPAT_FLAGS.items():
        if name in ("use_reward_model", "device"):
            continue
        argv += [f"--{name}", str(default)]
    config = _parse(["--preset", "compat", *argv])
    flat = config.flat()
    for name, default in COMPAT_FLAGS.items():
        if name not in ("use_reward_model", "device"):
            assert flat[ALIASES.get(name, name)] == default, name


def test_reward_options_land_in_the_reward_config():
    config = _parse(["--reward_exact_match_weight", "5", "--format_enforce_mode", "hard"])
    assert isinstance(config.reward, RewardConfig)
    assert config.reward.reward_exact_match_weight == 5.0
    assert config.reward.format_enforce_mode == "hard"
    assert config.flat()["reward_scale"] == 3.0
    assert "current_step" not in OPTION_NAMES


def test_flags_override_the_file_which_overrides_the_preset(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(
        'preset = "compat"\nbatch_size = 3\n[optim]\nlearning_rate = 1\n'
        '[reward]\nreward_base = 0.5\n[loss]\nloss_reduction = "dapo"\n'
    )
    config = _parse(["--config", str(path), "--batch_size", "5", "--data", "x.jsonl"])
    assert config.batch_size == 5
    assert config.learning_rate == 1.0 and isinstance(config.learning_rate, float)
    assert config.reward.reward_base == 0.5
    assert config.loss_reduction == "dapo"
    assert config.data_path == "x.jsonl"
    assert config.save_dir == "../out"  # the compat preset, from the file


def test_default_preset_is_the_built_in_cpu_run():
    config = resolve()
    assert config.model == "runs/tiny-sft" and config.data_path == ""
    assert config.device == "cpu" and not config.use_wandb


def test_resolved_config_round_trips_through_toml(tmp_path):
    config = _parse(["--epsilon_high", "0.28", "--use_wandb", "false", "--top_k", "7"])
    path = tmp_path / "resolved.toml"
    path.write_text(config.to_toml())
    again = resolve(preset="compat", config_file=path)
    assert again == config


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"batch_size": 0}, "batch_size=0: expected at least 1"),
        ({"loss_reduction": "mean"}, "loss_reduction='mean': expected one of token"),
        ({"use_decoupled_ppo": 2}, "use_decoupled_ppo=2: expected true or false"),
        ({"top_p": 0.0}, "top_p=0.0"),
        ({"learning_rate": float("nan")}, "finite"),
        ({"max_turns": 1.5}, "max_turns=1.5: expected an integer"),
        ({"adam_beta2": 1.5}, "adam_beta2=1.5: expected a value in [0, 1]"),
        ({"adam_epsilon": 0.0}, "adam_epsilon=0.0: expected a positive number"),
        ({"dynamic_sampling_rounds": -1}, "dynamic_sampling_rounds=-1: expected 0 or more"),
        ({"eval_generations": 0}, "eval_generations=0: expected at least 1"),
        ({"beta_min": 0.5, "beta_max": 0.1}, "beta_min=0.5 is above beta_max=0.1"),
        ({"use_reward_model": 1}, "use_reward_model=True"),
        ({"learning_rat": 1e-3}, "did you mean 'learning_rate'"),
        ({"reward_base": "x"}, "reward_base"),
    ],
)
def test_bad_values_are_errors_that_name_the_option(values, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        resolve(preset="compat", overrides=values)


def test_toml_errors_name_the_file_and_place(tmp_path):
    wrong_table = tmp_path / "a.toml"
    wrong_table.write_text("[optim]\nepsilon = 0.1\n")
    with pytest.raises(ValueError, match=r"a.toml: \[optim\] epsilon belongs in \[loss\]"):
        read_toml(wrong_table)
    unknown_table = tmp_path / "b.toml"
    unknown_table.write_text("[model_stuff]\nx = 1\n")
    with pytest.raises(ValueError, match=r"unknown table \[model_stuff\]"):
        read_toml(unknown_table)
    broken = tmp_path / "c.toml"
    broken.write_text("batch_size = = 2\n")
    with pytest.raises(ValueError, match=r"c\.toml: invalid TOML"):
        read_toml(broken)
    with pytest.raises(ValueError, match="cannot read"):
        read_toml(tmp_path / "missing.toml")


def test_unknown_preset_is_an_error():
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        resolve(preset="huge")


def test_derived_staleness_bound_and_queue_follow_the_compatible_rule():
    config = resolve(preset="compat")
    assert config.effective_max_version_gap == 1  # max_head_offpolicyness
    assert config.effective_max_queue_groups == 2 * config.batch_size
    assert config.replace(max_version_gap=3).effective_max_queue_groups == 4 * config.batch_size


@pytest.mark.parametrize("name", sorted(COMPAT_ONLY))
def test_compat_only_options_accept_their_default_and_reject_the_rest(name):
    default = getattr(resolve(preset="compat"), name)
    assert getattr(resolve(preset="compat", overrides={name: default}), name) == default
    if isinstance(default, bool):
        other = not default
    else:
        other = default + 1 if isinstance(default, int) else default + "-other"
    with pytest.raises(ValueError) as caught:
        resolve(preset="compat", overrides={name: other})
    message = str(caught.value)
    assert f"{name}={other!r}" in message and COMPAT_ONLY[name] in message
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    (action,) = [a for a in parser._actions if a.dest == name]
    assert "compatibility only" in action.help and COMPAT_ONLY[name] in action.help


def test_an_option_subset_adds_only_those_flags():
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, ["model", "eval_samples", "reward_base"])
    flags = {s for a in parser._actions for s in a.option_strings if s.startswith("--")}
    assert flags == {
        "--help",
        "--help_all",
        "--config",
        "--preset",
        "--model",
        "--eval_samples",
        "--eval_tasks",
        "--reward_base",
    }
    with pytest.raises(ValueError, match="did you mean 'eval_samples'"):
        add_config_arguments(argparse.ArgumentParser(), ["eval_sample"])


def test_the_advantage_stage_reads_the_reward_baseline_settings():
    """reward_scale / reward_ema_decay are reward settings (the scorer's list); the run's
    config hands the values set there to the advantage stage."""
    from agentrl.rl.advantages import AdvantageConfig

    config = resolve(overrides={"reward_scale": 2.5, "reward_ema_decay": 0.5})
    advantage = config.part(AdvantageConfig)
    assert (advantage.reward_scale, advantage.reward_ema_decay) == (2.5, 0.5)
    assert config.reward.reward_scale == 2.5


def test_reward_settings_are_options_like_every_other():
    """The 48 reward settings (42 of the tool-use reward, 6 of function_call) are option()
    declarations: one checker, one text parser, the same help; their flags keep their names
    and land in config.reward."""
    from agentrl.config import option_field
    from agentrl.rewards.config import SETTINGS
    from agentrl.utils.options import is_option

    assert len(SETTINGS) == 48 and all(is_option(f) for f in SETTINGS.values())
    assert set(SETTINGS) <= set(OPTION_NAMES)
    assert option_field("strict_order_reward").metadata["choices"] == (0, 1)
    config = _parse(["--strict_order_reward", "false", "--max_reward_answer_len", "10"])
    assert config.reward.strict_order_reward == 0 and config.reward.max_reward_answer_len == 10
    config = _parse(["--function_call_values_weight", "0.6"])
    assert config.reward.function_call_values_weight == 0.6
    with pytest.raises(ValueError, match=r"format_enforce_mode='strict': expected one of"):
        resolve(overrides={"format_enforce_mode": "strict"})
    with pytest.raises(ValueError, match=r"strict_exact_reward=2: expected one of 0, 1"):
        resolve(overrides={"strict_exact_reward": 2})


def test_each_option_is_declared_once_by_one_component():
    from agentrl.config import COMPONENTS
    from agentrl.utils.options import option_fields

    seen: dict[str, str] = {}
    for component in COMPONENTS:
        for f in option_fields(component):
            assert f.name not in seen, f"{f.name}: {seen.get(f.name)} and {component.__name__}"
            seen[f.name] = component.__name__
    own = {f.name for f in fields(TrainConfig) if f.metadata.get("option")}
    assert own == set(seen)


def test_episode_and_sampling_defaults_are_the_rollout_options():
    from agentrl.rollout.episodes import EpisodeConfig
    from agentrl.rollout.options import RolloutConfig

    episode, rollout = EpisodeConfig(), RolloutConfig()
    assert (episode.max_turns, episode.max_new_tokens, episode.max_context_len) == (
        rollout.max_turns,
        rollout.max_gen_len,
        rollout.max_context_len,
    )
    assert (episode.sampling.temperature, episode.sampling.top_p) == (
        rollout.temperature,
        rollout.top_p,
    )


def test_booleans_are_booleans_and_take_0_or_1():
    config = resolve(overrides={"fsdp": 0, "progress": 1, "require_gt": False})
    assert config.fsdp is False and config.progress is True and config.require_gt is False
    flags = [f.name for f in fields(TrainConfig) if isinstance(f.default, int)]
    ints_that_are_flags = [n for n in flags if not isinstance(getattr(config, n), bool)]
    assert "fsdp" not in ints_that_are_flags


def test_product_defaults_hold_no_reference_paths_and_compat_restores_them():
    from agentrl.config import COMPAT_DEFAULTS

    plain = TrainConfig()
    assert plain.save_dir == "runs" and plain.data_path == "" and not plain.use_wandb
    compat = resolve(preset="compat")
    for name, value in COMPAT_DEFAULTS.items():
        assert getattr(compat, name) == value


COMPAT_MD = (Path(__file__).parents[2] / "docs" / "compat.md").read_text("utf-8")
# Flags compat.md names that are not `agentrl train`'s: its own --print_config, another
# command's (`agentrl score --set`, `agentrl gen-data --mix`), the GRPO reference's.
OTHER_FLAGS = {"print_config", "set", "mix", "adapter_file"}


def test_compat_md_counts_and_names_what_the_code_holds():
    from agentrl.config import ALIASES, COMPAT_DEFAULTS

    counts = {len(COMPAT_FLAGS): "All {} options", len(COMPAT_DEFAULTS): "{} defaults differ"}
    counts[len(COMPAT_ONLY)] = "the {} options marked below"
    words = {6: "six", 9: "nine", 141: "141"}
    for number, phrase in counts.items():
        assert phrase.format(words[number]) in COMPAT_MD, phrase.format(words[number])
    spelled = {option: alias for alias, option in ALIASES.items()}
    paragraph = COMPAT_MD.split("defaults differ", 1)[1].split("A test", 1)[0]
    for name in COMPAT_DEFAULTS:  # under the reference's spelling where agentrl renamed it
        assert f"`{spelled.get(name, name)}`" in paragraph, name


def test_every_flag_compat_md_names_is_one_agentrl_train_takes():
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    known = {s[2:] for a in parser._actions for s in a.option_strings if s.startswith("--")}
    named = set(re.findall(r"--([a-z][a-z0-9_]*)", COMPAT_MD))
    assert named - known - OTHER_FLAGS == set()
    assert {"call_parser", "keep_eos", "lenient_prompts", "flush_accumulation"} <= named


def test_compat_md_golden_table_matches_the_files_and_their_tests():
    root = Path(__file__).parents[2]
    rows = re.findall(
        r"^\| `([\w.]+\.jsonl?)` \| ([\d,]+|the 141) [^|]*\| `([\w/.]+)`", COMPAT_MD, re.M
    )
    assert len(rows) == 5
    for name, count, test in rows:
        data = root / "tests" / "data" / name
        records = len(json.loads(data.read_text())) if name.endswith(".json") else None
        if records is None:
            records = sum(1 for line in data.read_text("utf-8").splitlines() if line.strip())
        assert records == int(count.replace(",", "").replace("the ", "")), name
        assert (root / test).is_file(), test


def _section(start: str, end: str) -> str:
    return COMPAT_MD.split(start, 1)[1].split(end, 1)[0]


def _choices() -> set[str]:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    return {str(c) for a in parser._actions for c in (a.choices or ())}


def test_compat_md_option_lists_are_the_reference_flags_and_the_additions_are_options():
    from fnmatch import fnmatch

    from agentrl.config import PRESETS

    named = _section("names and defaults\n", "### Run layouts")
    lists = re.findall(r"^\*\*\w+\*\*: (.*?)\n\n", named, re.M | re.S)
    listed = {n for line in lists for n in re.findall(r"`([a-z][\w*]*)`", line)}
    values = _choices() | set(PRESETS)
    covered = {f for f in COMPAT_FLAGS if any(fnmatch(f, pattern) for pattern in listed)}
    assert covered == set(COMPAT_FLAGS)
    assert {n for n in listed if "*" not in n} - set(COMPAT_FLAGS) <= values
    additions = _section("## agentrl's own additions", "Beyond `agentrl train`")
    options = set(resolve().flat())
    assert set(re.findall(r"`([a-z][\w]*)`", additions)) - options <= values
