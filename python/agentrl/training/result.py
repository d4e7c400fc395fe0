"""What a training run returns: how far it got, why it stopped, what it wrote, its exit code."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agentrl.errors import EXIT_OK, signal_exit_code


@dataclass
class TrainResult:
    run_dir: Path
    steps_done: int
    total_steps: int
    stopped: str | None  # why the run ended before total_steps, if it did
    wall_seconds: float  # the whole run, a warm start it had to train included
    first_eval: dict[str, float] = field(default_factory=dict)
    last_eval: dict[str, float] = field(default_factory=dict)
    report: Path | None = None
    policy_export: Path | None = None
    checkpoint: Path | None = None
    warm_start_seconds: float = 0.0  # the share of wall_seconds spent in `agentrl sft`
    is_main: bool = True  # the process that reports the run (rank 0 under torchrun)
    signal: int | None = None  # the signal that stopped the run early, if one did

    @property
    def exit_code(self) -> int:
        """0, or 128 + the signal that stopped the run (130 SIGINT, 143 SIGTERM)."""
        return EXIT_OK if self.signal is None else signal_exit_code(self.signal)


__all__ = ["TrainResult"]
