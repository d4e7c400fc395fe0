"""Experiment trackers (``--report_to wandb,tensorboard,trackio``) through one mechanism:
accelerate's tracker classes, started here without an ``Accelerator``.

Every tracker gets the run's config once, the numeric metrics of each step and evaluation,
and at each rollout dump a table of sample episodes. A tracker asked for whose package is
missing is an error naming the extra to install; the run does not start without it.
"""

from __future__ import annotations

import importlib.util
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentrl.utils.atomic import atomic_file

# name -> (module that must be importable, extra of agentrl that installs it)
TRACKERS: dict[str, tuple[str, str]] = {
    "wandb": ("wandb", "wandb"),
    "tensorboard": ("tensorboard", "tensorboard"),
    "trackio": ("trackio", "trackio"),
}

# Columns of the sample-episode table logged at each rollout dump.
TABLE_COLUMNS = [
    "step",
    "group",
    "reward",
    "advantage",
    "finish_reason",
    "tool_calls",
    "completion",
]
TABLE_ROWS = 16
_TEXT_CHARS = 600


class TrackerError(ValueError):
    """A tracker that was asked for cannot start (unknown name or package missing)."""


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def parse_report_to(text: str) -> list[str]:
    """``"wandb, tensorboard"`` -> ["wandb", "tensorboard"]; unknown names are an error."""
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    for name in names:
        if name not in TRACKERS:
            raise TrackerError(
                f"report_to: unknown tracker {name!r}; trackers: {', '.join(TRACKERS)}"
            )
    return list(dict.fromkeys(names))


def check_installed(names: Sequence[str]) -> None:
    """Raise TrackerError naming the extra to install for the first missing package."""
    for name in names:
        module, extra = TRACKERS[name]
        if not installed(module):
            raise TrackerError(
                f"--report_to {name} needs the {module} package, which is not installed: "
                f"pip install 'agentrl[{extra}]'"
            )


def tracker_names(
    report_to: str, *, tensorboard_dir: str, use_wandb: bool
) -> tuple[list[str], str]:
    """The trackers a run reports to, and a warning line ('' for none).

    ``report_to`` names them. The older options map onto it: ``tensorboard_dir`` set adds
    tensorboard (its logging directory), ``use_wandb`` adds wandb when the package is
    installed; when it is not, the run goes on and the warning says so (``--report_to
    wandb`` makes it required).
    """
    names = parse_report_to(report_to)
    if tensorboard_dir and "tensorboard" not in names:
        names.append("tensorboard")
    warning = ""
    if use_wandb and "wandb" not in names:
        if installed("wandb"):
            names.append("wandb")
        else:
            warning = (
                "use_wandb is on but wandb is not installed: not logging to wandb "
                "(pip install 'agentrl[wandb]', or --use_wandb 0; --report_to wandb requires it)"
            )
    return names, warning


def finite_numbers(metrics: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for key, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(value):
            out[key] = float(value)
    return out


def sample_table(records: Sequence[Mapping[str, Any]], rows: int = TABLE_ROWS) -> list[list[Any]]:
    """The table rows for a dump: the first ``rows`` episodes, completion text shortened."""
    table = []
    for record in records[:rows]:
        turns = [
            m.get("content", "") for m in record.get("messages", []) if m.get("role") == "assistant"
        ]
        completion = "\n".join(str(t) for t in turns)[:_TEXT_CHARS]
        table.append(
            [
                record.get("step"),
                record.get("group"),
                _rounded(record.get("reward")),
                _rounded(record.get("advantage")),
                record.get("finish_reason"),
                len(record.get("tool_calls", [])),
                completion,
            ]
        )
    return table


def _rounded(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value


def _markdown_table(columns: Sequence[str], data: Sequence[Sequence[Any]]) -> str:
    def cell(value: Any) -> str:
        text = str(value).replace("|", "\\|").replace("\r\n", "\n").replace("\r", "\n")
        return text.replace("\n", "<br>")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in data]
    return "\n".join(lines)


# The wandb run id of a run directory, kept so that a resumed run logs into the same run.
WANDB_ID_FILE = "wandb_run_id"


def rejoin_arguments(name: str, log_dir: Path, resumed: bool) -> dict[str, Any]:
    """What makes tracker ``name`` log a resumed run into the run it started.

    wandb: the run's id, made on the first start and kept in ``log_dir``, with
    ``resume="allow"``; trackio: ``resume="allow"`` for the same run name on a resumed run;
    TensorBoard: nothing, it appends to the same log directory.
    """
    if name == "wandb":
        path = log_dir / WANDB_ID_FILE
        run_id = path.read_text(encoding="utf-8").strip() if path.is_file() else ""
        if not run_id:
            run_id = uuid.uuid4().hex[:12]
            log_dir.mkdir(parents=True, exist_ok=True)
            with atomic_file(path) as tmp:
                tmp.write_text(run_id + "\n", encoding="utf-8")
        return {"id": run_id, "resume": "allow"}
    if name == "trackio" and resumed:
        return {"resume": "allow"}
    return {}


def _start(name: str, run_name: str, log_dir: Path, project: str, resumed: bool = False) -> Any:
    """An accelerate tracker, started; it runs in the one process that reports the run.
    A ``resumed`` run rejoins the tracker run it started (:func:`rejoin_arguments`)."""
    rejoin = rejoin_arguments(name, log_dir, resumed)
    from accelerate.state import PartialState
    from accelerate.tracking import TensorBoardTracker, TrackioTracker, WandBTracker

    # accelerate's trackers log through its logger, which needs its process state: made
    # here from this process's environment (an initialised process group is reused).
    PartialState()
    if name == "tensorboard":
        tracker: Any = TensorBoardTracker(run_name, log_dir)
    elif name == "wandb":
        tracker = WandBTracker(project or run_name, name=run_name, **rejoin)
    else:
        tracker = TrackioTracker(project or run_name, name=run_name, **rejoin)
    tracker.main_process_only = False  # only the reporting process makes trackers
    tracker.start()
    return tracker


class Trackers:
    """The started trackers of a run: scalars per step, a sample table per rollout dump."""

    def __init__(
        self,
        names: Sequence[str],
        *,
        run_name: str,
        log_dir: str | Path,
        project: str = "",
        config: Mapping[str, Any] | None = None,
        start: Callable[..., Any] = _start,
        resumed: bool = False,
    ) -> None:
        check_installed(names)
        self.names = list(names)
        self._trackers: dict[str, Any] = {}
        for name in self.names:
            again = {"resumed": True} if resumed else {}
            tracker = start(name, run_name, Path(log_dir), project, **again)
            self._trackers[name] = tracker
            if config:
                tracker.store_init_configuration(_hparams(config))

    @property
    def active(self) -> list[str]:
        return list(self._trackers)

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        numbers = finite_numbers(metrics)
        if numbers:
            for tracker in self._trackers.values():
                tracker.log(numbers, step=step)

    def log_samples(self, name: str, records: Sequence[Mapping[str, Any]], step: int) -> None:
        """A table of the first episodes of a dump, in each tracker's table form."""
        data = sample_table(records)
        if not data:
            return
        for kind, tracker in self._trackers.items():
            if kind == "wandb":
                tracker.log_table(name, columns=TABLE_COLUMNS, data=data, step=step)
            elif kind == "trackio":
                import trackio

                tracker.log({name: trackio.Table(columns=TABLE_COLUMNS, data=data)}, step=step)
            else:
                tracker.log({name: _markdown_table(TABLE_COLUMNS, data)}, step=step)

    def close(self) -> None:
        trackers, self._trackers = self._trackers, {}
        for tracker in trackers.values():
            tracker.finish()


def _hparams(config: Mapping[str, Any]) -> dict[str, Any]:
    """Config values trackers accept as hyperparameters (bool, int, float, str)."""
    return {k: v for k, v in config.items() if isinstance(v, bool | int | float | str)}


__all__ = [
    "TABLE_COLUMNS",
    "TRACKERS",
    "TrackerError",
    "Trackers",
    "check_installed",
    "parse_report_to",
    "rejoin_arguments",
    "sample_table",
    "tracker_names",
]
