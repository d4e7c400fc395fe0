"""Scaling out: `torchrun` modes (data parallel, trainer/rollout split), remote rollout
engines and LoRA, wired into the trainer loop by :func:`build_trainer`.

Launch with ``torchrun --nproc_per_node=N -m agentrl.cli train --multi_gpu_mode ddp ...``
(or ``trainer_rollout``); without `torchrun` everything runs in one process.
"""

from agentrl.distributed.runtime import (
    DEFAULT_TIMEOUT_S,
    DistContext,
    DistributedError,
    init_distributed,
    launched_by_torchrun,
    shutdown,
)


def is_main_process() -> bool:
    """True outside torchrun and on rank 0: the process that prints and writes."""
    import os

    return int(os.environ.get("RANK", "0")) == 0


def __getattr__(name: str):  # the trainer pieces import the whole training stack
    if name in ("ScaleOptions", "ScaleOutTrainer", "RolloutRank", "build_trainer"):
        from agentrl.distributed import trainer

        return getattr(trainer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "DistContext",
    "DistributedError",
    "RolloutRank",
    "ScaleOptions",
    "ScaleOutTrainer",
    "build_trainer",
    "init_distributed",
    "is_main_process",
    "launched_by_torchrun",
    "shutdown",
]
