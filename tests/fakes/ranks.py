"""Two CPU ranks under torchrun, shared by tests/placement/test_distributed.py and
test_fsdp.py: the launch (the test's side) and one training step (the ranks' side).

Each of those test files is also the script the ranks run (its ``__main__`` block).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.fakes.repo import REPO


def launch_torchrun(
    script: Path,
    args: list[str],
    out: Path,
    timeout: float,
    monitor_interval: float | None = None,
) -> tuple[int, str, float]:
    """Run ``script args...`` on two CPU ranks under torchrun; (exit code, output, seconds).

    The whole process group is killed when it outlives ``timeout``, and the test fails with
    the tail of the output, so a hung collective never hangs the suite. ``monitor_interval``
    is how often torchrun looks at its ranks: once it sees one dead it kills the others, so a
    test of what a surviving rank reports gives that rank a few seconds first.
    """
    import pytest

    out.mkdir(parents=True, exist_ok=True)
    torchrun = Path(sys.executable).with_name("torchrun")
    cmd = [str(torchrun), "--standalone", "--nproc_per_node=2"]
    if monitor_interval is not None:
        cmd.append(f"--monitor-interval={monitor_interval}")
    cmd += [str(script), *args]
    # The script is a test module run by its path; its ranks import `tests.fakes` from the
    # checkout's root.
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}
    began = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"torchrun {' '.join(args)} did not end within {timeout}s:\n{output[-4000:]}")
    return proc.returncode, output, time.monotonic() - began


def train_one_step(trainer: Any, groups: list[Any]) -> Any:
    """One training step of a built ``trainer`` on rollout ``groups`` (step 1, policy
    version 0, reward baseline 0): what each rank computes, and one process on them all."""
    from agentrl.training.step import train_on_groups

    return train_on_groups(
        groups,
        step=1,
        current_version=0,
        reward_baseline=0.0,
        settings=trainer.settings,
        models=trainer.models,
        optimization=trainer.optimization,
        beta=trainer.beta,
    )
