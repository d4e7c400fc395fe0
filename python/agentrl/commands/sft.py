"""`agentrl sft`: supervised warm start on tool-use demonstrations.

With no arguments: build the tiny preset, generate demonstrations and held-out tasks,
train, save to runs/tiny-sft/ (where `agentrl train` looks) and print held-out accuracy.
The pipeline itself is :func:`agentrl.sft.pipeline.run_sft`.

The options it shares with `agentrl train` (the policy, the schedule, the run directory,
the episode limits of its evaluation) are the same declarations under the same names, with
the warm start's own defaults; ``--config run.toml`` reads the same file format (options
that only RL reads are left to RL). ``--lora_rank`` > 0 trains a LoRA adapter only (the
same ``--lora_*`` options as `agentrl train`); the run directory still gets full weights.
Other spellings are accepted too (``--lr``, ``--steps``, ``--output DIR``, ``--resume``,
``--compile``, ``--no_progress``).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from agentrl.config import add_config_arguments, canonical_names, option_field, read_toml
from agentrl.config.help import common
from agentrl.data.synthetic import (
    MIX_HELP,
    SHORTCUT_SCOPE_HELP,
    SHORTCUT_SCOPES,
    TaskConfig,
    parse_mix,
)
from agentrl.errors import UsageError
from agentrl.sft.pipeline import SFTRunOptions
from agentrl.sft.tasks import DEFAULT_DEMOS, DEFAULT_SHORTCUT_RATE, shortcut_settings
from agentrl.sft.train import SFTConfig
from agentrl.utils.options import check_value, str2bool

_D = SFTConfig()
_P = SFTRunOptions()
# What `--dtype` is when not given: the weights SFTRunOptions.dtype None loads.
SFT_DTYPE = "float32"
# The options `agentrl sft` shares with `agentrl train` (the same declarations), under the
# warm start's own field names: run option -> SFTConfig field, run option -> SFTRunOptions
# field. The warm start's defaults are those fields' defaults.
_TRAIN_FIELDS: dict[str, str] = {
    "total_steps": "steps",
    "learning_rate": "lr",
    "min_lr_ratio": "min_lr_ratio",
    "warmup_steps": "warmup_steps",
    "weight_decay": "weight_decay",
    "accumulation_steps": "grad_accum",
    "grad_clip": "clip",
    "max_turns": "max_turns",
    "max_gen_len": "max_new_tokens",
    "eval_interval": "eval_interval",
    "save_interval": "save_interval",
    "keep_last": "keep_last",
    "log_interval": "log_interval",
    "max_time": "max_time",
    "seed": "seed",
    "progress": "progress",
    "from_resume": "resume",
    "use_compile": "compile",
}
_RUN_FIELDS: dict[str, str] = {
    "model": "model",
    "chat_template": "chat_template",
    "tool_format": "tool_format",
    "max_total_len": "max_len",
    "eval_samples": "eval_tasks",
    "num_threads": "num_threads",
    "deterministic": "deterministic",
}
_WARM_START_DEFAULTS: dict[str, Any] = {
    **{name: getattr(_D, own) for name, own in _TRAIN_FIELDS.items()},
    **{name: getattr(_P, own) for name, own in _RUN_FIELDS.items()},
    "save_dir": str(Path(_D.output_dir).parent),
    "run_name": Path(_D.output_dir).name,
    "dtype": SFT_DTYPE,
}
_SHARED = (
    "model",
    "tokenizer",
    "chat_template",
    "tool_format",
    "lora_rank",
    "lora_alpha",
    "lora_target_modules",
    "lora_dropout",
    "save_dir",
    "run_name",
    "total_steps",
    "learning_rate",
    "min_lr_ratio",
    "warmup_steps",
    "weight_decay",
    "accumulation_steps",
    "grad_clip",
    "max_total_len",
    "max_turns",
    "max_gen_len",
    "eval_interval",
    "eval_samples",
    "eval_data_path",
    "save_interval",
    "keep_last",
    "log_interval",
    "max_time",
    "seed",
    "device",
    "num_threads",
    "deterministic",
    "dtype",
    "from_resume",
    "use_compile",
    "progress",
)
SFT_DEFAULTS: dict[str, Any] = {
    name: _WARM_START_DEFAULTS.get(name, option_field(name).default) for name in _SHARED
}


LORA_HELP = (
    "With --lora_rank > 0 only a LoRA adapter trains (the base weights stay as loaded) and "
    "checkpoints hold the adapter; the run directory gets the merged full weights, an "
    "ordinary model that `agentrl train --model DIR` and `agentrl eval --model DIR` load, and "
    "the adapter alone in DIR/adapter/. --from_resume needs the same --model and --lora_*."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = f"{parser.description or ''} {LORA_HELP}".strip()
    add_config_arguments(parser, tuple(SFT_DEFAULTS), presets={"tiny": {}}, defaults=SFT_DEFAULTS)
    own = parser.add_argument_group("warm start options")
    common(
        own.add_argument(
            "--data_path",
            "--data",
            dest="data_path",
            nargs="+",
            default=argparse.SUPPRESS,
            help="demonstration JSONL file(s) (default: generated demonstrations)",
        )
    )
    own.add_argument(
        "--tiny", default="", help="tiny preset overrides, e.g. hidden_size=192,num_layers=6"
    )
    common(
        own.add_argument(
            "--num_demos",
            type=int,
            default=DEFAULT_DEMOS,
            help="generated demonstrations when --data is not given",
        )
    )
    own.add_argument(
        "--shortcut_rate",
        type=float,
        default=None,
        help="share of the expressions simple enough to do in one's head that the generated "
        f"demonstrations answer without calling the tool (default {DEFAULT_SHORTCUT_RATE}; "
        "0: perfect demonstrations)",
    )
    own.add_argument(
        "--shortcut_scope",
        choices=SHORTCUT_SCOPES,
        default=None,
        help=SHORTCUT_SCOPE_HELP,
    )
    own.add_argument("--mix", default=None, help="of the generated demonstrations: " + MIX_HELP)
    own.add_argument(
        "--decay_fraction",
        type=float,
        default=_D.decay_fraction,
        help="share of the steps (after warm-up) the cosine decay spans; before it the "
        "learning rate holds (1.0: cosine over the whole run)",
    )
    own.add_argument(
        "--batch_tokens", type=int, default=_D.batch_tokens, help="padded tokens per micro-batch"
    )
    own.add_argument("--max_batch", type=int, default=_D.max_batch, help="sequences per batch")
    own.add_argument(
        "--group_by_length",
        type=str2bool,
        default=_D.group_by_length,
        help="batch demonstrations of similar length (less padding); false: batches drawn at "
        "random, each with the data's mix (what a short warm start on imperfect "
        "demonstrations needs: sorting puts the short, tool-less ones in batches of their own)",
    )
    own.add_argument(
        "--eval_subset",
        type=int,
        default=_D.eval_subset,
        help="held-out tasks scored at each --eval_interval (all --eval_samples at the end)",
    )
    aliases = parser.add_argument_group("aliases", "other spellings of the options above")
    aliases.add_argument(
        "--output", default=None, help="the run directory (= --save_dir DIR/.. --run_name NAME)"
    )
    for flag, dest, value, text in (
        ("--resume", "from_resume", True, "= --from_resume true"),
        (
            "--compile",
            "use_compile",
            True,
            "= --use_compile true: compile each decoder layer with torch.compile for the "
            "training steps (needs a C++ compiler on the CPU; evaluations run eagerly)",
        ),
        ("--no_progress", "progress", False, "= --progress false"),
    ):
        aliases.add_argument(
            flag,
            dest=dest,
            action="store_const",
            const=value,
            default=argparse.SUPPRESS,
            help=text,
        )


def resolved_values(args: argparse.Namespace) -> dict[str, Any]:
    """The shared options' values: the warm start's defaults, then --config, then flags;
    each checked by its declaration."""
    from_file: dict[str, Any] = {}
    if getattr(args, "config", None):
        try:
            from_file = canonical_names(read_toml(args.config))
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
    given = {k: v for k, v in vars(args).items() if k in SFT_DEFAULTS}
    values = {**SFT_DEFAULTS, **{k: v for k, v in from_file.items() if k in SFT_DEFAULTS}}
    values.update(given)
    if args.output:
        if "save_dir" in given or "run_name" in given:
            raise UsageError("--output names the run directory; give it or --save_dir/--run_name")
        out = Path(args.output)
        values["save_dir"], values["run_name"] = str(out.parent), out.name
    for name in SFT_DEFAULTS:
        try:
            values[name] = check_value(name, option_field(name), values[name])
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
    data = getattr(args, "data_path", None) or from_file.get("data_path") or ()
    values["data_path"] = tuple([data] if isinstance(data, str) else data)
    return values


def tiny_spec(text: str) -> Any:
    """``--tiny`` (``KEY=VALUE,...`` over :class:`TinySpec` fields) as a spec; '' is None."""
    from agentrl.models.tiny import TinySpec

    types = {f.name: f.type for f in dataclasses.fields(TinySpec)}
    values: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = part.partition("=")
        if not sep or key not in types:
            raise UsageError(f"--tiny: {part!r} is not KEY=VALUE with KEY in {sorted(types)}")
        kind = type(getattr(TinySpec(), key))
        try:
            values[key] = kind(raw)
        except ValueError:
            raise UsageError(f"--tiny: {key}={raw!r}: expected {kind.__name__}") from None
    return TinySpec(**values) if values else None


def lora_settings(values: dict[str, Any]) -> Any:
    """The adapter the ``lora_*`` values ask for; None for ``lora_rank`` 0 (all weights)."""
    if values["lora_rank"] <= 0:
        return None
    from agentrl.models.lora import LoraSettings

    return LoraSettings(
        rank=values["lora_rank"],
        alpha=values["lora_alpha"],
        target_modules=values["lora_target_modules"],
        dropout=values["lora_dropout"],
    )


def options_from_args(args: argparse.Namespace) -> SFTRunOptions:
    """The parsed command line as the pipeline's options."""
    v = resolved_values(args)
    for flag in ("shortcut_rate", "shortcut_scope", "mix"):
        if getattr(args, flag) is not None and v["data_path"]:
            raise UsageError(f"--{flag} shapes generated demonstrations; --data gives its own")
    shortcut_rate, shortcut_scope = shortcut_settings(args.shortcut_rate, args.shortcut_scope)
    mix = None
    if args.mix is not None:
        try:
            mix = TaskConfig(mix=parse_mix(args.mix)).mix  # checked by the generator's config
        except ValueError as exc:
            raise UsageError(f"--mix {args.mix}: {exc}") from exc
    if not 0.0 < args.decay_fraction <= 1.0:
        raise UsageError(f"--decay_fraction {args.decay_fraction}: expected a share in (0, 1]")
    return SFTRunOptions(
        tiny=tiny_spec(args.tiny),
        tokenizer=v["tokenizer"] or None,
        data=v["data_path"],
        num_demos=args.num_demos,
        shortcut_rate=shortcut_rate,
        shortcut_scope=shortcut_scope,
        mix=mix,
        eval_data=v["eval_data_path"] or None,
        device=None if v["device"] == "auto" else v["device"],
        dtype=None if v["dtype"] == SFT_DTYPE else v["dtype"],
        lora=lora_settings(v),
        train=SFTConfig(
            output_dir=str(Path(v["save_dir"]) / v["run_name"]),
            batch_tokens=args.batch_tokens,
            max_batch=args.max_batch,
            group_by_length=args.group_by_length,
            decay_fraction=args.decay_fraction,
            eval_subset=args.eval_subset,
            **{own: v[name] for name, own in _TRAIN_FIELDS.items()},
        ),
        **{own: v[name] for name, own in _RUN_FIELDS.items()},
    )


def run(args: argparse.Namespace) -> int:
    from agentrl.errors import signal_exit_code
    from agentrl.sft.pipeline import run_sft
    from agentrl.training.signals import StopRequest

    options = options_from_args(args)
    # SIGINT/SIGTERM finish the step and save a checkpoint that `--resume` continues from.
    with StopRequest() as stop:
        result = run_sft(options, should_stop=lambda: stop.requested)
    training = result.training
    if training.stopped:
        print(
            f"stopped ({stop.reason}) at step {training.steps}; `agentrl sft --from_resume true` "
            f"with the same options continues it from {result.output_dir}/checkpoints"
        )
        return signal_exit_code(stop.signum) if stop.signum is not None else 0
    print(
        f"held-out exact match: {result.exact_match:.3f} on {result.heldout_tasks} tasks "
        f"(greedy, tool loop); {training.steps} steps, training {training.seconds:.0f}s, "
        f"total {result.seconds:.0f}s; model saved to {result.output_dir}"
    )
    return 0
