"""One object the trainer reports to; it fans out to every output of a run.

Per step: the metrics JSONL, the progress display, the trackers (``report_to``). Per
evaluation: the same, plus a log line. Every ``dump_rollouts`` steps: the step's episodes
(and each evaluation's) as a dump file, with a sample table to the trackers. At the end: the
PNG report from the metrics file, so a resumed run's report shows the whole history.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentrl.observability.debug import format_debug_sample, should_log
from agentrl.observability.metrics_log import MetricsLog, read_metrics
from agentrl.observability.progress import ProgressDisplay, format_eval_line
from agentrl.observability.report import write_report
from agentrl.observability.rollout_dump import RolloutDumper
from agentrl.observability.trackers import Trackers
from agentrl.trajectory import RolloutGroup

METRICS_FILE = "metrics.jsonl"
REPORT_FILE = "report.png"


class RunObserver:
    """Metrics file + progress display + optional dashboards + final report for one run."""

    def __init__(
        self,
        run_dir: str | Path,
        total_steps: int,
        *,
        start_step: int = 0,
        resumed: bool = False,
        progress: bool = True,
        log_interval: int = 1,
        debug_interval: int = 0,
        report: bool = True,
        report_to: Sequence[str] = (),
        tracker_dir: str = "",
        tracker_project: str = "",
        dump_rollouts: int = 0,
        max_turns: int = 1,
        run_name: str = "",
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.total_steps = int(total_steps)
        self.debug_interval = int(debug_interval)
        self.report = bool(report)
        self.run_name = run_name or self.run_dir.name
        self.started = time.perf_counter()
        self.trackers = Trackers(
            report_to,
            run_name=self.run_name,
            log_dir=tracker_dir or self.run_dir / "trackers",
            project=tracker_project,
            config=config,
            resumed=resumed,
        )
        self.dumper = RolloutDumper(self.run_dir, dump_rollouts, max_turns)
        if resumed:
            self.dumper.drop_after(start_step)
        self.metrics = MetricsLog(self.run_dir / METRICS_FILE, start_step if resumed else None)
        self.display = ProgressDisplay(
            total_steps, start_step, enabled=progress, log_interval=log_interval
        )

    def log(self, message: str) -> None:
        self.display.log(message)

    def _elapsed(self) -> float:
        return round(time.perf_counter() - self.started, 3)

    def train_step(self, step: int, metrics: Mapping[str, Any]) -> None:
        self.metrics.write(step, "train", metrics, time=self._elapsed())
        self.trackers.log(metrics, step)
        self.display.update(step, metrics)

    def evaluation(self, step: int, metrics: Mapping[str, Any], label: str = "eval") -> None:
        if not metrics:
            return
        self.metrics.write(step, "eval", metrics, time=self._elapsed(), label=label)
        self.trackers.log(metrics, step)
        self.log(format_eval_line(label, step, metrics))

    def debug_sample(
        self,
        step: int,
        groups: Sequence[RolloutGroup],
        rewards: Sequence[float],
        details: Sequence[Mapping[str, Any]],
    ) -> None:
        """Show the first group of the batch every ``debug_interval`` steps."""
        if not groups or not should_log(step, self.debug_interval):
            return
        n = len(groups[0].trajectories)
        self.log(format_debug_sample(step, groups[0], rewards[:n], details[:n]))

    def dump_due(self, step: int) -> bool:
        """Whether this step's episodes are to be dumped (``dump_rollouts``)."""
        return self.dumper.due(step)

    def dump(self, kind: str, step: int, records: Sequence[Mapping[str, Any]]) -> Path | None:
        """Write a dump file of ``records`` and log a sample table of them to the trackers."""
        if not records:
            return None
        path = self.dumper.write(kind, step, records)
        self.trackers.log_samples(f"{kind}_episodes", records, step)
        return path

    def history(self) -> list[dict[str, Any]]:
        """Every record of the run so far (a resumed run's included)."""
        return read_metrics(self.run_dir / METRICS_FILE)

    def abort(self) -> None:
        """Stop the display and close the files without a report (the run failed)."""
        self.display.close()
        self.trackers.close()
        self.metrics.close()

    def close(self) -> Path | None:
        """Stop the display and dashboards; write the report. Returns the report path."""
        self.abort()  # everything closes as when a run fails, then the report is written
        if not self.report:
            return None
        path = write_report(
            read_metrics(self.run_dir / METRICS_FILE),
            self.run_dir / REPORT_FILE,
            title=f"{self.run_name}: RL training",
        )
        if path is None:
            self.log("report skipped: matplotlib is not installed")
        return path


class QuietObserver:
    """The observer of a process that shows and writes nothing: the ranks other than 0 of
    a multi-process run, whose metrics reach rank 0's observer (averaged) instead.

    It has every method of :class:`RunObserver`, so the trainer reports the same way in
    every process; here each one ignores what it is given and does nothing, or returns what
    nothing written means.
    """

    def _nothing(self, *args: Any, **kwargs: Any) -> None:
        return None

    log = train_step = evaluation = debug_sample = abort = _nothing
    dump = close = _nothing  # no file written: None

    def dump_due(self, step: int) -> bool:
        return False

    def history(self) -> list[dict[str, Any]]:
        return []


__all__ = ["METRICS_FILE", "REPORT_FILE", "QuietObserver", "RunObserver"]
