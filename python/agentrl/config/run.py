"""The run's own options: where it writes, how long it runs, what it logs, and how it is
evaluated (the ``run`` and ``eval`` sections of the run's config).

The trainer and the training pieces read them; they are declared here, beside the config
that composes them, because those readers sit above the config in the layers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from agentrl.utils.options import option

__all__ = ["EvalConfig", "RunConfig"]


@dataclass(frozen=True)
class RunConfig:
    """Output, schedule, logging, device and processes."""

    SECTION: ClassVar[str] = "run"

    save_dir: str = option("runs", "directory for runs; a run writes to save_dir/run_name")
    run_name: str = option("", "run name ('': <model name>-rl with --model, else rl)", common=True)
    epochs: int = option(1, "passes over the prompts when total_steps is 0", check=">=1")
    total_steps: int = option(
        0, "training steps of the run (0: epochs x prompts / batch_size)", check=">=0", common=True
    )
    scale_total_steps_by_world_size: bool = option(
        False,
        "divide total_steps among the data-parallel ranks (the compat preset's behaviour)",
    )
    batch_size: int = option(2, "prompt groups per training step", check=">=1", common=True)
    log_interval: int = option(1, "steps between log lines", check=">=1")
    save_interval: int = option(100, "steps between checkpoints (0: only at the end)", check=">=0")
    seed: int = option(42, "random seed of the run")
    deterministic: bool = option(
        True,
        "CPU kernels that give the same bits on every run: a seed gives one result "
        "(false: torch's fastest, results vary in the last digits)",
    )
    from_resume: bool = option(False, "resume from the run's latest checkpoint", common=True)
    device: str = option(
        "auto", "cpu, cuda, cuda:N (CPU when no CUDA); auto picks CUDA when present", common=True
    )
    dtype: str = option(
        "bfloat16",
        "weights of the policy, reference and rollout copy (train and eval, CPU too); "
        "bfloat16/float16: float32 master weights and AdamW state in the optimizer, "
        "no loss scaling (train in bfloat16, not float16); with fsdp the shards stay "
        "float32 and FSDP computes in dtype; auto: bfloat16 on CUDA and on CPUs with AMX or "
        "AVX512-BF16, "
        "float32 elsewhere (detected, logged at start)",
        ("auto", "bfloat16", "float16", "float32"),
    )
    use_compile: bool = option(False, "torch.compile the trained model")
    use_wandb: bool = option(
        False, "add wandb to report_to when it is installed (a warning when it is not)"
    )
    wandb_project: str = option("agentrl", "wandb / trackio project name")
    report_to: str = option("", "trackers, comma-separated: wandb, tensorboard, trackio ('': none)")
    dump_rollouts: int = option(
        0,
        "steps between rollout dumps to run_dir/rollouts, for agentrl view (0: off)",
        check=">=0",
    )
    debug_interval: int = option(
        0, "steps between printed sample trajectories (0: off)", check=">=0"
    )
    keep_last: int = option(3, "checkpoints kept (0: all)", check=">=0")
    progress: bool = option(True, "show a progress bar on a terminal")
    tensorboard_dir: str = option(
        "",
        "TensorBoard log dir, logs in DIR/<run name> (set: adds tensorboard to report_to; "
        "'': run_dir/trackers)",
    )
    report: bool = option(True, "write report.png with the curves at the end")
    max_time: float = option(0.0, "stop cleanly after this many seconds (0: none)", check=">=0")
    num_threads: int = option(
        0, "torch CPU threads, at most the usable cores (0: torch's choice)", check=">=0"
    )
    dist_backend: str = option("auto", "torchrun process group backend", ("auto", "nccl", "gloo"))
    dist_timeout_sec: float = option(1800.0, "torchrun collective timeout", check=">=0")
    fsdp: bool = option(
        False,
        "shard policy and reference with FSDP2 under torchrun (multi_gpu_mode ddp); "
        "parameters in dtype, gradients reduced in float32",
    )
    gradient_checkpointing: bool = option(
        False, "recompute activations in backward (less memory, more compute)"
    )
    ref_offload: bool = option(
        False, "keep the reference policy on the CPU; moved to the device per forward"
    )


@dataclass(frozen=True)
class EvalConfig:
    """Held-out evaluation during a run."""

    SECTION: ClassVar[str] = "eval"

    eval_ratio: float = option(0.02, "share of the prompts held out", check="[0,1]")
    eval_max_pool: int = option(256, "held-out prompts at most", check=">=0")
    eval_interval: int = option(100, "steps between evaluations (0: off)", check=">=0", common=True)
    eval_samples: int = option(
        32, "held-out prompts scored per evaluation (0: none, -1: all)", check=">=-1", common=True
    )
    eval_seed: int = option(1234, "seed that fixes which prompts are scored")
    eval_temperature: float = option(0.0, "eval sampling temperature (0: greedy)", check=">=0")
    eval_generations: int = option(
        1,
        "episodes per scored prompt; with eval_temperature > 0, accuracy over all and pass@k",
        check=">=1",
    )
    eval_before_train: bool = option(True, "evaluate the starting policy")
    eval_max_gen_len: int = option(192, "new tokens per eval turn (0: max_gen_len)", check=">=0")
    eval_data_path: str = option("", "held-out prompt-pool JSONL ('': split)")
