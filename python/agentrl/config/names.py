"""Every option of a run by name: its declaration, its section and its other spellings.

The components (:data:`COMPONENTS`) declare their options with
:func:`agentrl.utils.options.option`, and :class:`agentrl.rewards.config.RewardConfig` the
built-in reward's settings the same way; this module collects them once, for the run's
config, its TOML reader and the command line to look names up in.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import Field
from typing import Any

from agentrl.agents.options import AgentConfig
from agentrl.config.compat import ALIASES
from agentrl.config.run import EvalConfig, RunConfig
from agentrl.data.options import DataConfig
from agentrl.models.options import ModelConfig
from agentrl.rewards.config import SETTINGS, RewardConfig
from agentrl.rewards.options import RewardFunctionsConfig
from agentrl.rl.advantages import AdvantageConfig
from agentrl.rl.bc import BCConfig
from agentrl.rl.kl_control import BetaConfig
from agentrl.rl.losses import LossConfig
from agentrl.rl.optim import OptimConfig
from agentrl.rollout.options import RolloutConfig
from agentrl.utils.options import option_fields

__all__ = [
    "COMMAND_OPTIONS",
    "COMPONENTS",
    "FIELDS",
    "LIST_OPTIONS",
    "OPTION_NAMES",
    "REWARD_FIELDS",
    "SECTIONS",
    "TRAIN_FIELDS",
    "canonical_names",
    "check_names",
    "option_field",
    "option_section",
]

SECTIONS = ("run", "model", "data", "rollout", "optim", "loss", "kl", "bc", "eval", "reward")

# The components whose options make up a run's config, in section order.
COMPONENTS: tuple[type, ...] = (
    RunConfig,
    ModelConfig,
    DataConfig,
    AgentConfig,
    RolloutConfig,
    OptimConfig,
    LossConfig,
    AdvantageConfig,
    BetaConfig,
    BCConfig,
    EvalConfig,
    RewardFunctionsConfig,
)


def _collect_options() -> tuple[dict[str, Field[Any]], dict[str, str]]:
    own: dict[str, Field[Any]] = {}
    sections: dict[str, str] = {}
    for component in COMPONENTS:
        for f in option_fields(component):
            if f.name in own:
                raise TypeError(f"option {f.name!r} is declared twice ({sections[f.name]})")
            own[f.name] = f
            sections[f.name] = component.SECTION  # type: ignore[attr-defined]
    return own, sections


# The options the components declare (fields of TrainConfig), and their sections.
TRAIN_FIELDS, _SECTION_OF = _collect_options()
# The built-in reward's settings: options like the others, held by ``config.reward``.
REWARD_FIELDS: dict[str, Field[Any]] = SETTINGS
# Every option's declaration by name.
FIELDS: dict[str, Field[Any]] = {**TRAIN_FIELDS, **REWARD_FIELDS}
OPTION_NAMES: tuple[str, ...] = tuple(FIELDS)


# Options holding a list, written as one comma-separated string (TOML may give a list).
LIST_OPTIONS = ("tools", "reward_funcs", "reward_weights")


# Options holding commands (which may contain commas), joined with ";".
COMMAND_OPTIONS = ("mcp",)


def option_section(name: str) -> str:
    """The section (TOML table, help group) option ``name`` belongs to."""
    return RewardConfig.SECTION if name in REWARD_FIELDS else _SECTION_OF[name]


def canonical_names(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with other spellings of an option (:data:`compat.ALIASES`) renamed; the
    same option given under two names is an error."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        own = ALIASES.get(name, name)
        if own in out and own != name:
            raise ValueError(f"option {own!r} is given twice (as {name!r} too)")
        out[own] = value
    return out


def option_field(name: str) -> Field[Any]:
    """The declaration of option ``name`` (its default, help, choices and range)."""
    return FIELDS[ALIASES.get(name, name)]


def check_names(values: Iterable[str]) -> None:
    """Raise ValueError for unknown option names, suggesting the closest known one."""
    for name in values:
        if name not in FIELDS and name not in ALIASES:
            close = difflib.get_close_matches(name, OPTION_NAMES, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown option {name!r}{hint}")
