"""Run outputs: metrics JSONL, progress lines, trackers, debug samples, PNG report."""

from __future__ import annotations

import io
import json
import sys
from typing import ClassVar

import pytest
from agentrl.observability import (
    MetricsLog,
    ProgressDisplay,
    RunObserver,
    eval_metrics_from_details,
    format_step_line,
    mean_details,
    read_metrics,
    write_report,
)
from agentrl.observability import trackers as trackers_module
from agentrl.observability.report import moving_average, report_panels, series
from agentrl.observability.trackers import (
    TABLE_COLUMNS,
    TRACKERS,
    TrackerError,
    Trackers,
    check_installed,
    installed,
    parse_report_to,
    tracker_names,
)
from agentrl.trajectory import RolloutGroup, Trajectory

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_metrics_lines_are_json_with_null_for_non_finite(tmp_path):
    log = MetricsLog(tmp_path / "m.jsonl")
    log.write(1, "train", {"reward/mean": 1.5, "policy/kl_ref": float("nan"), "flag": True})
    log.close()
    (line,) = (tmp_path / "m.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record == {
        "step": 1,
        "kind": "train",
        "reward/mean": 1.5,
        "policy/kl_ref": None,
        "flag": 1,
    }


def test_resumed_metrics_drop_lines_after_the_resume_step(tmp_path):
    path = tmp_path / "m.jsonl"
    log = MetricsLog(path)
    for step in range(1, 6):
        log.write(step, "train", {"x": float(step)})
    log.close()
    with open(path, "a") as handle:
        handle.write('{"step": 6, "kind": "tr')  # torn by a crash
    resumed = MetricsLog(path, resume_step=3)
    resumed.write(4, "train", {"x": 40.0})
    resumed.close()
    assert [(r["step"], r["x"]) for r in read_metrics(path)] == [(1, 1), (2, 2), (3, 3), (4, 40)]


def test_fresh_metrics_log_starts_empty(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 9, "kind": "train"}\n')
    MetricsLog(path).close()
    assert read_metrics(path) == []


def test_plain_progress_prints_a_line_every_log_interval():
    stream = io.StringIO()
    display = ProgressDisplay(total=4, enabled=True, log_interval=2, stream=stream)
    assert not display.live  # not a terminal
    for step in range(1, 5):
        display.update(step, {"reward/mean": 0.5 * step, "policy/kl_ref": 0.01})
    display.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("step 2/4") and "R 1.000" in lines[0]
    assert "KL/ent/clip 0.0100/-/-" in lines[0]


def test_step_line_shows_missing_numbers_as_dashes():
    line = format_step_line(3, 10, {})
    assert line.startswith("step 3/10 v-") and "tok/s" in line


def test_details_average_and_map_to_the_eval_metric_names():
    means = mean_details([{"exact_match": 1.0, "x": float("nan")}, {"exact_match": 0.0, "x": 2}])
    assert means == {"exact_match": 0.5, "x": 2.0}
    out = eval_metrics_from_details(1.25, {"exact_match": 0.5, "correct_tool_choice": 0.75})
    assert out["eval/reward"] == 1.25
    assert out["eval/exact_match"] == 0.5
    assert out["eval/tool_correct_choice_rate"] == 0.75
    assert out["eval_dashboard/accuracy_exact_match"] == 0.5
    assert out["eval/unfinished_rate"] == 0.0


def test_report_to_names_are_checked_and_missing_packages_name_the_extra():
    assert parse_report_to(" wandb,tensorboard,wandb ") == ["wandb", "tensorboard"]
    with pytest.raises(TrackerError, match="unknown tracker 'neptune'"):
        parse_report_to("neptune")
    missing = [n for n in TRACKERS if not installed(TRACKERS[n][0])]
    if not missing:
        pytest.skip("every tracker package is installed")
    with pytest.raises(TrackerError, match=rf"pip install 'agentrl\[{missing[0]}\]'"):
        check_installed([missing[0]])


def test_old_tracker_options_map_onto_report_to():
    names, warning = tracker_names("", tensorboard_dir="tb", use_wandb=False)
    assert names == ["tensorboard"] and warning == ""
    names, warning = tracker_names("trackio", tensorboard_dir="", use_wandb=True)
    if installed("wandb"):
        assert names == ["trackio", "wandb"] and warning == ""
    else:
        assert names == ["trackio"] and "wandb is not installed" in warning


class _FakeTracker:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def store_init_configuration(self, values):
        self.calls.append(("config", values))

    def log(self, values, step=None):
        self.calls.append(("log", values, step))

    def log_table(self, name, columns, data, step=None):
        self.calls.append(("table", name, columns, data, step))

    def finish(self):
        self.calls.append(("finish",))


def test_trackers_get_config_scalars_and_a_sample_table(monkeypatch):
    made: dict[str, _FakeTracker] = {}

    def start(name, run_name, log_dir, project):
        made[name] = _FakeTracker()
        return made[name]

    monkeypatch.setattr(trackers_module, "installed", lambda module: True)
    trackers = Trackers(
        ["wandb", "tensorboard"],
        run_name="r",
        log_dir="x",
        config={"lr": 0.1, "tags": [1]},
        start=start,
    )
    trackers.log({"reward/mean": 1.5, "bad": float("nan"), "text": "x"}, step=3)
    record = {
        "step": 3,
        "group": 0,
        "reward": 2.0,
        "advantage": 0.5,
        "finish_reason": "answered",
        "tool_calls": [{}],
        "messages": [{"role": "assistant", "content": "a|b"}],
    }
    trackers.log_samples("train_episodes", [record], step=3)
    trackers.close()
    wandb, tb = made["wandb"].calls, made["tensorboard"].calls
    assert wandb[0] == ("config", {"lr": 0.1}) and wandb[1] == ("log", {"reward/mean": 1.5}, 3)
    assert wandb[2] == (
        "table",
        "train_episodes",
        TABLE_COLUMNS,
        [[3, 0, 2.0, 0.5, "answered", 1, "a|b"]],
        3,
    )
    assert (
        tb[2][0] == "log"
        and "| 3 | 0 | 2.0 | 0.5 | answered | 1 | a\\|b |" in tb[2][1]["train_episodes"]
    )
    assert wandb[-1] == ("finish",) and tb[-1] == ("finish",)


def _records() -> list[dict]:
    out = []
    for step in range(1, 21):
        out.append(
            {
                "step": step,
                "kind": "train",
                "reward/mean": step * 0.1,
                "reward_detail/exact_match": step / 20,
                "policy/kl_ref": 0.001 * step,
                "policy/entropy": 2.0 - step * 0.05,
            }
        )
    out += [
        {"step": 0, "kind": "eval", "eval/exact_match": 0.2, "eval/reward": 0.1},
        {"step": 20, "kind": "eval", "eval/exact_match": 0.4, "eval/reward": 0.9},
    ]
    return out


@pytest.mark.slow
def test_report_is_a_png_with_the_curves(tmp_path):
    path = write_report(_records(), tmp_path / "report.png")
    assert path is not None
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000
    assert series(_records(), "eval", "eval/exact_match") == ([0, 20], [0.2, 0.4])


def _drawn(records):
    """Each panel's lines that have data in ``records``, by panel title."""
    return {
        title: [label for label, kind, key in lines if series(records, kind, key)[0]]
        for title, lines in report_panels(records)
    }


def test_report_draws_the_reward_functions_terms_and_not_the_unused_builtin_reward():
    # A function-calling run: the built-in reward's columns are scored for every batch,
    # but it is not what trains, so its flat curves would only mislead.
    step = {
        "reward/mean": 1.2,
        "reward_detail/exact_match": 0.0,
        "reward_detail/tool_success_rate": 0.0,
        "reward_fn/function_call/mean": 1.2,
        "reward_fn/function_call/std": 0.5,
        "reward_fn/function_call/valid/mean": 0.4,
        "reward_fn/function_call/names/mean": 0.7,
        "answer/no_call_rate": 0.25,
    }
    records = [{"kind": "train", "step": s, **step} for s in (1, 2)]
    drawn = _drawn(records)
    assert drawn["Reward"] == ["train", "function_call"]
    assert drawn["Accuracy"] == ["function_call/valid", "function_call/names"]
    assert drawn["Tool use"] == ["no call (answers)"]
    # The built-in reward among the functions: its columns are drawn again.
    mixed = [{**r, "reward_fn/tool_use/mean": 0.5} for r in records]
    assert "train exact" in _drawn(mixed)["Accuracy"]
    assert "success" in _drawn(mixed)["Tool use"]
    # The default run (the built-in reward alone) draws what it always did.
    builtin = [
        {"kind": "train", "step": s, "reward/mean": 1.0, "reward_detail/exact_match": 0.5}
        for s in (1, 2)
    ]
    assert _drawn(builtin)["Accuracy"] == ["train exact"]


def test_report_is_skipped_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert write_report(_records(), tmp_path / "r.png") is None
    assert not (tmp_path / "r.png").exists()


def test_moving_average_is_trailing():
    assert moving_average([1.0, 3.0, 5.0, 7.0], 2) == [1.0, 2.0, 4.0, 6.0]


def _group() -> RolloutGroup:
    traj = Trajectory(
        prompt="p",
        messages=[],
        tools=None,
        gt=["3"],
        completion="c",
        context="",
        prompt_ids=[1],
        turn_outputs=["<answer>3</answer>"],
    )
    return RolloutGroup(
        prompt="What is 1+2?",
        data_index=7,
        policy_version=2,
        trajectories=[traj, traj],
        created_at=0.0,
    )


@pytest.mark.slow
def test_observer_writes_metrics_debug_samples_and_report(tmp_path, capsys):
    observer = RunObserver(tmp_path / "run", total_steps=4, progress=False, debug_interval=2)
    observer.evaluation(0, {"eval/exact_match": 0.1, "eval/reward": 0.0}, label="eval-init")
    for step in range(1, 5):
        observer.train_step(step, {"reward/mean": float(step)})
        observer.debug_sample(step, [_group()], [1.0, 2.0], [{"exact_match": 1.0}] * 2)
    report = observer.close()
    err = capsys.readouterr().err
    assert err.count("[debug] step") == 2 and "prompt #7, policy version 2" in err
    assert "[eval-init] step 0" in err and "exact 0.100" in err
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert [r["kind"] for r in records] == ["eval", "train", "train", "train", "train"]
    assert records[0]["label"] == "eval-init"
    assert report is not None and report.read_bytes().startswith(PNG_MAGIC)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_progress_bar_shows_key_numbers_and_periodic_lines():
    stream = _Terminal()
    display = ProgressDisplay(total=12, enabled=True, log_interval=1, stream=stream)
    assert display.live
    for step in range(1, 13):
        display.update(
            step,
            {
                "reward/mean": 1.0,
                "reward_detail/exact_match": 0.25,
                "perf/tokens_per_sec": 321.0,
                "async/queued": 3.0,
            },
        )
    display.log("a message")
    display.close()
    text = stream.getvalue()
    assert "a message" in text
    assert text.count("step 10/12") == 1 and text.count("step 12/12") == 1  # every 10 + last
    assert "exact 0.25" in text and "321 tok/s" in text and "Q 3" in text


def test_rare_spikes_do_not_flatten_a_panel():
    from agentrl.observability.report import robust_top

    calm = [0.05 + 0.001 * i for i in range(40)]
    assert robust_top(calm) is None
    top = robust_top([*calm, 12.0])
    assert top is not None and 0.1 < top < 0.2
    assert robust_top([0.0] * 30 + [1.0]) is None  # nothing typical to scale to


class _FakeSummaryWriter:
    """Stands in for torch's SummaryWriter (tensorboard itself is not a test dependency)."""

    made: ClassVar[list[_FakeSummaryWriter]] = []

    def __init__(self, log_dir, **kwargs):
        self.log_dir, self.calls = log_dir, []
        _FakeSummaryWriter.made.append(self)

    def __getattr__(self, name):
        return lambda *args, **kwargs: self.calls.append((name, args))


def test_accelerates_tensorboard_tracker_starts_outside_an_accelerator(monkeypatch, tmp_path):
    """The real accelerate tracker class, started the way a run starts it."""
    import types

    fake = types.ModuleType("torch.utils.tensorboard")
    fake.SummaryWriter = _FakeSummaryWriter
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", fake)
    monkeypatch.setattr(trackers_module, "installed", lambda module: True)
    trackers = Trackers(["tensorboard"], run_name="r", log_dir=tmp_path, config={"lr": 0.5})
    trackers.log({"reward/mean": 2.0}, step=4)
    trackers.log_samples("train_episodes", [{"step": 4, "reward": 1.0, "messages": []}], step=4)
    trackers.close()
    (writer,) = _FakeSummaryWriter.made
    names = [name for name, _ in writer.calls]
    assert writer.log_dir == str(tmp_path / "r")
    assert names[0] == "add_hparams" and ("add_scalar", ("reward/mean", 2.0)) in [
        (n, a[:2]) for n, a in writer.calls
    ]
    assert "add_text" in names and names[-1] == "close"
