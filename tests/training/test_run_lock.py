"""One owner per run directory: a second run is refused naming the holder, a dead holder's
lock is taken over and said, and a run that wrote nothing leaves no directory behind."""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

import pytest
from agentrl.cli import main
from agentrl.errors import EXIT_DATA
from agentrl.utils.run_lock import LOCK_NAME, RunDirLocked, RunLock


def _hold(directory: Path, pid: int = 4242, host: str = "node-7") -> int:
    """Lock ``directory`` as another process would (an open file description of its own)."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, f"{pid} {host}\n".encode())
    return fd


def test_a_held_run_directory_is_refused_naming_the_holder(tmp_path):
    fd = _hold(tmp_path / "run")
    try:
        with pytest.raises(RunDirLocked, match=r"in use by another run \(PID 4242 on node-7"):
            RunLock(tmp_path / "run").acquire()
    finally:
        os.close(fd)
    with RunLock(tmp_path / "run", log=lambda _: None) as lock:  # free again once released
        assert (lock.path).read_text().split() == [str(os.getpid()), socket.gethostname()]


def test_a_lock_left_by_a_dead_process_is_taken_over_and_said(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_NAME).write_text("999999 old-host\n")  # no flock: its holder is gone
    said: list[str] = []
    with RunLock(run, said.append):
        assert (run / LOCK_NAME).read_text().startswith(f"{os.getpid()} ")
    assert len(said) == 1 and "taking over the lock left by PID 999999 on old-host" in said[0]
    assert not (run / LOCK_NAME).exists() and run.is_dir()  # the run's own directory stays


def test_a_lock_on_a_new_directory_leaves_nothing_when_nothing_was_written(tmp_path):
    with RunLock(tmp_path / "a" / "b"):
        assert (tmp_path / "a" / "b" / LOCK_NAME).is_file()
    assert not (tmp_path / "a").exists()
    with RunLock(tmp_path / "c"):
        (tmp_path / "c" / "metrics.jsonl").write_text("{}\n")
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["metrics.jsonl"]


def test_one_process_may_nest_locks_on_one_directory(tmp_path):
    with RunLock(tmp_path / "run"), RunLock(tmp_path / "run"):
        pass
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", ["train", "sft"])
def test_a_second_train_or_sft_on_a_held_directory_exits_1_in_one_line(
    command, run_files, tmp_path, capsys
):
    run = tmp_path / "run"
    fd = _hold(run, pid=31337, host="other-box")
    try:
        if command == "train":
            argv = [
                "train",
                "--model",
                run_files / "model",
                "--data",
                run_files / "prompts.jsonl",
                "--save_dir",
                tmp_path,
                "--save_weight",
                "run",
                "--total_steps",
                "1",
                "--progress",
                "0",
                "--report",
                "0",
            ]
        else:
            argv = ["sft", "--output", run, "--steps", "1", "--no_progress"]
        code = main([str(a) for a in argv])
    finally:
        os.close(fd)
    err = capsys.readouterr().err
    assert code == EXIT_DATA, err
    assert "Traceback" not in err
    line = [x for x in err.splitlines() if ": error: " in x]
    assert len(line) == 1 and "PID 31337 on other-box" in line[0], err
    assert sorted(p.name for p in run.iterdir()) == [LOCK_NAME]  # nothing written
