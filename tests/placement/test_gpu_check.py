"""`benches/gpu_check.sh`: valid bash, and its CPU dry run passes every step."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benches" / "gpu_check.sh"


def test_gpu_check_is_valid_bash():
    bash = shutil.which("bash")
    assert bash is not None
    subprocess.run([bash, "-n", str(SCRIPT)], check=True)


def test_gpu_check_rejects_unknown_arguments():
    out = subprocess.run(["bash", str(SCRIPT), "--nope"], capture_output=True, text=True)
    assert out.returncode == 2 and "usage" in out.stderr


@pytest.mark.slow  # every step on the CPU: about two minutes on a busy 2-core machine
def test_gpu_check_cpu_dry_run(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "WORK": str(tmp_path / "work")}
    out = subprocess.run(
        ["bash", str(SCRIPT), "--cpu-dry-run"], capture_output=True, text=True, env=env, timeout=900
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    table = out.stdout.split("== agentrl GPU check (cpu) ==")[-1]
    for name in ("tiny-sft", "tiny-rl-check", "fsdp-rl", "fsdp-rl-check", "engine-vs-hf"):
        assert any(line.startswith(name) and " ok " in line for line in table.splitlines()), (
            name,
            table,
        )
    assert "FAILED" not in table
