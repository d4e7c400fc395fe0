"""The run's configuration: one typed config composed of the components' own options.

Each option is declared once, by the part of agentrl that reads it (``OptimConfig`` in
:mod:`agentrl.rl.optim`, ``RolloutConfig`` in :mod:`agentrl.rollout.options`, the built-in
reward's settings in :mod:`agentrl.rewards.config`, ...; see :mod:`agentrl.utils.options`).
:class:`TrainConfig` is all of them at once (a subclass of each), with the built-in reward's
settings as ``config.reward``. The command-line flags, the TOML sections and ``--help`` (a
page of the options declared ``common``, each section one flag away: :mod:`.help`) come from
the same declarations.

Values come, lowest priority first, from a preset (``tiny``: the built-in CPU run, the
default; ``compat``: the reference trainers' defaults, see :mod:`agentrl.config.compat`), a
TOML file (``--config run.toml``: top-level keys or section tables), and command-line
flags (``--learning_rate 1e-5``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Collection, Mapping
from dataclasses import Field, dataclass, field
from pathlib import Path
from typing import Any

from agentrl.agents.options import AgentConfig
from agentrl.config.compat import ALIASES, COMPAT_DEFAULTS, COMPAT_ONLY, compat_only_error
from agentrl.config.help import add_paged_help, common
from agentrl.config.names import (
    COMMAND_OPTIONS,
    COMPONENTS,
    FIELDS,
    LIST_OPTIONS,
    OPTION_NAMES,
    REWARD_FIELDS,
    SECTIONS,
    TRAIN_FIELDS,
    canonical_names,
    check_names,
    option_field,
    option_section,
)
from agentrl.config.presets import DEFAULT_PRESET, PRESETS
from agentrl.config.run import EvalConfig, RunConfig
from agentrl.data.options import DataConfig
from agentrl.data.synthetic import TaskConfig, parse_mix
from agentrl.data.verifiers_env import as_agent_run
from agentrl.errors import UsageError
from agentrl.models.options import ModelConfig
from agentrl.observability.trackers import parse_report_to
from agentrl.rewards.config import RewardConfig
from agentrl.rewards.options import RewardFunctionsConfig
from agentrl.rl.advantages import AdvantageConfig
from agentrl.rl.bc import BCConfig
from agentrl.rl.kl_control import BetaConfig
from agentrl.rl.losses import LossConfig
from agentrl.rl.optim import OptimConfig
from agentrl.rollout.options import RolloutConfig
from agentrl.utils.options import check_value, part, text_type
from agentrl.utils.tomlfile import load_toml


@dataclass(frozen=True)
class TrainConfig(
    RewardFunctionsConfig,
    EvalConfig,
    BCConfig,
    BetaConfig,
    AdvantageConfig,
    LossConfig,
    OptimConfig,
    RolloutConfig,
    AgentConfig,
    DataConfig,
    ModelConfig,
    RunConfig,
):
    """Every option of a run: each component's options (it is a subclass of each
    component's config), and the built-in reward's settings as ``reward``."""

    reward: RewardConfig = field(default_factory=RewardConfig, metadata={"section": "reward"})

    def __post_init__(self) -> None:
        # The advantage stage reads the reward baseline's settings from the reward section.
        object.__setattr__(self, "reward_scale", self.reward.reward_scale)
        object.__setattr__(self, "reward_ema_decay", self.reward.reward_ema_decay)
        if not self.run_name:
            name = run_name_for(self.model) if self.model else "rl"
            object.__setattr__(self, "run_name", name)
        validate(self)

    # ---- views ----

    @property
    def run_dir(self) -> Path:
        return Path(self.save_dir) / self.run_name

    @property
    def logprob_divisor(self) -> float:
        """What logits are divided by before log-probs are taken (1.0: the raw policy)."""
        return self.temperature if self.logprob_temperature == "sampling" else 1.0

    @property
    def effective_max_version_gap(self) -> int:
        """The staleness bound used when max_version_gap is -1 (one process)."""
        return self.max_head_offpolicyness if self.max_version_gap < 0 else self.max_version_gap

    @property
    def effective_max_queue_groups(self) -> int:
        if self.max_queue_groups > 0:
            return self.max_queue_groups
        return (self.effective_max_version_gap + 1) * self.batch_size

    def part(self, cls: type, **changes: Any) -> Any:
        """One component's own config holding this run's values (``changes`` win)."""
        return part(cls, self, **changes)

    def flat(self) -> dict[str, Any]:
        """Every option by name, reward settings included."""
        out = {name: getattr(self, name) for name in TRAIN_FIELDS}
        out.update(self.reward.to_dict())
        out.pop("current_step", None)
        return out

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with options changed by name (reward options included)."""
        return TrainConfig.from_mapping({**self.flat(), **changes})

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> TrainConfig:
        """Options from a flat name -> value mapping; unknown names are an error."""
        values = canonical_names(values)
        check_names(values)
        own = {k: _joined(k, v) for k, v in values.items() if k in TRAIN_FIELDS}
        reward = {k: v for k, v in values.items() if k in REWARD_FIELDS}
        return cls(**own, reward=RewardConfig.from_dict(reward))

    def to_toml(self) -> str:
        """The resolved options as a TOML document with one table per section."""
        flat = self.flat()
        lines = ["# agentrl train configuration (resolved)"]
        for section in SECTIONS:
            names = [n for n in flat if option_section(n) == section]
            lines.append(f"\n[{section}]")
            lines.extend(f"{n} = {_toml_value(flat[n])}" for n in names)
        return "\n".join(lines) + "\n"


def _joined(name: str, value: Any) -> Any:
    if name in LIST_OPTIONS and isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if name in COMMAND_OPTIONS and isinstance(value, list | tuple):
        return ";".join(str(v) for v in value)
    return value


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


# ------------------------------------------------------------------ validation


def validate(config: TrainConfig) -> None:
    """Raise ValueError naming the first option whose value cannot work.

    Each option's type, choices and range come from its declaration; what is checked here
    are the rules that tie options together.
    """
    for name, f in TRAIN_FIELDS.items():
        object.__setattr__(config, name, check_value(name, f, getattr(config, name)))
    if config.beta_min > config.beta_max:
        raise ValueError(f"beta_min={config.beta_min} is above beta_max={config.beta_max}")
    parse_report_to(config.report_to)
    if config.logprob_temperature == "sampling" and config.rollout_engine != "torch":
        raise UsageError(
            "option logprob_temperature='sampling' needs rollout_engine='torch': the remote "
            "engines return log-probs of the raw policy"
        )
    if config.rollout_compile and config.rollout_engine != "torch":
        raise UsageError(
            "option rollout_compile=true needs rollout_engine='torch': a rollout server "
            f"({config.rollout_engine!r}) runs its own kernels"
        )
    _check_weight_sync(config)
    _check_generated_mix(config.generated_mix)
    if config.logprob_temperature == "sampling" and config.temperature <= 1e-6:
        raise ValueError(
            f"option temperature={config.temperature!r}: expected above 0 with "
            "logprob_temperature=sampling"
        )
    for name in COMPAT_ONLY:
        accepted = (
            TRAIN_FIELDS[name].default,
            COMPAT_DEFAULTS.get(name, TRAIN_FIELDS[name].default),
        )
        error = compat_only_error(name, getattr(config, name), accepted)
        if error:
            raise ValueError(error)


def _check_generated_mix(text: str) -> None:
    """``generated_mix`` as the task generator reads it: known kinds, some weight above 0."""
    try:
        TaskConfig(mix=parse_mix(text))
    except ValueError as exc:
        raise UsageError(f"option generated_mix={text!r}: {exc}") from None


def _check_weight_sync(config: TrainConfig) -> None:
    """``weight_sync`` other than the default only where a server can honour it."""
    engine, sync = config.rollout_engine, config.weight_sync
    if config.weight_sync_timeout_sec <= 0:
        raise ValueError(
            f"option weight_sync_timeout_sec={config.weight_sync_timeout_sec!r}: expected above 0"
        )
    if sync == "disk" and engine != "sglang":
        raise UsageError(f"option weight_sync='disk' needs rollout_engine='sglang', not {engine!r}")
    if sync == "gloo" and engine != "sglang":
        why = (
            "the vLLM server receives over NCCL only"
            if engine == "vllm-server"
            else "no server receives weights"
        )
        raise UsageError(
            f"option weight_sync='gloo' needs rollout_engine='sglang' "
            f"(rollout_engine={engine!r}: {why})"
        )


# ------------------------------------------------------------------ presets and files


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A TOML file's options as a flat mapping; section tables must hold their own options."""
    data = load_toml(path)
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            if key not in SECTIONS:
                raise ValueError(f"{path}: unknown table [{key}]; tables: {', '.join(SECTIONS)}")
            for name, item in value.items():
                try:
                    check_names([name])
                except ValueError as exc:
                    raise ValueError(f"{path}: [{key}] {exc}") from None
                own = ALIASES.get(name, name)
                if option_section(own) != key:
                    raise ValueError(f"{path}: [{key}] {name} belongs in [{option_section(own)}]")
                flat[name] = item
        else:
            if key != "preset":
                try:
                    check_names([key])
                except ValueError as exc:
                    raise ValueError(f"{path}: {exc}") from None
            flat[key] = value
    return flat


def resolve(
    preset: str | None = None,
    config_file: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> TrainConfig:
    """Preset, then the TOML file, then explicit overrides (e.g. command-line flags)."""
    from_file = read_toml(config_file) if config_file else {}
    name = preset or from_file.pop("preset", None) or DEFAULT_PRESET
    from_file.pop("preset", None)
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    chosen = {**canonical_names(from_file), **canonical_names(dict(overrides or {}))}
    values: dict[str, Any] = {**PRESETS[name], **chosen}
    check_names(values)
    values = as_agent_run(values)  # a verifiers environment: its harness is the agent
    if chosen.get("model") and "run_name" not in chosen:
        values["run_name"] = run_name_for(str(chosen["model"]))
    return TrainConfig.from_mapping(values)


def run_name_for(model: str) -> str:
    """The run directory's name for a policy spec: its last path part (a file without its
    suffix, a Hub id's name) plus ``-rl``, so runs of different models do not collide."""
    text = model.rstrip("/\\")
    part = text.replace("\\", "/").rsplit("/", 1)[-1]
    if "." in part and Path(text).suffix.lower() in (".gguf", ".pth", ".pt", ".bin"):
        part = part.rsplit(".", 1)[0]
    return (part or "model") + "-rl"


# ------------------------------------------------------------------ command line


# What a flag's value looks like in the help, by the option's type (choices show themselves).
_METAVARS = {bool: "BOOL", int: "N", float: "X", str: "TEXT"}


def _help(name: str, doc: str, default: Any, presets: Mapping[str, Mapping[str, Any]]) -> str:
    if name in COMPAT_ONLY:
        text = f"{doc}: compatibility only, {default!r} is the one value accepted; "
        return (text + COMPAT_ONLY[name]).replace("%", "%%")
    shown = "true" if default is True else "false" if default is False else repr(default)
    extra = "".join(
        f"; {preset} preset: {values[name]!r}"
        for preset, values in presets.items()
        if name in values and preset != "compat"
    )
    return f"{doc} (default: {shown}{extra})".replace("%", "%%")


def _flags(name: str, f: Field[Any]) -> list[str]:
    extra = list(f.metadata.get("flags", ()))
    aliases = [f"--{alias}" for alias, own in ALIASES.items() if own == name]
    return [*extra, f"--{name}", *aliases]


def add_config_arguments(
    parser: argparse.ArgumentParser,
    names: Collection[str] | None = None,
    *,
    presets: Mapping[str, Mapping[str, Any]] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """One flag per option (all, or only ``names``); only flags given on the line are set.

    ``--config`` and ``--preset`` are always there: a TOML file may hold any option, so
    one file can describe a run for training and evaluation alike. ``presets`` (the
    command's own, default: the trainer's) name the values shown beside each default;
    ``defaults`` replace the declared defaults in the help, for a command whose own
    defaults differ. ``--help`` becomes a page of the options declared ``common`` (the
    command's own arguments marked with :func:`agentrl.config.help.common` too), with
    ``--help SECTION`` and ``--help_all`` for the rest.
    """
    if names is not None:
        check_names(names)
    presets = PRESETS if presets is None else presets
    defaults = dict(defaults or {})
    wanted = set(OPTION_NAMES if names is None else names)
    add_paged_help(parser)
    # The full list of options would fill a screen by itself.
    parser.usage = "%(prog)s [--config FILE] [--preset NAME] [--OPTION VALUE ...]"
    common(
        parser.add_argument("--config", default=None, metavar="FILE", help="TOML file with options")
    )
    common(
        parser.add_argument(
            "--preset",
            default=None,
            choices=sorted(presets),
            help=f"base values (default: {next(iter(presets))})",
        )
    )
    used = [s for s in SECTIONS if any(option_section(n) == s for n in wanted)]
    groups = {s: parser.add_argument_group(f"{s} options") for s in used}
    for name in OPTION_NAMES:
        if name not in wanted:
            continue
        f = FIELDS[name]
        default = defaults.get(name, f.default)
        choices = list(f.metadata.get("choices") or ()) or None
        repeatable = {"action": "append"} if name in COMMAND_OPTIONS else {}
        action = groups[option_section(name)].add_argument(
            *_flags(name, f),
            dest=name,
            type=text_type(f),
            choices=choices,
            default=argparse.SUPPRESS,
            metavar=None if choices else _METAVARS.get(type(f.default), "TEXT"),
            help=_help(name, f.metadata.get("doc", ""), default, presets)
            + (" (repeatable)" if repeatable else ""),
            **repeatable,
        )
        if f.metadata.get("common"):
            common(action)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The resolved config of a parsed command line; a bad option or file is a UsageError."""
    given = {k: v for k, v in vars(args).items() if k in FIELDS}
    try:
        return resolve(getattr(args, "preset", None), getattr(args, "config", None), given)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


__all__ = [
    "COMPAT_DEFAULTS",
    "COMPAT_ONLY",
    "COMPONENTS",
    "DEFAULT_PRESET",
    "OPTION_NAMES",
    "PRESETS",
    "SECTIONS",
    "TrainConfig",
    "add_config_arguments",
    "canonical_names",
    "check_names",
    "config_from_args",
    "option_field",
    "option_section",
    "read_toml",
    "resolve",
    "run_name_for",
    "validate",
]
