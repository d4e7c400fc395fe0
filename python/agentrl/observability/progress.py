"""The live view of a run: a progress bar with the key numbers, or plain log lines.

On a terminal (and unless switched off) a rich progress bar shows the step, time left and
the numbers one watches: reward, exact match, tool success, KL, clip fraction, tokens per
second and the rollout queue. Elsewhere (a log file, CI) the same numbers are printed as
one line every ``log_interval`` steps (with a bar: every ``max(log_interval, 10)`` steps,
above it). Messages printed through :meth:`ProgressDisplay.log` appear above the bar
instead of tearing it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, TextIO

# Metric keys the short summary reads; a missing key is shown as "-".
REWARD = "reward/mean"
EXACT = "reward_detail/exact_match"
TOOL_SUCCESS = "reward_detail/tool_success_rate"
KL = "policy/kl_ref"
CLIP = "policy/ratio_clip_frac"
TOKENS_PER_SEC = "perf/tokens_per_sec"
QUEUE = "async/queued"


def _num(metrics: Mapping[str, Any], key: str, spec: str = ".3f") -> str:
    value = metrics.get(key)
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    return format(value, spec)


def short_summary(metrics: Mapping[str, Any]) -> str:
    """The key numbers, compactly (for the progress bar)."""
    if builtin_reward_in_use(metrics):
        task = f"exact {_num(metrics, EXACT, '.2f')} tool {_num(metrics, TOOL_SUCCESS, '.2f')} "
    else:
        task = f"tools {_num(metrics, 'tools/calls_per_episode', '.2f')}/ep "
    return (
        f"R {_num(metrics, REWARD, '.2f')} {task}KL {_num(metrics, KL, '.4f')} "
        f"clip {_num(metrics, CLIP, '.3f')} {_num(metrics, TOKENS_PER_SEC, '.0f')} tok/s "
        f"Q {_num(metrics, QUEUE, '.0f')}"
    )


def builtin_reward_in_use(metrics: Mapping[str, Any], prefix: str = "") -> bool:
    """Whether the run's reward includes the built-in tool-use reward: it is the reward
    when no function is listed (``reward_fn/...``), or one of those listed."""
    functions = [k for k in metrics if k.startswith(f"{prefix}reward_fn/")]
    return not functions or f"{prefix}reward_fn/tool_use/mean" in metrics


def tools_part(metrics: Mapping[str, Any], prefix: str = "") -> str:
    """``tools 1.5/ep guess 1.5 err 0.10`` from the ``tools/...`` metrics (else "")."""
    total = metrics.get(f"{prefix}tools/calls_per_episode")
    if total is None:
        return ""
    parts = [f"tools {_num(metrics, f'{prefix}tools/calls_per_episode', '.2f')}/ep"]
    head = f"{prefix}tools/"
    for key in metrics:
        name = key[len(head) : -len("/calls_per_episode")]
        if key.startswith(head) and key.endswith("/calls_per_episode") and name:
            parts.append(
                f"{name} {_num(metrics, key, '.2f')} err "
                f"{_num(metrics, f'{head}{name}/error_rate', '.2f')}"
            )
    return " ".join(parts) + " "


def format_step_line(step: int, total: int, metrics: Mapping[str, Any]) -> str:
    """One log line per training step: reward, accuracy, tool use, KL, BC, queue, speed.

    The built-in task's terms (exact match, answer coverage and tag, tool success, choice
    and values) show only when its reward is in use; a task of one's own shows its tools'
    calls and error rates instead, and its reward functions at the end."""
    m = metrics
    if builtin_reward_in_use(m):
        task = (
            f"exact/cov {_num(m, EXACT, '.2f')}/{_num(m, 'reward_detail/answer_cov', '.2f')} "
            f"tag {_num(m, 'reward_detail/answer_tag', '.2f')} "
            f"tool ok/choice/val {_num(m, TOOL_SUCCESS, '.2f')}/"
            f"{_num(m, 'reward_detail/correct_tool_choice', '.2f')}/"
            f"{_num(m, 'reward_detail/tool_value_order_cov', '.2f')} "
        )
    else:
        task = tools_part(m)
    return (
        f"step {step}/{total} v{_num(m, 'policy/version', '.0f')} "
        f"R {_num(m, REWARD)} ({_num(m, 'reward/min', '.2f')}/{_num(m, 'reward/max', '.2f')}) "
        + task
        + f"KL/ent/clip {_num(m, KL, '.4f')}/{_num(m, 'policy/entropy', '.2f')}/"
        f"{_num(m, CLIP, '.3f')} "
        f"BC {_num(m, 'bc/loss', '.3f')}x{_num(m, 'bc/coef', '.3f')} "
        f"Q {_num(m, QUEUE, '.0f')}/{_num(m, 'async/queue_capacity', '.0f')} "
        f"stale {_num(m, 'async/token_staleness_mean', '.2f')}"
        f"/{_num(m, 'async/staleness_group_max', '.0f')} "
        f"gen {_num(m, 'gen/tokens_mean', '.0f')}"
        f" cut {_num(m, 'gen/hit_limit_frac', '.2f')} "
        f"roll {_num(m, 'perf/rollout_sec', '.1f')}s train {_num(m, 'perf/train_sec', '.1f')}s "
        f"{_num(m, TOKENS_PER_SEC, '.0f')} tok/s "
        f"lr {_num(m, 'train/lr', '.2e')} beta {_num(m, 'train/beta', '.4f')}"
        + reward_functions_part(m)
    )


def reward_functions_part(metrics: Mapping[str, Any], prefix: str = "") -> str:
    """`` | fn mean±std None x%`` per reward function of a run with several (else "")."""
    parts = []
    head = f"{prefix}reward_fn/"
    for key in metrics:
        if key.startswith(head) and key.endswith("/mean"):
            name = key[len(head) : -len("/mean")]
            none = metrics.get(f"{head}{name}/none_frac")
            share = "-" if not isinstance(none, int | float) else f"{100 * none:.0f}%"
            parts.append(
                f"{name} {_num(metrics, key, '.3f')}±"
                f"{_num(metrics, f'{head}{name}/std', '.3f')} None {share}"
            )
    return (" | " + ", ".join(parts)) if parts else ""


def format_eval_line(label: str, step: int, metrics: Mapping[str, Any]) -> str:
    """One line per evaluation with the headline eval metrics: the built-in task's terms
    when its reward is in use, else the task's tools and reward functions."""
    m = metrics
    if builtin_reward_in_use(m, "eval/"):
        task = (
            f"exact {_num(m, 'eval/exact_match')} cov {_num(m, 'eval/answer_cov')} "
            f"tag {_num(m, 'eval/answer_tag')} tool ok {_num(m, 'eval/tool_success_rate')} "
            f"choice {_num(m, 'eval/tool_correct_choice_rate')} "
            f"expr {_num(m, 'eval/tool_expr_order_cov')} "
            f"val {_num(m, 'eval/tool_value_order_cov')} "
            f"canon {_num(m, 'eval/tool_canonical_rate')} "
        )
    else:
        functions = reward_functions_part(m, "eval/").removeprefix(" | ")
        task = tools_part(m, "eval/") + (f"{functions} " if functions else "")
    return (
        f"[{label}] step {step} R {_num(m, 'eval/reward', '.4f')} {task}"
        f"({_num(m, 'eval/tasks', '.0f')} tasks, {_num(m, 'eval/seconds', '.1f')}s)"
    )


class ProgressDisplay:
    """A rich progress bar on a terminal, else a line every ``log_interval`` steps."""

    def __init__(
        self,
        total: int,
        start: int = 0,
        *,
        enabled: bool = True,
        log_interval: int = 1,
        stream: TextIO | None = None,
    ) -> None:
        self.total = max(int(total), 1)
        self.log_interval = max(int(log_interval), 1)
        self.stream = stream or sys.stderr
        self._progress: Any = None
        self._task: Any = None
        if enabled and getattr(self.stream, "isatty", lambda: False)():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]RL"),
                BarColumn(bar_width=24),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[summary]}"),
                console=Console(file=self.stream),
            )
            self._task = self._progress.add_task(
                "train", total=self.total, completed=int(start), summary=""
            )
            self._progress.start()

    @property
    def live(self) -> bool:
        return self._progress is not None

    def log(self, message: str) -> None:
        """Print a message (above the bar when one is shown)."""
        if self._progress is not None:
            self._progress.console.print(message, markup=False, highlight=False)
        else:
            print(message, file=self.stream, flush=True)

    def update(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Advance to ``step`` with its metrics."""
        every = self.log_interval
        if self._progress is not None:
            self._progress.update(self._task, completed=step, summary=short_summary(metrics))
            every = max(every, 10)
        if step % every == 0 or step == self.total:
            self.log(format_step_line(step, self.total, metrics))

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


__all__ = ["ProgressDisplay", "format_eval_line", "format_step_line", "short_summary"]
