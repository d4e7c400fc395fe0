"""Reward settings: every weight, penalty, cap and schedule of the tool-use reward, and the
weights of the ``function_call`` reward.

Names and defaults are the compatible command-line options (docs/compat.md), so such a
command line (or the golden file's per-line ``config``) carries over unchanged. Each setting
is an :func:`~agentrl.utils.options.option`, as every other option of a run: the same
checker, text parser and help. The Rust scorer has the same fields with the same defaults
(``agentrl._core.reward_config_fields()``); a test checks them against these declarations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

from agentrl.utils.options import FLAG, check_value, option, option_fields, parse_text
from agentrl.utils.reward_baseline import REWARD_EMA_DECAY, REWARD_SCALE
from agentrl.utils.tomlfile import load_toml

FORMAT_MODES = ("soft", "semi_hard", "hard")


@dataclass(frozen=True)
class RewardConfig:
    """The reward's settings, validated on construction.

    ``current_step`` drives the format-penalty and reward-cap warm-up schedules. ``None``
    (the default, used for standalone scoring) means the schedules have finished. It is the
    run's step, not an option: the trainer sets it, a file or ``--set`` may.
    """

    SECTION: ClassVar[str] = "reward"

    current_step: int | None = None
    format_enforce_mode: str = option(
        "semi_hard", "soft | semi_hard (cap without tag) | hard (zero without tag)", FORMAT_MODES
    )
    format_warmup_steps: int = option(100, "steps for the format penalty to grow")
    format_missing_penalty_initial: float = option(0.30, "missing-tag penalty, start")
    format_missing_penalty_final: float = option(1.50, "missing-tag penalty, end")
    no_answer_tag_reward_cap: float = option(2.0, "cap without an answer tag")
    strict_order_reward: int = option(1, "numeric answers covered in order", FLAG)
    strict_exact_reward: int = option(1, "exact match needs same numbers in order", FLAG)
    reward_base: float = option(-0.10, "starting value of every reward")
    reward_answer_cov_weight: float = option(9.0, "answer coverage")
    reward_exact_match_weight: float = option(9.0, "exact answer")
    reward_answer_tag_weight: float = option(0.90, "has <answer> tags")
    reward_exact_answer_tag_weight: float = option(0.80, "exactly one answer pair")
    reward_tool_success_weight: float = option(0.60, "share of calls that worked")
    reward_final_refs_tool_weight: float = option(0.45, "answer quotes a tool result")
    reward_tool_fail_penalty: float = option(0.55, "per failed call (max 4)")
    reward_no_tool_penalty: float = option(1.50, "math task without tool calls")
    reward_math_call_cov_weight: float = option(0.60, "math calls / expected calls")
    reward_tool_expr_order_weight: float = option(0.60, "expressions in task order")
    reward_tool_expr_set_weight: float = option(0.20, "expressions in any order")
    reward_tool_expr_exact_weight: float = option(0.20, "exactly the task's exprs")
    reward_tool_value_order_weight: float = option(2.40, "results in task order")
    reward_tool_value_set_weight: float = option(0.80, "results in any order")
    reward_tool_value_exact_weight: float = option(0.80, "exactly the needed results")
    reward_tool_over_call_penalty: float = option(0.25, "per extra math call (max 6)")
    reward_tool_under_call_penalty: float = option(0.35, "per missing call (max 6)")
    reward_preferred_math_tool_weight: float = option(0.70, "calculate_math share")
    reward_correct_tool_choice_weight: float = option(0.70, "only math tools used")
    reward_tool_count_exact_weight: float = option(0.30, "as many calls as needed")
    reward_canonical_tool_weight: float = option(0.25, "share of tagged-JSON calls")
    reward_wrong_tool_penalty: float = option(0.55, "per non-math call (max 4)")
    reward_alias_only_penalty: float = option(0.35, "only alias math tools used")
    extra_number_penalty: float = option(0.55, "per extra answer number (max 6)")
    missing_number_penalty: float = option(0.70, "per missing answer number (max 6)")
    order_mismatch_penalty: float = option(1.20, "right numbers, wrong order")
    reward_cap_warmup_steps: int = option(300, "steps for the caps to reach final")
    non_exact_reward_cap_initial: float = option(4.0, "non-exact cap, start")
    non_exact_reward_cap: float = option(3.5, "cap for a non-exact answer")
    zero_answer_cov_reward_cap_initial: float = option(0.5, "zero-coverage cap, start")
    zero_answer_cov_reward_cap: float = option(0.0, "cap for a wrong answer")
    max_reward_answer_len: int = option(96, "longest answer with the length bonus")
    reward_ema_decay: float = option(REWARD_EMA_DECAY, "reward baseline EMA (advantage stage)")
    reward_scale: float = option(REWARD_SCALE, "baseline advantage divisor (advantage stage)")
    # The `function_call` reward (agentrl.rewards.function_call): each term's weight.
    function_call_valid_weight: float = option(1.0, "function_call: the checker's verdict")
    function_call_names_weight: float = option(0.2, "function_call: right functions called")
    function_call_arg_names_weight: float = option(0.2, "function_call: right argument names")
    function_call_values_weight: float = option(0.4, "function_call: accepted argument values")
    function_call_format_weight: float = option(0.2, "function_call: share of call blocks read")
    function_call_dots_to_underscores: int = option(
        0, "function_call: compare a.b names as a_b (APIs without dots)", FLAG
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "current_step", _check_step(self.current_step))
        for name, f in SETTINGS.items():
            object.__setattr__(self, name, check_value(name, f, getattr(self, name)))

    # ------------------------------------------------------------------ construction

    @classmethod
    def names(cls) -> list[str]:
        """Every setting name, in declaration order (``current_step`` first)."""
        return [f.name for f in fields(cls)]

    @classmethod
    def from_dict(cls, settings: Mapping[str, Any]) -> RewardConfig:
        """Settings from a mapping; unknown names are an error that lists the valid ones."""
        _reject_unknown(settings)
        return cls(**dict(settings))

    @classmethod
    def from_toml(cls, path: str | Path) -> RewardConfig:
        """Settings from a TOML file: top-level keys, or a ``[reward]`` table."""
        data = load_toml(path)
        if isinstance(data.get(cls.SECTION), dict):
            extra = sorted(k for k in data if k != cls.SECTION)
            if extra:
                raise ValueError(f"{path}: keys outside [{cls.SECTION}]: {', '.join(extra)}")
            data = data[cls.SECTION]
        try:
            return cls.from_dict(data)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from exc

    @classmethod
    def load(cls, path: str | Path | None = None, sets: Iterable[str] = ()) -> RewardConfig:
        """A TOML file (optional) with ``name=value`` overrides on top, as the CLI takes them."""
        config = cls.from_toml(path) if path is not None else cls()
        return config.with_sets(sets)

    def with_overrides(self, **settings: Any) -> RewardConfig:
        """A copy with some settings changed."""
        _reject_unknown(settings)
        return dataclasses.replace(self, **settings)

    def with_sets(self, sets: Iterable[str]) -> RewardConfig:
        """A copy with ``name=value`` strings applied (values parsed by the setting's type)."""
        updates: dict[str, Any] = {}
        for item in sets:
            name, sep, text = item.partition("=")
            name = name.strip()
            if not sep or not name:
                raise ValueError(f"--set expects name=value, got {item!r}")
            _reject_unknown({name: None})
            text = text.strip()
            if name == "current_step":
                updates[name] = _step_text(text)
            else:
                updates[name] = parse_text(name, SETTINGS[name], text)
        return self.with_overrides(**updates)

    def to_dict(self) -> dict[str, Any]:
        """Every setting as a plain dict (what the Rust scorer receives)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


# The settings that are options (every field but ``current_step``), by name.
SETTINGS: dict[str, dataclasses.Field[Any]] = {f.name: f for f in option_fields(RewardConfig)}
_NAMES = RewardConfig.names()


def _reject_unknown(settings: Mapping[str, Any]) -> None:
    unknown = [name for name in settings if name not in _NAMES]
    if unknown:
        raise ValueError(
            f"unknown reward setting{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(n) for n in unknown)}; valid settings are: {', '.join(_NAMES)}"
        )


def _check_step(value: Any) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise ValueError(f"reward setting 'current_step' must be an integer or None, got {value!r}")


def _step_text(text: str) -> int | None:
    if text.lower() in ("none", "null", ""):
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"--set current_step={text!r}: expected an integer or none") from None
