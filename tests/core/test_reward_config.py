"""RewardConfig: the compatible names and defaults, loading from dict/TOML/--set, and errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentrl import _core
from agentrl.rewards import RewardConfig, score_batch
from agentrl.rewards.config import FORMAT_MODES, SETTINGS
from agentrl.utils.options import FLAG

TASK = {"messages": [{"role": "user", "content": "计算 12*3"}], "gt": ["36"]}
NO_TAG = {**TASK, "completion": "36", "tool_events": []}


def test_the_rust_scorers_fields_and_defaults_are_the_declarations() -> None:
    """The Rust core's own defaults and kinds, read from it, against the option()
    declarations (RewardConfig's fields, current_step first): nothing is restated here."""
    rust = _core.reward_config_fields()
    assert [name for name, _, _ in rust] == RewardConfig.names()
    assert dict((name, default) for name, _, default in rust) == RewardConfig().to_dict()
    declared = {name: (type(f.default), f.metadata["choices"]) for name, f in SETTINGS.items()}
    kinds = {
        "float": (float, ()),
        "int": (int, ()),
        "flag": (int, FLAG),
        "mode": (str, FORMAT_MODES),
    }
    for name, kind, _ in rust:
        if name == "current_step":
            assert kind == "step" and name not in SETTINGS
        else:
            assert declared[name] == kinds[kind], name


def test_settings_and_what_the_scorer_receives_keep_their_shape() -> None:
    settings = RewardConfig().to_dict()
    assert len(settings) == 49 and settings["current_step"] is None
    assert RewardConfig.from_dict(settings) == RewardConfig()
    flags = RewardConfig.from_dict({"strict_order_reward": True, "strict_exact_reward": False})
    assert (flags.strict_order_reward, flags.strict_exact_reward) == (1, 0)
    assert isinstance(flags.to_dict()["strict_order_reward"], int)
    assert type(RewardConfig.from_dict({"reward_base": 1}).reward_base) is float


def test_defaults_are_the_compatible_command_line_defaults() -> None:
    config = RewardConfig()
    assert config.reward_answer_cov_weight == 9.0
    assert config.reward_tool_expr_order_weight == 0.60
    assert config.non_exact_reward_cap == 3.5
    assert config.format_enforce_mode == "semi_hard"
    assert config.current_step is None


def test_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="reward_bsae") as info:
        RewardConfig.from_dict({"reward_bsae": 1.0})
    assert "reward_base" in str(info.value) and "max_reward_answer_len" in str(info.value)
    with pytest.raises(ValueError, match="valid settings"):
        RewardConfig().with_sets(["nope=1"])


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("reward_base", "high"),
        ("reward_base", float("nan")),
        ("reward_base", True),
        ("max_reward_answer_len", 9.5),
        ("strict_order_reward", 2),
        ("format_enforce_mode", "strict"),
        ("current_step", 1.5),
    ],
)
def test_wrong_types_are_rejected_with_the_setting_name(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=name):
        RewardConfig.from_dict({name: value})


def test_toml_top_level_and_reward_table(tmp_path: Path) -> None:
    flat = tmp_path / "flat.toml"
    flat.write_text('reward_base = 0.5\nformat_enforce_mode = "hard"\ncurrent_step = 7\n')
    config = RewardConfig.from_toml(flat)
    assert (config.reward_base, config.format_enforce_mode, config.current_step) == (
        0.5,
        "hard",
        7,
    )
    table = tmp_path / "table.toml"
    table.write_text("[reward]\nstrict_order_reward = 0\nreward_scale = 2\n")
    config = RewardConfig.from_toml(table)
    assert config.strict_order_reward == 0 and config.reward_scale == 2.0


def test_toml_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("reward_base = = 1\n")
    with pytest.raises(ValueError, match=r"bad\.toml"):
        RewardConfig.from_toml(bad)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("[reward]\nrewrd_base = 1\n")
    with pytest.raises(ValueError, match=r"unknown\.toml.*rewrd_base"):
        RewardConfig.from_toml(unknown)
    stray = tmp_path / "stray.toml"
    stray.write_text("x = 1\n[reward]\nreward_base = 1\n")
    with pytest.raises(ValueError, match="outside"):
        RewardConfig.from_toml(stray)


def test_set_strings_are_parsed_by_type() -> None:
    config = RewardConfig().with_sets(
        [
            "reward_base=0.25",
            "max_reward_answer_len=10",
            "strict_exact_reward=false",
            "current_step=none",
            "format_enforce_mode=soft",
        ]
    )
    assert config.reward_base == 0.25
    assert config.max_reward_answer_len == 10
    assert config.strict_exact_reward == 0
    assert config.current_step is None
    assert config.format_enforce_mode == "soft"
    with pytest.raises(ValueError, match="max_reward_answer_len"):
        RewardConfig().with_sets(["max_reward_answer_len=1.5"])
    with pytest.raises(ValueError, match="name=value"):
        RewardConfig().with_sets(["reward_base"])


def test_load_applies_sets_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "r.toml"
    path.write_text("reward_base = 0.5\nreward_scale = 4.0\n")
    config = RewardConfig.load(path, ["reward_base=1"])
    assert config.reward_base == 1.0 and config.reward_scale == 4.0


def test_unset_step_means_finished_schedules() -> None:
    # A math answer without tags (soft mode, so no cap): the missing-tag penalty is scheduled.
    soft = {"format_enforce_mode": "soft"}
    unset = score_batch([NO_TAG], soft).details
    finished = score_batch([NO_TAG], {**soft, "current_step": 10**6}).details
    start = score_batch([NO_TAG], {**soft, "current_step": 0}).details
    assert unset["format_strength"][0] == finished["format_strength"][0] == 1.0
    assert start["format_strength"][0] == 0.0
    assert unset["raw_reward"][0] == finished["raw_reward"][0]
    # At step 0 the penalty is 0.30 instead of 1.50.
    assert start["raw_reward"][0] - unset["raw_reward"][0] == pytest.approx(1.20)


def test_reward_caps_follow_their_schedule() -> None:
    # Numbers right, order wrong: not an exact match, so the non-exact cap applies.
    record = {
        "messages": [{"role": "user", "content": "hi"}],
        "gt": ["1", "2"],
        "completion": "<answer>2, 1</answer>",
        "tool_events": [],
        "config": {"strict_order_reward": 0, "reward_answer_cov_weight": 20.0},
    }
    capped = score_batch([record], {"current_step": 150}).rewards[0]
    # Halfway through 300 warm-up steps: 4.0 + 0.5 * (3.5 - 4.0).
    assert capped == pytest.approx(3.75)
    assert score_batch([record]).rewards[0] == pytest.approx(3.5)


def test_bad_row_config_names_the_row() -> None:
    rows = [{**NO_TAG}, {**NO_TAG, "config": {"reward_bsae": 1}}]
    with pytest.raises(ValueError, match=r"row 1: unknown reward setting \"reward_bsae\""):
        score_batch(rows)
    with pytest.raises(ValueError, match="record 0"):
        score_batch([{**NO_TAG, "config": {"reward_base": [1]}}])
