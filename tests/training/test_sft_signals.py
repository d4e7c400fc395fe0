"""`agentrl sft` stops like `agentrl train`: SIGTERM finishes the step, saves a checkpoint,
exits 143, and `--resume` continues from it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agentrl.errors import EXIT_SIGTERM

REPO = Path(__file__).resolve().parents[2]
TINY = (
    "vocab_size=3072,hidden_size=32,num_layers=2,num_heads=2,num_kv_heads=1,head_dim=16,"
    "intermediate_size=64,corpus_tasks=100"
)


def _sft(out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "agentrl.cli",
        "sft",
        "--tiny",
        TINY,
        "--num_demos",
        "40",
        "--eval_tasks",
        "2",
        "--eval_interval",
        "0",
        "--save_interval",
        "0",
        "--steps",
        "100000",
        "--output",
        str(out),
        "--no_progress",
        "--device",
        "cpu",
        *extra,
    ]


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(REPO / "python"), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def _stop_after_steps(out: Path, *extra: str, lines: int) -> tuple[int, str, str]:
    process = subprocess.Popen(
        _sft(out, *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
    )
    metrics = out / "metrics.jsonl"
    deadline = time.monotonic() + 240
    try:
        while not (metrics.is_file() and len(metrics.read_text().splitlines()) >= lines):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        out_text, err_text = process.communicate(timeout=240)
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, out_text, err_text


@pytest.mark.slow
def test_sigterm_saves_a_checkpoint_and_resume_continues_it(tmp_path):
    out = tmp_path / "sft"
    code, stdout, stderr = _stop_after_steps(out, lines=1)  # a line every 10 steps
    assert code == EXIT_SIGTERM, stderr
    assert "SIGTERM received" in stdout and "agentrl sft --from_resume true" in stdout
    saved = sorted((out / "checkpoints").glob("step-*"))
    assert len(saved) == 1 and (saved[0] / "state.pt").is_file()
    step = int(saved[0].name.split("-")[1])
    assert step >= 10
    logged = len((out / "metrics.jsonl").read_text().splitlines())
    assert not (out / "config.json").exists()  # the unfinished model is not published

    code, stdout, stderr = _stop_after_steps(out, "--resume", lines=logged + 1)
    assert code == EXIT_SIGTERM, stderr
    assert f"resumed from {saved[0]} at step {step}" in stdout
    assert int(sorted((out / "checkpoints").glob("step-*"))[-1].name.split("-")[1]) > step
