"""What a training run shows and leaves behind: metrics JSONL, progress bar, trackers
(wandb, TensorBoard, trackio), rollout dumps, debug samples and the end-of-run PNG report.

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
from agentrl.observability.rollout_dump import (
    RolloutDumper,
    episode_records,
    read_records,
    write_records,
)
from agentrl.observability.trackers import TrackerError, Trackers, parse_report_to

__all__ = [
    "EVAL_DETAIL_KEYS",
    "MetricsLog",
    "ProgressDisplay",
    "QuietObserver",
    "RolloutDumper",
    "RunObserver",
    "TrackerError",
    "Trackers",
    "dashboard_metrics",
    "episode_records",
    "eval_metrics_from_details",
    "format_eval_line",
    "format_step_line",
    "mean_details",
    "parse_report_to",
    "read_metrics",
    "read_records",
    "write_records",
    "write_report",
]
