"""Optional external dashboards: TensorBoard and wandb, used only when installed.

Neither is a dependency. A sink that is asked for but missing, or that fails to start
(no login, no network), is reported once and switched off; training never stops for it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
from collections.abc import Callable, Mapping
from typing import Any


def _finite_numbers(metrics: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for key, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(value):
            out[key] = float(value)
    return out


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


class ExternalSinks:
    """Forwards numeric metrics to whichever of TensorBoard / wandb could be started."""

    def __init__(
        self,
        *,
        tensorboard_dir: str = "",
        use_wandb: bool = False,
        wandb_project: str = "",
        run_name: str = "",
        config: Mapping[str, Any] | None = None,
        log: Callable[[str], None] = print,
    ) -> None:
        self._tb: Any = None
        self._wandb: Any = None
        self.notes: list[str] = []
        if tensorboard_dir:
            self._tb = self._start_tensorboard(tensorboard_dir, log)
        if use_wandb:
            self._wandb = self._start_wandb(wandb_project, run_name, config, log)

    def _start_tensorboard(self, logdir: str, log: Callable[[str], None]) -> Any:
        if not installed("tensorboard"):
            log("TensorBoard logging off: the tensorboard package is not installed")
            return None
        try:
            from torch.utils.tensorboard import SummaryWriter

            return SummaryWriter(log_dir=logdir)
        except Exception as exc:  # any failure only disables the sink
            log(f"TensorBoard logging off: {exc!r}")
            return None

    def _start_wandb(
        self, project: str, name: str, config: Mapping[str, Any] | None, log: Callable[[str], None]
    ) -> Any:
        if not installed("wandb"):
            log("wandb logging off: the wandb package is not installed")
            return None
        try:
            import wandb

            wandb.init(project=project or None, name=name or None, config=dict(config or {}))
            return wandb
        except Exception as exc:  # no login, no network: keep training
            log(f"wandb logging off: {exc!r}")
            return None

    @property
    def active(self) -> list[str]:
        return [n for n, s in (("tensorboard", self._tb), ("wandb", self._wandb)) if s]

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        numbers = _finite_numbers(metrics)
        if self._tb is not None:
            for key, value in numbers.items():
                self._tb.add_scalar(key, value, step)
        if self._wandb is not None:
            try:
                self._wandb.log(numbers, step=step)
            except Exception:  # a dashboard hiccup must not end a run
                self._wandb = None

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        if self._wandb is not None:
            with contextlib.suppress(Exception):
                self._wandb.finish()
            self._wandb = None


__all__ = ["ExternalSinks", "installed"]
