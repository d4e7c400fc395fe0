"""Reward settings: every weight, penalty, cap and schedule of the tool-use reward.

Names and defaults are the compatible command-line options (docs/compat.md), so such a
command line (or the golden file's per-line ``config``) carries over unchanged. The Rust
scorer has the same fields (``agentrl._core.reward_config_fields()``); a test keeps the two
in step.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from agentrl.utils.tomlfile import load_toml

FORMAT_MODES = ("soft", "semi_hard", "hard")

# Field kinds, which decide what values a setting accepts.
_FLOAT, _INT, _FLAG, _MODE, _STEP = "float", "int", "flag", "mode", "step"


def _setting(default: Any, kind: str, doc: str) -> Any:
    return field(default=default, metadata={"kind": kind, "doc": doc})


@dataclass(frozen=True)
class RewardConfig:
    """The reward's settings, validated on construction.

    ``current_step`` drives the format-penalty and reward-cap warm-up schedules. ``None``
    (the default, used for standalone scoring) means the schedules have finished.
    """

    current_step: int | None = _setting(None, _STEP, "training step for the schedules")
    format_enforce_mode: str = _setting(
        "semi_hard", _MODE, "soft | semi_hard (cap without tag) | hard (zero without tag)"
    )
    format_warmup_steps: int = _setting(100, _INT, "steps for the format penalty to grow")
    format_missing_penalty_initial: float = _setting(0.30, _FLOAT, "missing-tag penalty, start")
    format_missing_penalty_final: float = _setting(1.50, _FLOAT, "missing-tag penalty, end")
    no_answer_tag_reward_cap: float = _setting(2.0, _FLOAT, "cap without an answer tag")
    strict_order_reward: int = _setting(1, _FLAG, "numeric answers covered in order")
    strict_exact_reward: int = _setting(1, _FLAG, "exact match needs same numbers in order")
    reward_base: float = _setting(-0.10, _FLOAT, "starting value of every reward")
    reward_answer_cov_weight: float = _setting(9.0, _FLOAT, "answer coverage")
    reward_exact_match_weight: float = _setting(9.0, _FLOAT, "exact answer")
    reward_answer_tag_weight: float = _setting(0.90, _FLOAT, "has <answer> tags")
    reward_exact_answer_tag_weight: float = _setting(0.80, _FLOAT, "exactly one answer pair")
    reward_tool_success_weight: float = _setting(0.60, _FLOAT, "share of calls that worked")
    reward_final_refs_tool_weight: float = _setting(0.45, _FLOAT, "answer quotes a tool result")
    reward_tool_fail_penalty: float = _setting(0.55, _FLOAT, "per failed call (max 4)")
    reward_no_tool_penalty: float = _setting(1.50, _FLOAT, "math task without tool calls")
    reward_math_call_cov_weight: float = _setting(0.60, _FLOAT, "math calls / expected calls")
    reward_tool_expr_order_weight: float = _setting(0.60, _FLOAT, "expressions in task order")
    reward_tool_expr_set_weight: float = _setting(0.20, _FLOAT, "expressions in any order")
    reward_tool_expr_exact_weight: float = _setting(0.20, _FLOAT, "exactly the task's exprs")
    reward_tool_value_order_weight: float = _setting(2.40, _FLOAT, "results in task order")
    reward_tool_value_set_weight: float = _setting(0.80, _FLOAT, "results in any order")
    reward_tool_value_exact_weight: float = _setting(0.80, _FLOAT, "exactly the needed results")
    reward_tool_over_call_penalty: float = _setting(0.25, _FLOAT, "per extra math call (max 6)")
    reward_tool_under_call_penalty: float = _setting(0.35, _FLOAT, "per missing call (max 6)")
    reward_preferred_math_tool_weight: float = _setting(0.70, _FLOAT, "calculate_math share")
    reward_correct_tool_choice_weight: float = _setting(0.70, _FLOAT, "only math tools used")
    reward_tool_count_exact_weight: float = _setting(0.30, _FLOAT, "as many calls as needed")
    reward_canonical_tool_weight: float = _setting(0.25, _FLOAT, "share of tagged-JSON calls")
    reward_wrong_tool_penalty: float = _setting(0.55, _FLOAT, "per non-math call (max 4)")
    reward_alias_only_penalty: float = _setting(0.35, _FLOAT, "only alias math tools used")
    extra_number_penalty: float = _setting(0.55, _FLOAT, "per extra answer number (max 6)")
    missing_number_penalty: float = _setting(0.70, _FLOAT, "per missing answer number (max 6)")
    order_mismatch_penalty: float = _setting(1.20, _FLOAT, "right numbers, wrong order")
    reward_cap_warmup_steps: int = _setting(300, _INT, "steps for the caps to reach final")
    non_exact_reward_cap_initial: float = _setting(4.0, _FLOAT, "non-exact cap, start")
    non_exact_reward_cap: float = _setting(3.5, _FLOAT, "cap for a non-exact answer")
    zero_answer_cov_reward_cap_initial: float = _setting(0.5, _FLOAT, "zero-coverage cap, start")
    zero_answer_cov_reward_cap: float = _setting(0.0, _FLOAT, "cap for a wrong answer")
    max_reward_answer_len: int = _setting(96, _INT, "longest answer with the length bonus")
    reward_ema_decay: float = _setting(0.98, _FLOAT, "reward baseline EMA (advantage stage)")
    reward_scale: float = _setting(3.0, _FLOAT, "baseline advantage divisor (advantage stage)")

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(
                self, f.name, _check(f.name, f.metadata["kind"], getattr(self, f.name))
            )

    # ------------------------------------------------------------------ construction

    @classmethod
    def names(cls) -> list[str]:
        """Every setting name, in declaration order."""
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
        if isinstance(data.get("reward"), dict):
            extra = sorted(k for k in data if k != "reward")
            if extra:
                raise ValueError(f"{path}: keys outside [reward]: {', '.join(extra)}")
            data = data["reward"]
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
            updates[name] = _parse_text(name, _KINDS[name], text.strip())
        return self.with_overrides(**updates)

    def to_dict(self) -> dict[str, Any]:
        """Every setting as a plain dict (what the Rust scorer receives)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


_KINDS: dict[str, str] = {f.name: f.metadata["kind"] for f in fields(RewardConfig)}


def _reject_unknown(settings: Mapping[str, Any]) -> None:
    unknown = [name for name in settings if name not in _KINDS]
    if unknown:
        raise ValueError(
            f"unknown reward setting{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(n) for n in unknown)}; valid settings are: {', '.join(_KINDS)}"
        )


def _check(name: str, kind: str, value: Any) -> Any:
    """The value, normalised for its kind, or a ValueError naming the setting."""

    def bad(expected: str) -> ValueError:
        return ValueError(f"reward setting {name!r} must be {expected}, got {value!r}")

    if kind == _FLOAT:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad("a finite number")
        if not math.isfinite(value):
            raise bad("a finite number")
        return float(value)
    if kind == _INT:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer")
        return value
    if kind == _FLAG:
        if isinstance(value, bool) or value in (0, 1):
            return int(value)
        raise bad("0 or 1")
    if kind == _MODE:
        if value not in FORMAT_MODES:
            raise bad("one of " + ", ".join(repr(m) for m in FORMAT_MODES))
        return value
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad("an integer or None")
    return value


def _parse_text(name: str, kind: str, text: str) -> Any:
    """A ``--set`` value parsed for the setting's kind."""
    try:
        if kind == _FLOAT:
            return float(text)
        if kind == _INT:
            return int(text)
        if kind == _FLAG:
            lowered = text.lower()
            if lowered in ("1", "true", "yes", "on"):
                return 1
            if lowered in ("0", "false", "no", "off"):
                return 0
            raise ValueError(text)
        if kind == _STEP:
            return None if text.lower() in ("none", "null", "") else int(text)
        return text
    except ValueError:
        expected = {
            _FLOAT: "a number",
            _INT: "an integer",
            _FLAG: "0 or 1",
            _STEP: "an integer or none",
        }[kind]
        raise ValueError(f"--set {name}={text!r}: expected {expected}") from None
