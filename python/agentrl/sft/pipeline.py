"""The whole supervised warm start as one call: model, data, training, held-out score.

`agentrl sft` parses its flags into :class:`SFTRunOptions` and calls :func:`run_sft`; the RL
trainer calls the same function when the built-in warm start (``runs/tiny-sft``) is
missing, so both produce the same model from the same defaults.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentrl.data.synthetic import DEFAULT_SHORTCUT_SCOPE
from agentrl.errors import UserError
from agentrl.sft.tasks import DEFAULT_DEMOS, DEFAULT_SHORTCUT_RATE
from agentrl.sft.train import SFTConfig, SFTResult
from agentrl.utils.run_lock import RunLock

if TYPE_CHECKING:
    from agentrl.models.lora import LoraSettings
    from agentrl.models.tiny import TinySpec

Log = Callable[[str], None]

DEFAULT_EVAL_TASKS = 200
DEFAULT_MAX_LEN = 1024


@dataclass(frozen=True)
class SFTRunOptions:
    """What to train, on what, and how; the defaults build the built-in warm start."""

    model: str = "tiny"  # tiny | HF model dir | MiniMind .pth
    tiny: TinySpec | None = None  # size of the tiny model (None: the preset's)
    tokenizer: str | None = None  # tokenizer dir for a .pth checkpoint
    data: tuple[str, ...] = ()  # demonstration JSONL files ((): generated)
    num_demos: int = DEFAULT_DEMOS  # generated demonstrations when `data` is empty
    # Share of head-math expressions the generated demonstrations answer without the tool.
    shortcut_rate: float = DEFAULT_SHORTCUT_RATE
    shortcut_scope: str = DEFAULT_SHORTCUT_SCOPE  # which expressions (synthetic.SHORTCUT_SCOPES)
    # Task-kind weights of the generated demonstrations (None: the generator's DEFAULT_MIX).
    mix: tuple[tuple[str, float], ...] | None = None
    eval_data: str | None = None  # held-out prompt-pool JSONL (None: generated)
    eval_tasks: int = DEFAULT_EVAL_TASKS
    max_len: int = DEFAULT_MAX_LEN  # longest training sequence, in tokens
    device: str | None = None  # None: CUDA when present
    dtype: str | None = None  # weight dtype (None: float32)
    num_threads: int = 0  # torch CPU threads (0: torch's default)
    deterministic: bool = True  # CPU kernels with the same bits on every run
    chat_template: str = ""  # '' the tokenizer's own, builtin, or a template file
    tool_format: str = "auto"  # the tool-call family demonstrations are written in
    # A LoRA adapter trains instead of every weight (None: all weights train); the run
    # still publishes full (merged) weights.
    lora: LoraSettings | None = None
    train: SFTConfig = field(default_factory=SFTConfig)  # output dir, schedule, checkpoints


@dataclass(frozen=True)
class SFTRunResult:
    """What a run produced: where the model is and how it scores on the held-out tasks."""

    output_dir: str
    heldout_tasks: int
    exact_match: float  # greedy, full tool loop; NaN when nothing was evaluated
    training: SFTResult
    seconds: float  # setup and training together


def check_paths(options: SFTRunOptions) -> None:
    """The data files exist and the output directory can be made (nothing is written)."""
    from agentrl.utils.paths import check_creatable_dir, check_readable_file

    for path in options.data:
        check_readable_file(path, "--data")
    if options.eval_data:
        check_readable_file(options.eval_data, "--eval_data")
    check_creatable_dir(options.train.output_dir, "--output")


def run_sft(
    options: SFTRunOptions, log: Log = print, should_stop: Callable[[], bool] | None = None
) -> SFTRunResult:
    """Build or load the model, prepare the data, train and save to ``options.train.output_dir``.

    Raises a :class:`agentrl.errors.UserError` for a model that cannot be loaded (a
    ``ModelLoadError``), a data file that is missing or leaves nothing to train on, or an
    output directory that cannot be made; paths are checked before the model loads.
    """
    check_paths(options)
    if options.lora is not None:
        from agentrl.models.lora import require_peft

        require_peft()  # before the model loads: a missing package says so at once
    with RunLock(options.train.output_dir, log):  # one run per output directory
        return _run_sft(options, log, should_stop)


def _run_sft(
    options: SFTRunOptions, log: Log, should_stop: Callable[[], bool] | None
) -> SFTRunResult:
    from agentrl.chat import use_chat_template
    from agentrl.models import load_configured_policy, resolve_device, resolve_dtype
    from agentrl.models.tiny import TinySpec, build_tiny_preset
    from agentrl.sft import tasks as sft_tasks
    from agentrl.sft.data import LoadStats, build_examples
    from agentrl.sft.train import train_sft
    from agentrl.tool_formats import use_tool_format
    from agentrl.utils.threads import deterministic_cpu_kernels, set_cpu_threads

    began = time.perf_counter()
    set_cpu_threads(options.num_threads)
    if options.dtype == "auto":
        from agentrl.models.precision import auto_dtype

        log(auto_dtype(options.device).describe())
    if options.model == "tiny":
        model, tokenizer = build_tiny_preset(options.tiny or TinySpec())
        device = resolve_device(options.device)
        model = model.to(device, resolve_dtype(options.dtype, device))
        use_chat_template(tokenizer, options.chat_template)
        use_tool_format(tokenizer, options.tool_format)
    else:
        model, tokenizer = load_configured_policy(
            options.model, options.dtype, options.device, options
        )
    deterministic_cpu_kernels(options.deterministic, next(model.parameters()).device)
    if options.lora is not None:
        import torch

        from agentrl.models.lora import apply_lora

        torch.manual_seed(options.train.seed)  # the adapter's initial weights follow --seed
        model = apply_lora(model, options.lora)
    if options.data:
        conversations, loaded = sft_tasks.load_demos(options.data)
        log(f"demonstrations: {loaded.as_dict()}")
        if not conversations:
            files = ", ".join(options.data)
            raise UserError(f"no usable demonstration in {files} ({loaded.as_dict()})")
    else:
        conversations = sft_tasks.generated_demos(
            options.num_demos,
            shortcut_rate=options.shortcut_rate,
            shortcut_scope=options.shortcut_scope,
            mix=options.mix,
        )
    if options.eval_data:
        heldout = sft_tasks.load_heldout(options.eval_data, options.eval_tasks)
    else:
        heldout = sft_tasks.generated_heldout(options.eval_tasks, conversations)
    env = sft_tasks.tool_env(tokenizer)
    stats = LoadStats()
    examples = build_examples(conversations, tokenizer, env.render, options.max_len, stats)
    if not examples:
        files = ", ".join(options.data) or "the generated demonstrations"
        raise UserError(f"no usable training example in {files} ({stats.as_dict()})")
    params = sum(p.numel() for p in model.parameters())
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    lora = f" ({trained / 1e6:.3f}M in the LoRA adapter train)" if options.lora else ""
    tokens = sum(len(e) for e in examples)
    targets = sum(sum(e.loss_mask) for e in examples)
    log(
        f"model {options.model}: {params / 1e6:.2f}M parameters{lora}, vocab {len(tokenizer)}; "
        f"{len(examples)} examples, {tokens} tokens ({targets} trained); "
        f"{len(heldout)} held-out tasks; setup {time.perf_counter() - began:.1f}s"
    )
    result = train_sft(model, tokenizer, examples, heldout, env, options.train, log, should_stop)
    return SFTRunResult(
        output_dir=options.train.output_dir,
        heldout_tasks=len(heldout),
        exact_match=float(result.eval.get("eval/exact_match", math.nan)),
        training=result,
        seconds=time.perf_counter() - began,
    )


__all__ = ["DEFAULT_DEMOS", "SFTRunOptions", "SFTRunResult", "check_paths", "run_sft"]
