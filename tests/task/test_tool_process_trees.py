"""A tool's processes die with it: a tool that starts children and then hangs leaves
none of them behind after its timeout (each tool worker leads its own process group)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from agentrl.tools import ToolRegistry


def fork_and_hang(pid_file: str) -> str:
    """Starts a shell that starts `sleep 3000` in the background, then hangs.

    Args:
        pid_file: where the shell writes its own and its child's process id
    """
    script = f'sleep 3000 & echo "$$ $!" > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; wait'
    subprocess.Popen(["sh", "-c", script])
    while True:
        time.sleep(3600)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def test_a_tool_that_forks_then_hangs_leaves_no_process_after_its_timeout(tmp_path) -> None:
    registry = ToolRegistry(timeout=1.5, max_result_chars=4096)
    registry.register(fork_and_hang)
    pid_file = tmp_path / "pids"
    event = registry.execute({"name": "fork_and_hang", "arguments": {"pid_file": str(pid_file)}})
    assert event["result"] == {"error": "timed out after 1.5s"}
    shell, sleeper = (int(p) for p in pid_file.read_text().split())
    deadline = time.monotonic() + 5.0
    while (_running(shell) or _running(sleeper)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(shell) and not _running(sleeper)
    assert os.getpid() != shell  # the pids are the tool's children, not this process
