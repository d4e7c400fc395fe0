"""The run's models, from its config: the policy, its reference and rollout copies.

- The policy comes from ``--model`` (any `load_policy` spec) or, by checkpoint naming, from
  ``save_dir/<from_weight>_<hidden_size>[_moe].pth``. The built-in warm start
  (``runs/tiny-sft``) is trained first, as ``agentrl sft --compile`` would, when missing.
- The reference policy (KL anchor) and the rollout copy start as frozen copies of the
  policy as loaded, before any checkpoint is applied: the reference must stay the warm
  start for the whole run, resumed or not. With the KL penalty off (beta 0, not
  auto-tuned) there is no reference copy; with ``ref_offload`` it lives on the CPU
  (`agentrl.training.memory`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch

from agentrl.config import TrainConfig
from agentrl.data.reasoning_gym import is_reasoning_gym
from agentrl.data.verifiers_env import is_verifiers
from agentrl.errors import UserError
from agentrl.models import (
    TINY_SFT_DIR,
    frozen_copy,
    load_configured_policy,
    load_policy,
    resolve_device,
)
from agentrl.models.compile import missing_compiler
from agentrl.models.precision import auto_dtype
from agentrl.training.memory import OffloadedReference, enable_gradient_checkpointing
from agentrl.training.models import Log, Models, autocast_factory
from agentrl.utils.launch import launched_by_torchrun
from agentrl.utils.paths import check_creatable_dir, check_readable_file
from agentrl.utils.threads import deterministic_cpu_kernels, set_cpu_threads, usable_cores


def hardware_notes(config: TrainConfig) -> list[str]:
    """What this process does with options meant for hardware it does not have, or that
    work against each other on it."""
    notes = []
    on_cpu = config.device == "cpu" or not torch.cuda.is_available()
    if config.device.startswith("cuda") and not torch.cuda.is_available():
        notes.append(f"device={config.device}: no CUDA device here; running on the CPU")
    threads = _cpu_threads(config)
    # Under torchrun's trainer/rollout split no process both trains and rolls out.
    split = config.multi_gpu_mode == "trainer_rollout" and launched_by_torchrun()
    both = config.rollout_engine == "torch" and config.async_workers > 0 and not split
    if on_cpu and both and threads > 1:
        notes.append(
            f"async_workers={config.async_workers} on the CPU with {threads} torch threads: "
            "rollout and training each run OpenMP teams on the same cores, and idle team "
            "threads then sleep between operations (on 2 cores a step took 1.4x-1.6x as long "
            "as with rollout inline); --async_workers 0, or --num_threads 1 to give each its core"
        )
    return notes


def _cpu_threads(config: TrainConfig) -> int:
    """The torch thread count this run will use (see :func:`configure_threads`)."""
    if config.num_threads > 0:
        return min(config.num_threads, usable_cores())
    return torch.get_num_threads()


def check_data_files(config: TrainConfig) -> None:
    """Fail now, in one line, when a prompt file the config names is not a readable file."""
    for option, path in (
        ("--data_path", config.data_path),
        ("--eval_data_path", config.eval_data_path),
    ):
        if path and not (is_reasoning_gym(path) or is_verifiers(path)):  # not files
            check_readable_file(path, option)


def preflight(config: TrainConfig) -> None:
    """Fail now, in one line, when ``save_dir/run_name`` cannot become the run directory
    or a prompt file is missing: before the model and data load (which may take minutes),
    and before anything is written."""
    check_creatable_dir(config.run_dir, "--save_dir/--run_name")
    check_data_files(config)


def model_spec(config: TrainConfig) -> str:
    """``--model`` when given, else the compatible ``<save_dir>/<from_weight>_<hidden>.pth``."""
    if config.model:
        return config.model
    suffix = "_moe" if config.use_moe else ""
    return str(Path(config.save_dir) / f"{config.from_weight}_{config.hidden_size}{suffix}.pth")


class WarmStartStopped(Exception):
    """A stop request (SIGINT/SIGTERM) ended the warm start before its last step; its
    checkpoint is kept, and the next run that needs the warm start resumes from it."""

    def __init__(self, step: int, seconds: float) -> None:
        super().__init__(f"warm start stopped at step {step}; the next run resumes it")
        self.seconds = seconds  # counted as warm-start time in the run's result


def ensure_warm_start(
    spec: str, log: Log, should_stop: Callable[[], bool] | None = None, progress: bool = True
) -> bool:
    """Train the built-in warm start (`agentrl sft --compile`) when asked for but absent,
    resuming an earlier one that was stopped. Returns whether it ran.

    ``should_stop`` (the run's stop flag) is asked after every step; when it says so the
    warm start saves a checkpoint and :class:`WarmStartStopped` is raised.
    """
    if Path(spec) != Path(TINY_SFT_DIR) or (Path(spec) / "config.json").is_file():
        return False
    from agentrl.sft.checkpoint import list_checkpoints
    from agentrl.sft.pipeline import SFTRunOptions, run_sft
    from agentrl.sft.train import SFTConfig

    resume = bool(list_checkpoints(Path(spec) / "checkpoints"))
    doing = "resuming the stopped warm start" if resume else "training the warm start first"
    log(f"{spec} not found: {doing} (as `agentrl sft --compile` would)")
    began = time.perf_counter()
    # Compiled layers train the built-in warm start faster (docs/tuning.md); a machine that
    # cannot compile gets told so and trains eagerly, to a different (still valid) model.
    cannot_compile = missing_compiler(resolve_device(None))
    if cannot_compile is not None:
        log(f"{cannot_compile}: the warm start trains eagerly, more slowly")
    train = SFTConfig(
        output_dir=spec, resume=resume, compile=cannot_compile is None, progress=progress
    )
    options = SFTRunOptions(train=train)
    result = run_sft(options, log, should_stop)
    if result.training.stopped:
        raise WarmStartStopped(result.training.steps, time.perf_counter() - began)
    if not (Path(spec) / "config.json").is_file():
        raise RuntimeError(f"the warm start did not produce {spec}")
    log(f"warm start: held-out exact match {result.exact_match:.3f}; model saved to {spec}")
    return True


def run_dtype(config: TrainConfig, device: torch.device | str | None = None) -> str:
    """``--dtype``, with ``auto`` made the one detected for `device` (None: the device
    ``--device`` names, CUDA when present for ``auto``): :mod:`agentrl.models.precision`."""
    if config.dtype != "auto":
        return config.dtype
    if device is None:
        device = None if config.device == "auto" else config.device
    return auto_dtype(device).dtype


def weight_dtype(config: TrainConfig, device: torch.device | str | None = None) -> str:
    """The dtype the policy and its copies are loaded in: ``--dtype``, except under FSDP,
    whose float32 shards are cast to ``--dtype`` for compute by FSDP itself."""
    return "float32" if config.fsdp else run_dtype(config, device)


def configure_threads(config: TrainConfig) -> None:
    """Pin torch's CPU thread count when asked (see :mod:`agentrl.utils.threads`)."""
    set_cpu_threads(config.num_threads)


def load_models(
    config: TrainConfig, log: Log, should_stop: Callable[[], bool] | None = None
) -> Models:
    """Policy (trainable), reference and rollout copies, on the configured device.

    ``should_stop`` is handed to a warm start that has to be trained first."""
    configure_threads(config)
    spec = model_spec(config)
    began = time.perf_counter()
    warmed = ensure_warm_start(spec, log, should_stop, progress=bool(config.progress))
    warm_seconds = time.perf_counter() - began if warmed else 0.0
    for note in hardware_notes(config):
        log(note)
    cuda_missing = config.device.startswith("cuda") and not torch.cuda.is_available()
    device = resolve_device(None if config.device == "auto" or cuda_missing else config.device)
    deterministic_cpu_kernels(config.deterministic, device)
    if config.dtype == "auto":
        log(auto_dtype(device).describe())
    policy, tokenizer = load_configured_policy(spec, weight_dtype(config, device), device, config)
    policy.train()
    policy.requires_grad_(True)
    if hasattr(policy, "config"):
        policy.config.use_cache = False  # training forwards never reuse a KV cache
    reference, rollout = reference_model(policy, config, device, log), frozen_copy(policy)
    if hasattr(rollout, "config"):
        rollout.config.use_cache = True
    if config.gradient_checkpointing:
        enable_gradient_checkpointing(policy)
    forward = torch.compile(policy) if config.use_compile else policy
    return Models(
        policy,
        forward,
        reference,
        rollout,
        tokenizer,
        device,  # type: ignore[arg-type]
        autocast_factory(device, config.dtype),
        spec,
        warm_seconds,
    )


def _vocabulary(model: torch.nn.Module) -> int | None:
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    return None if embeddings is None else int(embeddings.weight.shape[0])


def kl_off(config: TrainConfig) -> bool:
    """beta is 0 and stays 0: the loss never reads the reference policy."""
    return config.beta == 0 and not config.beta_auto_tune


def reference_model(
    policy: torch.nn.Module, config: TrainConfig, device: torch.device, log: Log = print
) -> torch.nn.Module:
    """The KL anchor: a frozen copy of the policy as loaded, or the weights
    ``reference_model_path`` names, kept on the CPU with ``ref_offload``; none (the policy
    itself stands in, see `agentrl.training.step`) when the KL penalty is off."""
    if kl_off(config):
        if config.reference_model_path:
            log(f"reference_model_path={config.reference_model_path} unused: the KL is off")
        return policy
    if config.reference_model_path:
        reference, _ = load_policy(
            config.reference_model_path,
            weight_dtype(config, device),
            device,
            tokenizer=config.tokenizer or None,
        )
        reference.eval()
        reference.requires_grad_(False)
        ours, theirs = _vocabulary(policy), _vocabulary(reference)
        if ours != theirs:
            raise UserError(
                f"reference_model_path={config.reference_model_path}: a vocabulary of "
                f"{theirs} tokens where the policy has {ours}; the reference must score "
                "the policy's tokens"
            )
    else:
        reference = frozen_copy(policy)
    if config.ref_offload and device.type != "cpu":
        return OffloadedReference(reference, device)
    return reference
