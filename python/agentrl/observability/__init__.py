"""What a training run shows and leaves behind: metrics JSONL, progress bar, optional
TensorBoard/wandb, debug samples and the end-of-run PNG report.

The trainer talks to one :class:`RunObserver` (a :class:`QuietObserver` in processes
that do not report); each output lives in its own module.
"""

from agentrl.observability.dashboard import (
    EVAL_DETAIL_KEYS,
    dashboard_metrics,
    eval_metrics_from_details,
    mean_details,
)
from agentrl.observability.metrics_log import MetricsLog, read_metrics
from agentrl.observability.observer import QuietObserver, RunObserver
from agentrl.observability.progress import ProgressDisplay, format_eval_line, format_step_line
from agentrl.observability.report import write_report
from agentrl.observability.sinks import ExternalSinks

__all__ = [
    "EVAL_DETAIL_KEYS",
    "ExternalSinks",
    "MetricsLog",
    "ProgressDisplay",
    "QuietObserver",
    "RunObserver",
    "dashboard_metrics",
    "eval_metrics_from_details",
    "format_eval_line",
    "format_step_line",
    "mean_details",
    "read_metrics",
    "write_report",
]
